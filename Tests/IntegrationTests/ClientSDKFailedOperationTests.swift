import Foundation
import LaminaClient
import LaminaModel
import LaminaWire
import NIOConcurrencyHelpers
import Testing

/// An operation accepted locally that the node refuses reaches the delegate's
/// `didFailOperation` (Layer's `didFailOperationWithError:`), on a real node.
@Suite struct ClientSDKFailedOperationTests {
    /// Records what a delegate is told, with waits on it.
    final class FailureDelegate: LaminaClientDelegate, @unchecked Sendable {
        let failures: Recorder<OutboxFailure>
        private let continuation: AsyncStream<OutboxFailure>.Continuation

        init() {
            let (stream, continuation) = AsyncStream<OutboxFailure>.makeStream()
            self.continuation = continuation
            failures = Recorder(stream)
        }

        func objectsDidChange(_ changes: [ObjectChange]) {}
        func didFailOperation(_ failure: OutboxFailure) { continuation.yield(failure) }
    }

    @Test func aSendTheNodeRefusesReachesTheDelegate() async throws {
        let node = try await TestNode.start("sdk-failed-operation")
        let alice = try ClientHarness.device("alice", on: node)
        try await ClientHarness.connect(alice, on: node)
        let conversation = try alice.newConversation(
            participants: ["bob"], options: ConversationOptions(isDistinct: false)
        ).id
        let hello = try alice.send(alice.newMessage(parts: [MessagePart.with(text: "hi")]), in: conversation).id
        try await ClientHarness.waitUntil(alice, "the first message sent") { try alice.isSent(hello) }

        // Alice goes offline; Bob removes her (acknowledged); offline, she still sends (accepted locally).
        await alice.disconnect()
        let bob = try await node.session("bob", device: UUID())
        let removal = UUID()
        try await bob.command(
            .removeParticipants(ParticipantsUpdate(requestID: removal, conversationID: conversation, users: ["alice"])),
            id: removal)
        let delegate = FailureDelegate()
        alice.addDelegate(delegate)
        let refused = try alice.send(
            alice.newMessage(parts: [MessagePart.with(text: "still there?")]), in: conversation
        ).id
        #expect(try alice.isSent(refused) == false)

        // Back online, the node refuses the send: the delegate hears of it.
        try await ClientHarness.connect(alice, on: node)
        try await delegate.failures.wait("the refused send at the delegate") {
            $0.contains { $0.objectID == refused.uuid }
        }
        let failure = try #require(delegate.failures.all.first { $0.objectID == refused.uuid })
        #expect(
            [WireError.Code.removedParticipant.wireValue, WireError.Code.notAParticipant.wireValue].contains(
                failure.code))
        #expect(failure.kind == OutboxCommandKind.sendMessage.rawValue)
        #expect(failure.error.code.rawValue == WireError.Code(wireValue: failure.code).name)
        #expect(delegate.failures.all.count == 1)
        #expect(try alice.store.outboxFailures().map(\.id) == [failure.id])
        #expect(try await ClientHarness.nodeMessageCount(node, conversation) == 1)

        try await alice.close()
        await bob.drop()
        await node.stop()
    }
}
