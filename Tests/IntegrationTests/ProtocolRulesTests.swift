import Foundation
import LaminaModel
import LaminaWire
import Testing

/// Rules of SPEC §6.1/§6.2 that a second implementation could only learn by probing, pinned
/// against a real node: a new participant's feed order, who may delete for everyone,
/// history after deletions, a new message's initial statuses.
@Suite struct ProtocolRulesTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"
    static let carol: UserID = "carol"

    @Test func aNewParticipantGetsTheConversationBeforeTheChangeToIt() async throws {
        let node = try await TestNode.start("rules-join")
        let a = try await node.session(Self.alice, device: UUID())
        let c = try await node.session(Self.carol, device: UUID())
        let conversation = try await MessagingTests.conversation(a, with: [Self.bob])
        let (first, ack) = try await MessagingTests.send(a, conversation, "before carol")
        // Initial statuses: the sender read, every other participant sent.
        let created = try await a.message(first)
        #expect(created.recipientStatus == [Self.alice: .read, Self.bob: .sent])
        #expect(ack.position != nil)

        let add = UUID()
        try await a.command(
            .addParticipants(ParticipantsUpdate(requestID: add, conversationID: conversation, users: [Self.carol])),
            id: add)
        let changed = try await c.change {
            if case .participantsChanged(let p) = $0.event { return p.conversationID == conversation }
            return false
        }
        let kinds = c.seenChanges.filter { $0.seq > 0 }.map(\.event.kind)
        let createdAt = try #require(
            c.seenChanges.firstIndex {
                if case .conversationCreated(let x) = $0.event { return x.id == conversation } else { return false }
            })
        let changedAt = try #require(c.seenChanges.firstIndex { $0.seq == changed.seq })
        #expect(createdAt < changedAt, "carol's feed: \(kinds)")
        if case .conversationCreated(let x) = c.seenChanges[createdAt].event {
            #expect(x.participants.contains(Self.carol))
        }
        // Earlier messages are not copied into her feed; history has them.
        #expect(
            !c.seenChanges.contains {
                if case .messageCreated(let m) = $0.event { return m.id == first } else { return false }
            })
        #expect(try await PipelinedCreationTests.history(c, conversation) == [first])
        for s in [a, c] { await s.close() }
        await node.stop()
    }

    @Test func anyParticipantDeletesForEveryoneAndHistoryForgetsItButNotMyDevicesDeletions() async throws {
        let node = try await TestNode.start("rules-delete")
        let a = try await node.session(Self.alice, device: UUID())
        let b = try await node.session(Self.bob, device: UUID())
        let conversation = try await MessagingTests.conversation(a, with: [Self.bob])
        var sent: [MessageID] = []
        var positions: [MessagePosition] = []
        for i in 0..<4 {
            let (id, ack) = try await MessagingTests.send(a, conversation, "m\(i)")
            sent.append(id)
            positions.append(try #require(ack.position))
        }
        // Bob deletes alice's message for everyone: allowed.
        let del = UUID()
        try await b.command(
            .deleteMessage(
                DeleteMessage(requestID: del, conversationID: conversation, messageID: sent[0], mode: .allParticipants)),
            id: del)
        #expect(try await PipelinedCreationTests.history(a, conversation) == Array(sent[1...]))
        // A conversation delete for everyone below a position removes those messages from history.
        let below = UUID()
        try await b.command(
            .deleteConversation(
                DeleteConversation(
                    requestID: below, conversationID: conversation, mode: .allParticipants, below: positions[2])),
            id: below)
        #expect(try await PipelinedCreationTests.history(b, conversation) == Array(sent[2...]))
        // A my-devices deletion is a change in the user's feed only: history still returns the message.
        let mine = UUID()
        try await a.command(
            .deleteMessage(
                DeleteMessage(requestID: mine, conversationID: conversation, messageID: sent[3], mode: .myDevices)),
            id: mine)
        _ = try await a.change {
            if case .messageDeleted(let d) = $0.event { return d.messageID == sent[3] } else { return false }
        }
        #expect(try await PipelinedCreationTests.history(a, conversation) == Array(sent[2...]))
        for s in [a, b] { await s.close() }
        await node.stop()
    }
}
