import Foundation
import LaminaModel
import LaminaWire
import Testing

/// Replies on the wire against a real node (SPEC §6.2, §6.3 policy 4, §6.4 kind 21, §5.1 bit
/// 15), on SQLite and PostgreSQL: a session with replies gets a reply as `thread-message` with
/// its root and a root with its summary in history, one without gets the very message as
/// `message-created` and is refused SEND_REPLY; the node refuses a reply to a reply, to another
/// conversation's message and to a message deleted for everyone; a thread's history is paged.
@Suite struct ThreadsWireTests {
    static let alice: UserID = "alice"  // knows replies
    static let bob: UserID = "bob"  // knows replies
    static let carol: UserID = "carol"  // does not

    static func message(_ id: MessageID, at client: SyncTestClient) async throws -> Message {
        let change = try await client.change {
            if case .messageCreated(let m) = $0.event { return m.id == id }
            return false
        }
        guard case .messageCreated(let m) = change.event else { fatalError("unreachable") }
        return m
    }

    static func send(_ client: SyncTestClient, _ text: String, in conversation: ConversationID, replyTo: MessageID?)
        async throws -> MessageID
    {
        let id = MessageID.random()
        _ = try await client.command(
            .sendMessage(
                SendMessage(
                    messageID: id, conversationID: conversation, parts: [try MessagePart(text: text)],
                    replyTo: replyTo)),
            id: id.uuid)
        return id
    }

    /// The messages a FETCH_HISTORY answers, in order, and its ACK or ERROR.
    static func fetch(_ client: SyncTestClient, _ request: FetchHistory) async throws -> [Message] {
        client.send(.fetchHistory(request))
        var out: [Message] = []
        while true {
            let frame = try await client.nextFrame()
            for change in SyncTestClient.changes(in: frame) where change.seq == 0 {
                if case .messageCreated(let m) = change.event { out.append(m) }
            }
            if case .ack(let ack) = frame, ack.requestID == request.requestID { return out }
            if case .error(let e) = frame, e.requestID == request.requestID { throw CommandFailed(error: e) }
            client.keep(frame)
        }
    }

    @Test(arguments: StoreBackend.allCases) func repliesTravelAsKind21OnlyToSessionsThatTakeThem(
        _ backend: StoreBackend
    ) async throws {
        let node = try await TestNode.start("threads-wire", backend: backend)
        let alice = try await node.session(Self.alice, device: UUID())
        let bob = try await node.session(Self.bob, device: UUID())
        let carol = try await node.session(
            Self.carol, device: UUID(), features: FeatureSet.all.subtracting(.replies))

        let conversation = ConversationID.random()
        _ = try await alice.command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: [Self.bob, Self.carol],
                    options: ConversationOptions(isDistinct: false))),
            id: conversation.uuid)
        let root = try await Self.send(alice, "root", in: conversation, replyTo: nil)
        let reply = try await Self.send(bob, "a reply", in: conversation, replyTo: root)

        // Alice (bit 15) gets kind 21 with the root; Carol (no bit 15) the same message as kind 6.
        let atAlice = try await Self.message(reply, at: alice)
        #expect(atAlice.replyTo == root)
        let atCarol = try await Self.message(reply, at: carol)
        #expect(atCarol.replyTo == nil)
        var plain = atAlice
        plain.replyTo = nil
        #expect(atCarol.parts == plain.parts && atCarol.position == plain.position)

        // Carol may not reply (non-fatal forbidden, the stream goes on).
        let refused = await #expect(throws: CommandFailed.self) {
            _ = try await Self.send(carol, "nope", in: conversation, replyTo: root)
        }
        #expect(refused?.error.code == .forbidden)
        #expect(refused?.error.isFatal == false)

        // One level deep; the root must be a live message of the same conversation.
        let nested = await #expect(throws: CommandFailed.self) {
            _ = try await Self.send(bob, "nested", in: conversation, replyTo: reply)
        }
        #expect(nested?.error.code == .nestedReply)
        let elsewhere = ConversationID.random()
        _ = try await alice.command(
            .createConversation(
                CreateConversation(
                    conversationID: elsewhere, participants: [Self.bob], options: ConversationOptions(isDistinct: false)
                )),
            id: elsewhere.uuid)
        let foreign = await #expect(throws: CommandFailed.self) {
            _ = try await Self.send(bob, "wrong place", in: elsewhere, replyTo: root)
        }
        #expect(foreign?.error.code == .replyTargetNotFound)
        let doomed = try await Self.send(alice, "to be deleted", in: conversation, replyTo: nil)
        let deleteID = UUID()
        _ = try await alice.command(
            .deleteMessage(
                DeleteMessage(
                    requestID: deleteID, conversationID: conversation, messageID: doomed, mode: .allParticipants)),
            id: deleteID)
        let gone = await #expect(throws: CommandFailed.self) {
            _ = try await Self.send(bob, "too late", in: conversation, replyTo: doomed)
        }
        #expect(gone?.error.code == .replyTargetNotFound)

        // More replies, and a plain message after them.
        var replies = [reply]
        for i in 0..<4 { replies.append(try await Self.send(bob, "reply \(i)", in: conversation, replyTo: root)) }
        _ = try await Self.send(alice, "not in the thread", in: conversation, replyTo: nil)

        // History: the root carries the summary for Alice, nothing for Carol.
        let history = try await Self.fetch(
            alice, FetchHistory(requestID: UUID(), conversationID: conversation, policy: .complete))
        let rootSeen = try #require(history.first { $0.id == root })
        #expect(rootSeen.thread?.replyCount == 5)
        #expect(rootSeen.thread?.lastReply == replies.last)
        #expect(history.filter { $0.replyTo == root }.map(\.id) == replies)
        let old = try await Self.fetch(
            carol, FetchHistory(requestID: UUID(), conversationID: conversation, policy: .complete))
        #expect(old.allSatisfy { $0.thread == nil && $0.replyTo == nil })
        #expect(old.count == history.count)

        // The thread alone, a page at a time: replies only, in position order.
        let first = try await Self.fetch(
            alice,
            FetchHistory(
                requestID: UUID(), conversationID: conversation, policy: .thread(root: root, after: nil, count: 3)))
        #expect(first.map(\.id) == Array(replies.prefix(3)))
        let rest = try await Self.fetch(
            alice,
            FetchHistory(
                requestID: UUID(), conversationID: conversation,
                policy: .thread(root: root, after: first.last?.position, count: 3)))
        #expect(rest.map(\.id) == Array(replies.dropFirst(3)))
        let wrongRoot = await #expect(throws: CommandFailed.self) {
            _ = try await Self.fetch(
                alice,
                FetchHistory(
                    requestID: UUID(), conversationID: conversation,
                    policy: .thread(root: reply, after: nil, count: 3)))
        }
        #expect(wrongRoot?.error.code == .nestedReply)
        let oldThread = await #expect(throws: CommandFailed.self) {
            _ = try await Self.fetch(
                carol,
                FetchHistory(
                    requestID: UUID(), conversationID: conversation, policy: .thread(root: root, after: nil, count: 3)))
        }
        #expect(oldThread?.error.code == .forbidden)

        // A deleted reply leaves the summary (ThreadSummary) and the thread.
        let deleteReply = UUID()
        _ = try await bob.command(
            .deleteMessage(
                DeleteMessage(
                    requestID: deleteReply, conversationID: conversation, messageID: replies[4], mode: .allParticipants)
            ),
            id: deleteReply)
        let after = try await Self.fetch(
            alice, FetchHistory(requestID: UUID(), conversationID: conversation, policy: .complete))
        let summary = try #require(after.first { $0.id == root }?.thread)
        #expect(summary.replyCount == 4)
        #expect(summary.lastReply == replies[3])
        for client in [alice, bob, carol] { await client.close() }
        await node.stop()
    }
}
