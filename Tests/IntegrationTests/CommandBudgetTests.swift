import Foundation
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// Issue 15: a user's storage commands are budgeted (count and bytes a second, over all its
/// sessions). Over the budget a command is answered `overloaded` with the wait, the user's
/// later commands pass once it has passed, and other users are not held back.
@Suite struct CommandBudgetTests {
    @Test func aUserOverItsByteBudgetIsToldToWaitWhileOthersGoOn() async throws {
        let node = try await TestNode.start("command-budget") {
            $0.resources.commandBudget.bytesPerSecond = 65_536
            $0.resources.commandBudget.byteBurst = 2 * 1_048_576
        }
        let mallory = try await node.session("mallory", device: UUID())
        let alice = try await node.session("alice", device: UUID())
        let big = try await MessagingTests.conversation(mallory, with: ["mallory", "alice"])
        let small = try await MessagingTests.conversation(alice, with: ["alice", "bob"])

        // 100 messages of 16 × 2 KiB (about 33 KB each, 3.3 MB in all) at once.
        let parts = try (0..<16).map { _ in try MessagePart(text: String(repeating: "m", count: 2_048)) }
        let ids = (0..<100).map { _ in MessageID.random() }
        for id in ids { mallory.send(.sendMessage(SendMessage(messageID: id, conversationID: big, parts: parts))) }
        // Alice is not held back meanwhile.
        _ = try await MessagingTests.send(alice, small, "still here")

        // Refusals come at once, ACKs after their commit: collect every answer as it comes.
        var acked = 0
        var refused: [(MessageID, ErrorFrame)] = []
        var waiting = Set(ids.map(\.uuid))
        while !waiting.isEmpty {
            switch try await mallory.nextFrame() {
            case .ack(let ack) where waiting.contains(ack.requestID):
                waiting.remove(ack.requestID)
                acked += 1
            case .error(let error) where error.requestID.map(waiting.contains) ?? false:
                waiting.remove(error.requestID!)
                refused.append((MessageID(uuid: error.requestID!), error))
            default: break
            }
        }
        #expect(acked + refused.count == ids.count)
        #expect(acked >= 50, "the 2 MiB burst takes about 60 such messages")
        #expect(acked < ids.count)
        let (retryID, first) = try #require(refused.first)
        #expect(first.code == .overloaded)
        #expect(!first.isFatal)
        let wait = try #require(first.retryAfterMilliseconds)
        #expect(wait >= 1 && wait <= 1_000, "one message is about half a second of 64 KiB/s")

        // After the wait the node takes it (the client's retry, as the SDK does it).
        try await Task.sleep(for: .milliseconds(Int64(wait) + 600))
        mallory.send(.sendMessage(SendMessage(messageID: retryID, conversationID: big, parts: parts)))
        guard case .ack = try await mallory.answer(to: retryID.uuid) else {
            Issue.record("the retry after the wait was refused again")
            return
        }
        await mallory.close()
        await alice.close()
        await node.stop()
    }
}
