import Foundation
import LaminaModel
import LaminaWire
import Testing

@testable import LaminaNode

/// A session's commands enter group commit without waiting for each other's commits.
@Suite struct EnginePipelineTests {
    @Test func commandsSentBackToBackShareGroupsAndAreAnsweredInOrder() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice")
        let conversation = ConversationID.random()
        let ids = (0..<300).map { _ in MessageID.random() }
        // CREATE then 300 sends, all at once: each send depends on the create before it.
        alice.session.receive(
            .createConversation(CreateConversation(conversationID: conversation, participants: ["bob"])))
        for id in ids {
            alice.session.receive(
                .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: [textPart("p")])))
        }
        var acked: [UUID] = []
        var positions: [MessagePosition] = []
        while acked.count < ids.count + 1 {
            switch try await alice.outbound.expectNext() {
            case .ack(let ack):
                acked.append(ack.requestID)
                if let p = ack.position { positions.append(p) }
            case .error(let e):
                Issue.record("error \(e)")
                return
            default: continue
            }
        }
        #expect(acked == [conversation.uuid] + ids.map(\.uuid))
        #expect(positions == positions.sorted() && Set(positions).count == ids.count)
        // Pipelined: more than one of this one session's commands committed in one group.
        #expect(h.store.writerStatistics.largestBatch > 1)
        #expect(h.store.writerStatistics.transactions < ids.count)
        let history = try await h.store.read { r in
            try r.history(of: conversation, for: "alice", .complete(after: nil, limit: 1_000))
        }
        #expect(history.map(\.id) == ids)
        await h.close()
    }

    @Test func aRetryQueuedBehindItsOriginalIsAnsweredWithTheSameAck() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice")
        let conversation = ConversationID.random()
        let send = Frame.sendMessage(
            SendMessage(messageID: .random(), conversationID: conversation, parts: [textPart("once")]))
        alice.session.receive(
            .createConversation(CreateConversation(conversationID: conversation, participants: ["bob"])))
        alice.session.receive(send)
        alice.session.receive(send)
        var acks: [Ack] = []
        while acks.count < 3 {
            if case .ack(let ack) = try await alice.outbound.expectNext() { acks.append(ack) }
        }
        #expect(acks[1] == acks[2])
        #expect(try await h.store.read { r in try r.messageCount(of: conversation) } == 1)
        // The same id with other content is refused, not applied.
        guard case .sendMessage(var other) = send else { return }
        other.parts = [textPart("other")]
        let (reply, _) = try await alice.command(.sendMessage(other))
        #expect(reply.errorFrame?.code == .idInUse)
        await h.close()
    }
}
