import Foundation
import LaminaClient
import LaminaModel
import Testing

/// Replies and threads through the SDK on a real node over TLS + HTTP/2 (issue 38 item 3):
/// a reply names its root on every device, the root shows its reply count and last reply, a
/// query controller over the thread sees replies arrive, a new device fetches one thread by
/// itself, threads stay one level deep, and replies count as unread like any message.
@Suite struct ClientSDKThreadsTests {
    static func send(
        _ client: LaminaClient, _ text: String, in conversation: ConversationID, replyTo: MessageID? = nil
    ) throws -> MessageID {
        try client.send(client.newMessage(parts: [MessagePart.with(text: text)], replyTo: replyTo), in: conversation).id
    }

    @Test func repliesReachEveryDeviceWithTheirRootAndTheRootCountsThem() async throws {
        let node = try await TestNode.start("sdk-threads")
        let alice = try ClientHarness.device("alice", on: node)
        let bob = try ClientHarness.device("bob", on: node)
        for client in [alice, bob] { try await ClientHarness.connect(client, on: node) }

        let conversation = try alice.newConversation(
            participants: ["bob"], options: ConversationOptions(isDistinct: false)
        ).id
        let root = try Self.send(alice, "lunch on Friday?", in: conversation)
        let other = try Self.send(alice, "also: the report", in: conversation)
        try await ClientHarness.waitUntil(bob, "both messages at Bob") {
            try bob.message(root) != nil && bob.message(other) != nil
        }

        // Alice watches the thread before any reply exists.
        let thread = try alice.queryController(for: Query<StoredMessage>.thread(of: root))
        #expect(try thread.start().isEmpty)

        let rootAtBob = try #require(try bob.message(root), "the root at Bob")
        #expect(rootAtBob.message.conversationID == conversation)
        let first = try Self.send(bob, "yes, 12:30", in: conversation, replyTo: root)
        let second = try Self.send(bob, "at the usual place", in: conversation, replyTo: root)
        try await ClientHarness.waitUntil(alice, "both replies at Alice, counted on the root") {
            try alice.message(second) != nil && alice.message(root)?.threadReplyCount == 2
        }
        let atAlice = try #require(try alice.message(first))
        #expect(atAlice.replyTo == root)
        #expect(try alice.message(root)?.lastThreadReply == second)
        #expect(try alice.message(other)?.threadReplyCount == 0)
        #expect(try alice.message(other)?.replyTo == nil)
        // Bob's own device counts them once its sends are acknowledged.
        try await ClientHarness.waitUntil(bob, "Bob's root counts his replies") {
            try bob.message(root)?.threadReplyCount == 2
        }
        // The thread's query holds exactly the replies, oldest first.
        let deadline = ContinuousClock.now + .seconds(30)
        while thread.objects.map(\.id) != [first, second], ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(thread.objects.map(\.id) == [first, second])
        #expect(try alice.execute(Query<StoredMessage>.thread(of: other)).isEmpty)
        thread.stop()

        // Replies are ordinary messages of the conversation for read state (SPEC §6.2): they
        // count as unread at Alice until she reads them.
        #expect(try alice.conversation(conversation)?.unreadMessageCount == 2)
        try alice.markAsRead(first)
        try await ClientHarness.waitUntil(alice, "one reply read") {
            try alice.conversation(conversation)?.unreadMessageCount == 1
        }

        // Threads are one level deep: a reply to a reply is refused before it is queued.
        #expect(throws: ClientError.self) { try Self.send(bob, "nested", in: conversation, replyTo: first) }

        // Deleting a reply for everyone: the root counts one less, and its last reply is the
        // one before.
        try bob.delete(second, mode: .allParticipants)
        try await ClientHarness.waitUntil(alice, "the deletion at Alice") {
            try alice.message(second) == nil && alice.message(root)?.threadReplyCount == 1
        }
        #expect(try alice.message(root)?.lastThreadReply == first)

        // A new device of Carol's, added later, fetches the conversation's history (the root
        // with the node's summary) and then the thread alone.
        try alice.addParticipants(["carol"], to: conversation)
        let carol = try ClientHarness.device("carol", on: node)
        try await ClientHarness.connect(carol, on: node)
        try await ClientHarness.waitUntil(carol, "the conversation at Carol") {
            try carol.conversation(conversation) != nil
        }
        let third = try Self.send(bob, "see you", in: conversation, replyTo: root)
        try await ClientHarness.waitUntil(bob, "Bob's third reply sent") {
            try bob.message(third)?.message.isSent == true
        }
        _ = try await carol.fetchHistory(of: conversation, policy: .complete, before: nil)
        let fetchedRoot = try #require(try carol.message(root))
        #expect(fetchedRoot.threadReplyCount == 2, "the node's summary: first and third, the second deleted")
        #expect(fetchedRoot.lastThreadReply == third)
        let replies = try await carol.fetchThread(of: root)
        #expect(replies == [first, third])
        #expect(try carol.message(first)?.replyTo == root)
        #expect(try carol.execute(Query<StoredMessage>.thread(of: root)).map(\.id) == [first, third])
        #expect(try carol.message(root)?.threadReplyCount == 2, "replies the summary counts are not counted twice")
        let paged = try await carol.fetchThread(of: root, after: try carol.message(first)?.message.position, count: 1)
        #expect(paged == [third])

        for client in [alice, bob, carol] { try await client.close() }
        await node.stop()
    }

    /// A snapshot's latest message is sent as history sends it (SPEC §6.2, §6.3): a root with its
    /// thread summary. Here the root is Carol's latest message (she blocks the one who replied)
    /// and she read it, so her new device's unread-only fill fetches nothing: what it shows of
    /// the thread comes from the snapshot alone.
    @Test func aDeviceThatJoinsByASnapshotShowsTheLatestRootsThread() async throws {
        let node = try await TestNode.start("sdk-threads-snapshot")
        let api = CurlAPI(node.server, http: .http1)
        let blocked = try await api.request("POST", "/users/carol/blocks", json: #"{"user_id":"bob"}"#)
        #expect(blocked.status == 204 || blocked.status == 201, "\(blocked.body)")
        let alice = try ClientHarness.device("alice", on: node)
        let bob = try ClientHarness.device("bob", on: node)
        let carol = try ClientHarness.device("carol", on: node)
        for client in [alice, bob, carol] { try await ClientHarness.connect(client, on: node) }

        let conversation = try alice.newConversation(
            participants: ["bob", "carol"], options: ConversationOptions(isDistinct: false)
        ).id
        let root = try Self.send(alice, "who is in?", in: conversation)
        try await ClientHarness.waitUntil(bob, "the root at Bob") { try bob.message(root) != nil }
        let reply = try Self.send(bob, "me", in: conversation, replyTo: root)
        try await ClientHarness.waitUntil(alice, "the reply at Alice") {
            try alice.message(root)?.threadReplyCount == 1
        }
        try await ClientHarness.waitUntil(carol, "the root at Carol") { try carol.message(root) != nil }
        try carol.markAsRead(root)
        try await ClientHarness.waitUntil(alice, "Carol's read at Alice") {
            try alice.message(root)?.message.recipientStatus["carol"] == .read
        }

        let (fresh, _) = try await ClientSDKSynchronizationTests.syncedDevice(.unreadOnly, on: node, user: "carol")
        let shown = try #require(try fresh.message(root), "the root on Carol's new device")
        #expect(shown.threadReplyCount == 1)
        #expect(shown.lastThreadReply == reply)
        #expect(try fresh.message(reply) == nil)
        for client in [alice, bob, carol, fresh] { try await client.close() }
        await node.stop()
    }
}
