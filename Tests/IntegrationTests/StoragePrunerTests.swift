import Foundation
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// Issue 15 item 6: nonces, sessions and idempotency records are deleted on a schedule, and
/// one stream cannot grow the nonce table without bound.
@Suite struct StoragePrunerTests {
    static func after(_ time: Timestamp, seconds: Int64) -> Timestamp {
        Timestamp(millisecondsSince1970: time.millisecondsSince1970 + seconds * 1000)
    }

    @Test func expiredNoncesSessionsAndOldIdempotencyRecordsAreDeleted() async throws {
        let node = try await TestNode.start("prune") { $0.resources.pruneIntervalSeconds = 1 }
        // Alice logs in (a used nonce, a session), creates a conversation (a record keyed by the
        // conversation's id) and marks it read (a record keyed by a request id).
        let alice = try await node.session("alice", device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: ["alice", "bob"])
        let (_, sent) = try await MessagingTests.send(alice, conversation, "hello")
        let markID = UUID()
        let mark = Frame.markAllRead(
            MarkAllRead(requestID: markID, conversationID: conversation, upTo: try #require(sent.position)))
        try await alice.command(mark, id: markID)
        // Another stream is handed three nonces over the wire and uses none.
        let idle = try await node.connect()
        _ = try await idle.hello()
        var nonces: [String] = []
        for _ in 0..<3 { nonces.append(try await idle.nonce()) }

        let now = Timestamp.now()
        // Nothing has expired yet.
        #expect(try await node.server.pruner.run(now: now) == StoragePruner.Pruned())
        // After the nonces' 10 minutes: the four nonces go, the rest stays.
        let later = try await node.server.pruner.run(now: Self.after(now, seconds: 11 * 60))
        #expect(later == StoragePruner.Pruned(nonces: 4, sessions: 0, idempotencyRecords: 0))
        // A pruned nonce is unknown now.
        let answer = try await idle.authenticate(
            token: try node.dev.mintToken(user: "bob", nonce: nonces[0]), device: UUID())
        guard case .error(let error) = answer else {
            Issue.record("a pruned nonce authenticated: \(answer)")
            return
        }
        #expect(error.code == .unknownNonce)
        // Six days on, the idempotency record is still kept (the spec promises 7 days).
        let sixDays = try await node.server.pruner.run(now: Self.after(now, seconds: 6 * 24 * 3600))
        #expect(sixDays.idempotencyRecords == 0 && sixDays.sessions == 0)
        #expect(try await alice.command(mark, id: markID).requestID == markID)  // still a retry
        // After 31 days: the request-id record (older than 7 days) and the session (30 days)
        // are gone; the conversation's record stays with the conversation.
        let month = try await node.server.pruner.run(now: Self.after(now, seconds: 31 * 24 * 3600))
        #expect(month.idempotencyRecords == 1)
        #expect(month.sessions == 1)
        let create = Frame.createConversation(
            CreateConversation(
                conversationID: conversation, participants: ["alice", "bob"],
                options: ConversationOptions(isDistinct: false)))
        #expect(try await alice.command(create, id: conversation.uuid).conversationID == conversation)
        // The schedule (every second here) runs by itself: more runs than the four above.
        try await ResourceLimitTests.eventually("a scheduled prune", timeout: .seconds(90)) {
            node.server.pruner.history.runs > 4
        }
        await alice.close()
        await idle.close()
        await node.stop()
    }

    @Test func aStreamMayBeIssuedOnlyAFewNonces() async throws {
        let node = try await TestNode.start("nonce-cap")
        let healthy = try await ResourceLimitTests.HealthyPair.start(node)
        let greedy = try await node.connect()
        _ = try await greedy.hello()
        let limit = NonceLimits().perStream
        for _ in 0..<limit { _ = try await greedy.nonce() }
        greedy.send(.nonceRequest(NonceRequest(requestID: UUID())))
        let frames = try await greedy.framesUntilEnd()
        guard case .error(let error) = frames.last else {
            Issue.record("expected a fatal ERROR, got \(frames)")
            return
        }
        #expect(error.code == .limitExceeded && error.isFatal)
        try await healthy.expectHealthy()
        await greedy.close()
        await healthy.close()
        await node.stop()
    }
}
