/// The shape of every Lamina module's error type (one per module): a stable code, a
/// human-readable reason and the source location that raised it. Equality and hashing
/// ignore the location: two errors are the same when their code and reason are.
/// (`LaminaTransport` knows nothing of the domain and keeps a type of the same shape.)
public protocol LaminaError: Error, Hashable, Sendable, CustomStringConvertible {
    associatedtype Code: Hashable & Sendable & CustomStringConvertible
    var code: Code { get }
    var reason: String { get }
    var file: String { get }
    var line: Int { get }
}

extension LaminaError {
    public var description: String { "\(code): \(reason)" }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.code == rhs.code && lhs.reason == rhs.reason
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(reason)
    }
}
