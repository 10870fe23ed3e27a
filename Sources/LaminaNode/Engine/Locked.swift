import Foundation
import NIOConcurrencyHelpers

/// A value guarded by a lock (NIOLock, the node's one lock type), for the engine's small shared tables.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NIOLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
