import Foundation
import LaminaModel
import LaminaWire
import Testing

@testable import LaminaNode

@Suite struct EngineCommandTests {
    func messageIDs(_ changes: [Change]) -> [MessageID] {
        changes.compactMap { if case .messageCreated(let m) = $0.event { m.id } else { nil } }
    }

    @Test func sendFansOutToAllDevicesOfAllParticipantsAfterCommit() async throws {
        let h = try EngineHarness()
        let alice1 = try await h.connect("alice")
        let alice2 = try await h.connect("alice")
        let bob1 = try await h.connect("bob")
        let bob2 = try await h.connect("bob")
        let carol = try await h.connect("carol")
        let conversation = ConversationID.random()
        let (created, _) = try await alice1.command(
            .createConversation(CreateConversation(conversationID: conversation, participants: ["bob"])))
        #expect(created.ack?.conversationID == conversation)
        // Alice's other device learns of the conversation; Bob only with the first message.
        #expect(
            try await alice2.nextChanges().map(\.event) == [
                .conversationCreated(
                    try #require(try await h.store.read { r in try r.conversation(conversation) }).conversation)
            ])

        let id = MessageID.random()
        let (reply, _) = try await alice1.command(
            .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: [textPart("hi")])))
        let ack = try #require(reply.ack)
        #expect(ack.position != nil && ack.timestamp != nil)
        // Durable when acknowledged: a reader sees it.
        let stored = try await h.store.read { r in try r.message(id) }
        #expect(stored?.message.position == ack.position)

        for device in [alice1, alice2] {
            let changes = try await device.nextChanges()
            #expect(messageIDs(changes) == [id])
        }
        for device in [bob1, bob2] {
            var changes = try await device.nextChanges()
            if changes.count == 1 { changes += try await device.nextChanges() }
            guard case .conversationCreated(let c) = changes.first?.event else {
                Issue.record("bob got \(changes)")
                continue
            }
            #expect(c.id == conversation)
            #expect(messageIDs(changes) == [id])
            #expect(changes.map(\.seq) == [1, 2])
        }
        #expect(carol.outbound.pending.isEmpty)
        await h.close()
    }

    @Test func retryWithTheSameIDIsAnsweredWithTheSameAckAndWritesNothing() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice")
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(CreateConversation(conversationID: conversation, participants: ["bob"])))
        _ = try await alice.nextChanges()
        let send = Frame.sendMessage(
            SendMessage(messageID: .random(), conversationID: conversation, parts: [textPart("once")]))
        let (first, _) = try await alice.command(send)
        _ = try await alice.nextChanges()
        let headBefore = try await h.store.read { r in try r.feedHead(of: "bob") }
        let (second, changes) = try await alice.command(send)
        #expect(first.ack != nil)
        #expect(first == second)
        #expect(changes.isEmpty)
        #expect(try await h.store.read { r in try r.messageCount(of: conversation) } == 1)
        #expect(try await h.store.read { r in try r.feedHead(of: "bob") } == headBefore)
        // Same id, different content: id-in-use.
        guard case .sendMessage(var changed) = send else { return }
        changed.parts = [textPart("twice")]
        let (third, _) = try await alice.command(.sendMessage(changed))
        #expect(third.errorFrame?.code == .idInUse)
        await h.close()
    }

    @Test func nonParticipantsAndRemovedParticipants() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice")
        let bob = try await h.connect("bob")
        let mallory = try await h.connect("mallory")
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(CreateConversation(conversationID: conversation, participants: ["bob"])))
        _ = try await alice.nextChanges()
        let (before, _) = try await alice.command(
            .sendMessage(SendMessage(messageID: .random(), conversationID: conversation, parts: [textPart("before")])))
        #expect(before.ack != nil)
        _ = try await alice.nextChanges()
        _ = try await bob.nextChanges()

        let (intruder, _) = try await mallory.command(
            .sendMessage(SendMessage(messageID: .random(), conversationID: conversation, parts: [textPart("x")])))
        #expect(intruder.errorFrame?.code == .notAParticipant)
        let (peek, _) = try await mallory.command(
            .fetchHistory(FetchHistory(requestID: UUID(), conversationID: conversation, policy: .complete)))
        #expect(peek.errorFrame?.code == .notAParticipant)

        let (removed, _) = try await alice.command(
            .removeParticipants(ParticipantsUpdate(requestID: UUID(), conversationID: conversation, users: ["bob"])))
        #expect(removed.ack != nil)
        _ = try await alice.nextChanges()
        guard case .participantsChanged(let p) = try await bob.nextChanges().first?.event else {
            Issue.record("bob not told")
            return
        }
        #expect(p.removed == ["bob"])

        let after = MessageID.random()
        try await alice.command(
            .sendMessage(SendMessage(messageID: after, conversationID: conversation, parts: [textPart("after")])))
        _ = try await alice.nextChanges()
        let (bobSend, _) = try await bob.command(
            .sendMessage(SendMessage(messageID: .random(), conversationID: conversation, parts: [textPart("me?")])))
        #expect(bobSend.errorFrame?.code == .removedParticipant)
        // Bob keeps what came before, and gets nothing after.
        let history = UUID()
        bob.session.receive(
            .fetchHistory(FetchHistory(requestID: history, conversationID: conversation, policy: .complete)))
        let changes = try await bob.nextChanges()
        #expect(changes.count == 1)
        guard case .messageCreated(let m) = changes.first?.event else {
            Issue.record("no history")
            return
        }
        #expect(m.parts.first?.content == .inline(Array("before".utf8)))
        #expect(try await bob.outbound.expectNext().ack?.requestID == history)
        let (_, cursor) = try await bob.sync(from: 0)
        let feed = try await h.store.read { r in try r.feed(of: "bob", after: 0, limit: 100) }
        #expect(feed.allSatisfy { $0.message != after })
        #expect(cursor == feed.last?.seq)
        await h.close()
    }

    @Test func distinctCreateResolvesToTheExistingConversation() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice")
        let bob = try await h.connect("bob")
        let first = ConversationID.random()
        try await alice.command(.createConversation(CreateConversation(conversationID: first, participants: ["bob"])))
        let second = ConversationID.random()
        let (resolved, _) = try await bob.command(
            .createConversation(CreateConversation(conversationID: second, participants: ["alice"])))
        #expect(resolved.ack?.conversationID == first)
        let metadata = Metadata(["title": .string("other")])
        let (conflict, _) = try await bob.command(
            .createConversation(
                CreateConversation(
                    conversationID: .random(), participants: ["alice"], options: ConversationOptions(metadata: metadata)
                )))
        #expect(conflict.errorFrame?.code == .existingDistinctConversation)
        #expect(conflict.errorFrame?.conversationID == first)
        #expect(try await h.store.read { r in try r.conversation(second) } == nil)
        await h.close()
    }

    @Test func invalidArgumentsCarryTheModelCode() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice")
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(CreateConversation(conversationID: conversation, participants: ["bob"])))
        let (reply, _) = try await alice.command(
            .sendMessage(SendMessage(messageID: .random(), conversationID: conversation, parts: [])))
        #expect(reply.errorFrame?.code == .noParts)
        #expect(reply.errorFrame?.isFatal == false)
        await h.close()
    }
}

@Suite struct EngineDeletionTests {
    @Test func deleteMessageForEveryoneOrOnlyMyDevices() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice")
        let bob = try await h.connect("bob")
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(CreateConversation(conversationID: conversation, participants: ["bob"])))
        let mine = MessageID.random()
        let ours = MessageID.random()
        try await alice.command(
            .sendMessage(SendMessage(messageID: mine, conversationID: conversation, parts: [textPart("a")])))
        try await alice.command(
            .sendMessage(SendMessage(messageID: ours, conversationID: conversation, parts: [textPart("b")])))
        var bobSeen = 0
        while bobSeen < 3 { bobSeen += try await bob.nextChanges().count }

        let (local, _) = try await alice.command(
            .deleteMessage(
                DeleteMessage(requestID: UUID(), conversationID: conversation, messageID: mine, mode: .myDevices)))
        #expect(local.ack != nil)
        #expect(try await h.store.read { r in try r.message(mine) }?.isDeleted == false)
        let (global, _) = try await alice.command(
            .deleteMessage(
                DeleteMessage(requestID: UUID(), conversationID: conversation, messageID: ours, mode: .allParticipants))
        )
        #expect(global.ack != nil)
        #expect(try await h.store.read { r in try r.message(ours) }?.isDeleted == true)
        // Bob hears only of the deletion for everyone, then of his counts after it (SPEC §6.4).
        var changes = try await bob.nextChanges()
        if changes.count == 1 { changes += try await bob.nextChanges() }
        #expect(
            changes.map(\.event) == [
                .messageDeleted(
                    MessageDeleted(conversationID: conversation, messageID: ours, mode: .allParticipants, by: "alice")),
                .conversationUpdated(
                    ConversationUpdated(
                        conversationID: conversation, isDistinct: true, deliveryReceiptsEnabled: true,
                        messageCount: 1, unreadCount: 1, lastMessageID: mine)),
            ])
        let (again, _) = try await bob.command(
            .markRead(MarkRead(requestID: UUID(), conversationID: conversation, messageID: ours)))
        #expect(again.errorFrame?.code == .notFound)
        await h.close()
    }
}
