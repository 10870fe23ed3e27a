import Foundation
import Logging
import Testing

@testable import LaminaNode
@testable import LaminaStore

/// Issue 15 item 10: readiness names descriptors nearly exhausted (against the limit as it is
/// now) and a node shutting down; the health log warns once when a limit is nearly reached,
/// tells when it is back, and counts refusals since its last look.
@Suite struct NodeHealthLogTests {
    @Test func readinessFailsOnDescriptorsNearlyExhaustedAndOnShutdown() async throws {
        let h = try EngineHarness()
        let open = try #require(NodeHealth.openDescriptors())
        let stopping = LockedFlag()
        let health = NodeHealth(
            store: h.store, sessions: { 1 }, maxSessions: 100, connections: { 1 }, maxConnections: 100,
            // The limit is what is open when readiness looks (other tests open and close
            // descriptors meanwhile: a limit fixed beforehand drifted out of reach).
            descriptorLimit: { NodeHealth.openDescriptors() ?? open }, stopping: { stopping.value })
        let tight = await health.readiness()
        #expect(!tight.isReady)
        #expect(tight.text.contains("descriptors failing"), "\(tight.text)")
        #expect(tight.text.contains("serving ok"))
        stopping.set()
        let roomy = NodeHealth(
            store: h.store, sessions: { 1 }, maxSessions: 100, connections: { 1 }, maxConnections: 100,
            descriptorLimit: { open * 100 }, stopping: { stopping.value })
        let closing = await roomy.readiness()
        #expect(!closing.isReady)
        #expect(closing.text.contains("serving failing shutting down"), "\(closing.text)")
        #expect(closing.text.contains("descriptors ok"))
        await h.close()
    }

    @Test func theHealthLogWarnsOnceAndCountsRefusals() {
        func counts(
            fds: Int = 10, sessions: Int = 1, refusedSessions: Int = 0, refusedConnections: Int = 0,
            failedAccepts: Int = 0
        ) -> NodeHealthLog.Counts {
            NodeHealthLog.Counts(
                descriptors: (fds, 100), connections: (2, 100), sessions: (sessions, 10),
                refusedConnections: refusedConnections,
                failedAccepts: failedAccepts, refusedSessions: refusedSessions)
        }
        let quiet = NodeHealthLog.lines(counts(), after: nil)
        #expect(quiet.warnings.isEmpty && quiet.notices.isEmpty)
        // Slots full and sessions refused: warned...
        let full = NodeHealthLog.lines(counts(sessions: 10, refusedSessions: 3), after: (counts(), quiet.exhausted))
        #expect(full.warnings.contains { $0.contains("session slots nearly exhausted: 10 of 10") }, "\(full.warnings)")
        #expect(full.warnings.contains { $0.contains("refused 3 sessions") }, "\(full.warnings)")
        // ...once: still full, nothing new refused, nothing said.
        let still = NodeHealthLog.lines(
            counts(sessions: 10, refusedSessions: 3), after: (counts(sessions: 10, refusedSessions: 3), full.exhausted))
        #expect(still.warnings.isEmpty)
        // Descriptors run out and accepts fail; slots are free again.
        let fds = NodeHealthLog.lines(
            counts(fds: 99, refusedSessions: 3, failedAccepts: 5),
            after: (counts(sessions: 10, refusedSessions: 3), still.exhausted))
        #expect(
            fds.warnings.contains { $0.contains("file descriptors nearly exhausted: 99 of 100") }, "\(fds.warnings)")
        #expect(
            fds.warnings.contains { $0.contains("5 accepts failed (file descriptors: 99 of 100)") }, "\(fds.warnings)")
        #expect(fds.notices == ["session slots below the limit again"])
    }
}

/// A flag set once, read from any thread.
final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    func set() { lock.withLock { flag = true } }
    var value: Bool { lock.withLock { flag } }
}
