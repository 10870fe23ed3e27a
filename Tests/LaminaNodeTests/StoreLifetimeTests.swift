import Foundation
import LaminaModel
import Testing

@testable import LaminaNode
@testable import LaminaNodeFuzzChecks
@testable import LaminaStore

/// A store and engine that were shut down and dropped are freed (their threads let go of
/// them): a process that opens many in turn, as the test suites and the Server API fuzz
/// target do, does not keep every one. Before, each StorageWriter's thread closure held the
/// writer for good, and with it the pool, the caches and every cached statement.
@Suite struct StoreLifetimeTests {
    final class Weak: @unchecked Sendable {
        weak var store: NodeStore?
        weak var engine: NodeEngine?
        weak var writer: StorageWriter?
        weak var pool: AnyObject?  // the GRDB pool
        var released: Bool { store == nil && engine == nil && writer == nil && pool == nil }

        func watch(_ store: NodeStore, _ engine: NodeEngine) {
            self.store = store
            self.engine = engine
            writer = store.writer
            pool = store.pool
        }
    }

    @Test func aClosedStoreAndEngineAreFreed() async throws {
        let weak = Weak()
        do {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "lamina-lifetime-\(UUID().uuidString)")
            let store = try NodeStore(path: directory.appendingPathComponent("node.sqlite").path)
            let engine = try NodeEngine(store: store, configuration: NodeEngineConfiguration(nodeID: NodeID(3)))
            let now = Timestamp.now()
            let later = Timestamp(millisecondsSince1970: now.millisecondsSince1970 + 60_000)
            try await store.write { tx in try tx.issueNonce("n", issuedAt: now, expiresAt: later) }
            weak.watch(store, engine)
            await engine.shutdown()
            try store.close()
            try? FileManager.default.removeItem(at: directory)
        }
        try await Self.eventually { weak.released }
    }

    /// The Server API fuzz target's environment (engine, store and API over the seeds' fixtures), closed.
    @Test func aClosedServerAPIFuzzEnvironmentIsFreed() async throws {
        let weak = Weak()
        do {
            let environment = try await ServerAPIFuzzEnvironment.make()
            weak.watch(environment.store, environment.engine)
            _ = await environment.answer(
                Array(
                    "GET /apps/fuzz-app/users/alice/conversations\naccept: application/vnd.layer+json; version=3.0\n\n"
                        .utf8))
            await environment.close()
        }
        try await Self.eventually { weak.released }
    }

    static func eventually(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("still referenced after 30 s")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
