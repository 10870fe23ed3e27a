import Foundation
import LaminaNode
import Testing

/// Issue #31: a client whose device vanished without a reset (here: it stops reading, so the
/// node's PINGs are never answered) is closed by the node within the client liveness bound
/// (`resources.clientPingAfterQuietSeconds` + `clientPingDeadlineSeconds`), its session ends,
/// and a quiet client that answers keeps its session.
@Suite struct VanishedClientTests {
    @Test func theNodeClosesAQuietClientThatNoLongerAnswersAndKeepsOneThatDoes() async throws {
        let node = try await TestNode.start("vanished-client") {
            $0.resources.clientPingAfterQuietSeconds = 1
            $0.resources.clientPingDeadlineSeconds = 1
        }
        let quiet = try await node.session("alice", device: UUID())
        let vanishing = try await node.session("bob", device: UUID())
        #expect(node.server.sessionCount == 2)

        try await vanishing.connection.setReading(false)
        let stopped = ContinuousClock.now
        try await ResourceLimitTests.eventually("the node to close the client that stopped answering") {
            node.server.transport.counts.closedUnanswered == 1 && node.server.sessionCount == 1
        }
        let closedAfter = ContinuousClock.now - stopped
        // The bound is 2 s; a loaded machine gets slack, not a pass for TCP's minutes.
        #expect(closedAfter < .seconds(10), "closed \(closedAfter) after the client stopped answering")
        // The quiet client that answers has been PINGed and is still there.
        let (id, _) = try await MessagingTests.send(
            quiet, try await MessagingTests.conversation(quiet, with: ["alice", "carol"]), "still here")
        #expect(try await node.server.store.read { r in try r.message(id) } != nil)
        #expect(node.server.transport.counts.closedUnanswered == 1)
        print("vanished client: closed \(closedAfter) after it stopped answering (bound 2 s)")
        await quiet.close()
        await node.stop()
    }
}
