// The storage tests' shared fixtures (temporary stores on either backend, model values, writer
// gates), used by LaminaStoreTests and by the engine-level tests in LaminaNodeTests.
import Dispatch
import Foundation
import LaminaModel
import LaminaStore
import LaminaTestPostgres
import Testing

/// The store backends the storage suites run on: every assertion holds on both.
package enum StoreBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    package var testDescription: String { rawValue }
}

/// A fresh store location: a SQLite file in its own temporary directory, or a new database
/// on the test PostgreSQL server (`PostgresTestCluster`); `cleanup` removes it.
package func temporaryStoreLocation(_ backend: StoreBackend) throws -> (
    location: StoreLocation, cleanup: @Sendable () -> Void
) {
    switch backend {
    case .sqlite:
        let (path, cleanup) = temporaryDatabasePath()
        return (.sqlite(path: path), cleanup)
    case .postgres:
        return (.postgres(try PostgresLocation(url: PostgresTestCluster.newDatabase())), {})
    }
}

extension PostgresTestCluster {
    /// A new, empty database on the test server.
    package static func newLocation() throws -> PostgresLocation {
        try PostgresLocation(url: newDatabase())
    }

    /// The test server's maintenance database.
    package static func serverLocation() throws -> PostgresLocation {
        try PostgresLocation(url: server().url())
    }
}

/// A fresh store (a database in its own temporary directory, or on the test PostgreSQL
/// server), removed after the test. `body` gets the store and its path (or URL).
package func withTemporaryStore<T>(
    _ configuration: StorageConfiguration = StorageConfiguration(),
    backend: StoreBackend = .sqlite,
    _ body: (NodeStore, String) async throws -> T
) async throws -> T {
    let (location, cleanup) = try temporaryStoreLocation(backend)
    defer { cleanup() }
    let store = try NodeStore(location: location, configuration: configuration)
    let path = location.description
    do {
        let result = try await body(store, path)
        try? store.close()
        return result
    } catch {
        try? store.close()
        throw error
    }
}

/// A temporary directory path for a database, removed by `cleanup`.
package func temporaryDatabasePath() -> (path: String, cleanup: @Sendable () -> Void) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lamina-store-\(UUID().uuidString)")
    return (
        directory.appendingPathComponent("node.sqlite").path, { try? FileManager.default.removeItem(at: directory) }
    )
}

/// A one-shot signal an async test can wait on; firing before waiting is fine.
package final class Signal: @unchecked Sendable {
    private let lock = NSLock()
    private var fired = false
    private var waiter: CheckedContinuation<Void, Never>?

    package init() {}

    package func fire() {
        lock.lock()
        fired = true
        let w = waiter
        waiter = nil
        lock.unlock()
        w?.resume()
    }

    package func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            lock.lock()
            if fired {
                lock.unlock()
                c.resume()
            } else {
                waiter = c
                lock.unlock()
            }
        }
    }
}

/// Holds the writer thread inside a command until opened: lets a test queue commands
/// deterministically behind it.
package final class WriterGate: @unchecked Sendable {
    package let entered = Signal()
    private let semaphore = DispatchSemaphore(value: 0)

    package init() {}

    /// Queues a command that signals `entered` and then blocks the writer until `open()`.
    package func hold(_ store: NodeStore) throws {
        try store.submit(
            { _ in
                self.entered.fire()
                self.semaphore.wait()
                return 0
            }, completion: { _ in })
    }

    package func open() { semaphore.signal() }
}

/// Counts completions and signals when `expected` have arrived.
package final class CompletionCounter: @unchecked Sendable {
    private let lock = NSLock()
    private let expected: Int
    package private(set) var successes = 0
    package private(set) var failures: [any Error] = []
    package let done = Signal()

    package init(expected: Int) { self.expected = expected }

    package func record<T>(_ result: Result<T, any Error>) {
        lock.lock()
        switch result {
        case .success: successes += 1
        case .failure(let e): failures.append(e)
        }
        let finished = successes + failures.count == expected
        lock.unlock()
        if finished { done.fire() }
    }
}

package let nodeA = NodeID(0xA)
package let nodeB = NodeID(0xFFFF_FFFF_FFFF_FF0B)

package func hlc(_ physical: UInt64, _ logical: UInt32 = 0, _ node: NodeID = nodeA) -> HLCTimestamp {
    HLCTimestamp(physical: physical, logical: logical, node: node)
}

package func conversation(
    _ creator: UserID, _ others: Set<UserID>, distinct: Bool = true, metadata: Metadata = Metadata(),
    at ms: Int64 = 1_000
) throws -> Conversation {
    try Conversation(
        creator: creator, participants: others, options: ConversationOptions(isDistinct: distinct, metadata: metadata),
        createdAt: Timestamp(millisecondsSince1970: ms))
}

package func textMessage(
    _ text: String, in conversation: ConversationID, from sender: UserID, at position: HLCTimestamp,
    id: MessageID = .random()
) throws -> Message {
    Message(
        id: id, conversationID: conversation, sender: sender, parts: [try MessagePart(text: text)],
        sentAt: Timestamp(millisecondsSince1970: Int64(position.physical)), position: position
    )
}

/// The storage error code thrown by `body`, or nil when it did not throw a `StorageError`.
package func storageErrorCode(_ body: () async throws -> Void) async -> StorageError.Code? {
    do {
        try await body()
        return nil
    } catch let error as StorageError {
        return error.code
    } catch {
        return nil
    }
}
