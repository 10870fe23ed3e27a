import Foundation

/// An identifier of a Lamina object, rendered as `lamina:///<collection>/<uuid>`
/// (the UUID in lowercase) and carried on the wire as its 16 bytes.
public protocol LaminaIdentifier: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The path component naming the collection, e.g. `conversations`.
    static var collection: String { get }
    /// The object's UUID.
    var uuid: UUID { get }
    init(uuid: UUID)
}

extension LaminaIdentifier {
    /// A new identifier with a random (version 4) UUID.
    public static func random() -> Self { Self(uuid: UUID()) }

    /// A new identifier with a time-ordered (version 7, RFC 9562) UUID: 48 bits of Unix
    /// milliseconds, then 74 random bits. Identifiers made later sort later, so a store's
    /// index of them grows at its end instead of at random places (SPEC §7 recommends them
    /// for objects a client creates).
    public static func timeOrdered(at date: Date = Date()) -> Self {
        let ms = UInt64(max(0, date.timeIntervalSince1970 * 1000))
        var bytes = UUID().uuid
        bytes.0 = UInt8(truncatingIfNeeded: ms >> 40)
        bytes.1 = UInt8(truncatingIfNeeded: ms >> 32)
        bytes.2 = UInt8(truncatingIfNeeded: ms >> 24)
        bytes.3 = UInt8(truncatingIfNeeded: ms >> 16)
        bytes.4 = UInt8(truncatingIfNeeded: ms >> 8)
        bytes.5 = UInt8(truncatingIfNeeded: ms)
        bytes.6 = 0x70 | (bytes.6 & 0x0F)  // version 7
        bytes.8 = 0x80 | (bytes.8 & 0x3F)  // RFC 9562 variant
        return Self(uuid: UUID(uuid: bytes))
    }

    /// The identifier's URL form, `lamina:///<collection>/<uuid>`.
    public var url: String { "lamina:///\(Self.collection)/\(uuid.uuidString.lowercased())" }

    public var description: String { url }

    /// Parses the URL form. The Platform API's `layer:///<collection>/<uuid>` names the same
    /// object (a Server API id works wherever the SDK takes one). UUIDs are accepted in
    /// either case.
    public init(parsing string: String) throws(ModelError) {
        let path = "/\(Self.collection)/"
        guard let rest = identifierPath(string), rest.hasPrefix(path),
            let uuid = UUID(uuidString: String(rest.dropFirst(path.count)))
        else {
            throw ModelError(
                .invalidIdentifier,
                "'\(string.prefix(120))' is not of the form lamina:///\(Self.collection)/<uuid> (or layer:///…)")
        }
        self.init(uuid: uuid)
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.uuid.compareBytes(rhs.uuid) < 0 }
}

/// The schemes an identifier's URL form may have: Lamina's own, and the Platform API's
/// (`layer:///…`, what Layer's Server API and its webhooks hand out).
let identifierSchemes = ["lamina://", "layer://"]

/// The path of an identifier URL (`/<collection>/<uuid>…`), nil for another scheme.
func identifierPath(_ string: String) -> Substring? {
    for scheme in identifierSchemes where string.hasPrefix(scheme) {
        return string.dropFirst(scheme.count)
    }
    return nil
}

extension UUID {
    /// Compares the 16 bytes of two UUIDs in order: the byte order a node uses to break ties.
    public func compareBytes(_ other: UUID) -> Int {
        withUnsafeBytes(of: self.uuid) { a in
            withUnsafeBytes(of: other.uuid) { b in
                for i in 0..<16 where a[i] != b[i] { return a[i] < b[i] ? -1 : 1 }
                return 0
            }
        }
    }
}

/// Identifies a conversation: `lamina:///conversations/<uuid>`.
public struct ConversationID: LaminaIdentifier {
    public static let collection = "conversations"
    public let uuid: UUID
    public init(uuid: UUID) { self.uuid = uuid }
}

/// Identifies a message: `lamina:///messages/<uuid>`.
public struct MessageID: LaminaIdentifier {
    public static let collection = "messages"
    public let uuid: UUID
    public init(uuid: UUID) { self.uuid = uuid }
}

/// Identifies a piece of rich content (a part over 2 KB): `lamina:///content/<uuid>`.
public struct ContentID: LaminaIdentifier {
    public static let collection = "content"
    public let uuid: UUID
    public init(uuid: UUID) { self.uuid = uuid }
}

/// Identifies a part of a message: `lamina:///messages/<message-uuid>/parts/<part-uuid>`.
public struct MessagePartID: Hashable, Sendable, CustomStringConvertible {
    public let message: MessageID
    public let part: UUID

    public init(message: MessageID, part: UUID) {
        self.message = message
        self.part = part
    }

    public var url: String { "\(message.url)/parts/\(part.uuidString.lowercased())" }
    public var description: String { url }

    /// Parses the URL form `lamina:///messages/<uuid>/parts/<uuid>`, or the Platform API's
    /// `layer:///messages/<uuid>/parts/<uuid>`.
    public init(parsing string: String) throws(ModelError) {
        let bad = ModelError(
            .invalidIdentifier, "'\(string.prefix(120))' is not of the form lamina:///messages/<uuid>/parts/<uuid>")
        let prefix = "/messages/"
        guard let path = identifierPath(string), path.hasPrefix(prefix) else { throw bad }
        let rest = path.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false)
        guard rest.count == 3, rest[1] == "parts",
            let m = UUID(uuidString: String(rest[0])), let p = UUID(uuidString: String(rest[2]))
        else { throw bad }
        self.init(message: MessageID(uuid: m), part: p)
    }
}
