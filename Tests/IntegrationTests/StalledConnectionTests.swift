import Foundation
import LaminaModel
import LaminaNode
import LaminaTransport
import LaminaWire
import Testing

/// Issue 15, item 5: a connection that reads nothing. Its stream is reset once its queue
/// passes the outbound bound, what was queued is released at once (the RST_STREAM itself
/// cannot reach a peer that reads nothing), and the connection is closed after the
/// stalled-connection timeout; a healthy member of the same conversation gets everything.
@Suite struct StalledConnectionTests {
    @Test func aConnectionThatReadsNothingIsReleasedAndClosedWhileOthersGoOn() async throws {
        let node = try await TestNode.start("stalled-connection") {
            $0.limits.maxOutboundBytes = 1 << 20
            $0.limits.pacedAnswerQueueBytes = 256 << 10
            $0.resources.stalledConnectionTimeoutSeconds = 2
        }
        // Huge windows: only the sink's socket can hold the node back.
        var settings = HTTP2Settings()
        settings.initialStreamWindow = Int32.max
        settings.connectionWindow = Int32.max
        let sink = try await SyncTestClient.connect(
            url: node.server.url, caFile: node.server.prepared.certificatePath, settings: settings)
        _ = try await sink.hello()
        _ = try await sink.authenticate(user: "sink", device: UUID(), dev: node.dev)
        _ = try await sink.sync(from: 0)
        let alice = try await node.session("alice", device: UUID())
        let bob = try await node.session("bob", device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: ["alice", "bob", "sink"])
        try await sink.connection.setReading(false)

        // 16 inline parts of 2 KiB: about 33 KB per message to each member.
        let parts = try (0..<16).map { i in
            try MessagePart(text: String(repeating: Character(UnicodeScalar(UInt8(97 + i))), count: 2_048))
        }
        var sent: [MessageID] = []
        var slowest = Duration.zero
        let clock = ContinuousClock()
        while node.server.transport.counts.closedStalled == 0 {
            try #require(sent.count < 3_000, "the node never closed the connection that reads nothing")
            let start = clock.now
            let (id, _) = try await MessagingTests.send(alice, conversation, "", parts: parts)
            sent.append(id)
            // Bob reads everything as it comes, in bounded time from Alice's send.
            _ = try await bob.message(id)
            slowest = max(slowest, clock.now - start)
        }
        #expect(slowest < .seconds(10), "slowest send-to-receive for the reading member: \(slowest)")
        // The sink's session is gone; the two healthy ones stay.
        try await ResourceLimitTests.eventually("the sink's bridge to be released") {
            node.server.admission.snapshot.liveBridges == 2
        }
        #expect(node.server.sessionCount == 2)
        let (last, _) = try await MessagingTests.send(alice, conversation, "after")
        _ = try await bob.message(last)
        await alice.close()
        await bob.close()
        await node.stop()
    }

    /// The node-wide outbound budget: four members whose connections read nothing, each under
    /// its own (here very high) stream bound, are reset once the node holds more than the
    /// budget and each more than its share; a reading member gets everything, and nothing is
    /// left queued.
    @Test func slowStreamsTogetherAreBoundedByTheNodesOutboundBudget() async throws {
        let node = try await TestNode.start("outbound-budget") {
            $0.limits.maxOutboundBytes = 256 << 20  // never reached: only the node's budget acts
            $0.resources.nodeOutboundBudgetBytes = 4 << 20
            $0.resources.minimumOutboundShareBytes = 256 << 10
        }
        var settings = HTTP2Settings()
        settings.initialStreamWindow = Int32.max
        settings.connectionWindow = Int32.max
        var sinks: [SyncTestClient] = []
        for i in 0..<4 {
            let sink = try await SyncTestClient.connect(
                url: node.server.url, caFile: node.server.prepared.certificatePath, settings: settings)
            _ = try await sink.hello()
            _ = try await sink.authenticate(user: UserID("sink\(i)"), device: UUID(), dev: node.dev)
            _ = try await sink.sync(from: 0)
            sinks.append(sink)
        }
        let alice = try await node.session("alice", device: UUID())
        let bob = try await node.session("bob", device: UUID())
        let conversation = try await MessagingTests.conversation(
            alice, with: ["alice", "bob", "sink0", "sink1", "sink2", "sink3"])
        for sink in sinks { try await sink.connection.setReading(false) }

        let parts = try (0..<16).map { _ in try MessagePart(text: String(repeating: "b", count: 2_048)) }
        var sent = 0
        while node.server.outboundBudget.resets < 4 {
            try #require(sent < 3_000, "the budget never reset the four members that read nothing")
            let (id, _) = try await MessagingTests.send(alice, conversation, "", parts: parts)
            _ = try await bob.message(id)
            sent += 1
        }
        try await ResourceLimitTests.eventually("the four sessions to end") { node.server.sessionCount == 2 }
        try await ResourceLimitTests.eventually("nothing queued for them") {
            node.server.outboundBudget.total < node.server.outboundBudget.minimumShare
        }
        let (last, _) = try await MessagingTests.send(alice, conversation, "after")
        _ = try await bob.message(last)
        for sink in sinks {
            // Reading again, so the graceful close does not wait out its drain timeout.
            try await sink.connection.setReading(true)
            await sink.close()
        }
        await alice.close()
        await bob.close()
        await node.stop()
    }
}
