import Foundation
import LaminaClient
import LaminaModel
import LaminaWire
import Testing

/// Layer's two receipt switches (issue #33, SPEC §3.16, §6.2) on a real node over TLS + HTTP/2:
/// delivery receipts off, other participants' status stays `sent` until they read; read
/// receipts off, a delivered message counts as read (implicitly read) and the conversation may
/// have 250 participants; both off, the old single flag's "off": nothing shared. A client that
/// knows only the single flag keeps its meaning.
@Suite struct ClientSDKReceiptSwitchesTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    static func send(_ client: LaminaClient, _ text: String, in conversation: ConversationID) throws -> MessageID {
        try client.send(client.newMessage(parts: [MessagePart.with(text: text)]), in: conversation).id
    }

    static func status(_ client: LaminaClient, _ message: MessageID, of user: UserID) throws -> RecipientStatus? {
        try client.message(message)?.message.recipientStatus[user]
    }

    /// Sends one message in a conversation with both switches on and waits until the sender sees
    /// it delivered to Bob: Bob's device has then synced, and sent any receipt it would send for
    /// what came before (one feed, in order).
    static func barrier(_ alice: LaminaClient, _ loud: ConversationID) async throws {
        let seen = try send(alice, "loud", in: loud)
        try await ClientHarness.waitUntil(alice, "the receipt in the conversation with both switches on") {
            try status(alice, seen, of: bob) == .delivered
        }
    }

    @Test func deliveryReceiptsOffKeepOthersSentUntilTheyRead() async throws {
        let node = try await TestNode.start("sdk-delivery-off")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        try await ClientHarness.connect(alice, on: node)
        try await ClientHarness.connect(bob, on: node)

        let quiet = try alice.newConversation(
            participants: [Self.bob], options: ConversationOptions(isDistinct: false, deliveryReceiptsEnabled: false)
        ).id
        let loud = try alice.newConversation(participants: [Self.bob], options: ConversationOptions(isDistinct: false))
            .id
        let message = try Self.send(alice, "quiet", in: quiet)
        try await ClientHarness.waitUntil(bob, "the message at Bob") { try bob.message(message) != nil }
        #expect(try bob.conversation(quiet)?.conversation.deliveryReceiptsEnabled == false)
        #expect(try bob.conversation(quiet)?.conversation.readReceiptsEnabled == true)
        #expect(try bob.store.outboxEntries().allSatisfy { $0.objectID != quiet.uuid })  // no receipt queued

        // The node ignores a delivery receipt in it too (a device that sends one anyway).
        try await ClientHarness.waitUntil(alice, "the message sent") { try alice.isSent(message) }
        let position = try #require(try alice.message(message)?.message.position)
        let raw = try await node.session(Self.bob, device: UUID())
        let receipt = UUID()
        try await raw.command(
            .deliveryReceipt(DeliveryReceipt(requestID: receipt, conversationID: quiet, upTo: position)), id: receipt)
        await raw.close()
        try await Self.barrier(alice, loud)
        #expect(try Self.status(alice, message, of: Self.bob) == .sent)  // Layer: sent until read, not invalid

        try bob.markAsRead(message)
        try await ClientHarness.waitUntil(alice, "Bob's read at Alice") {
            try Self.status(alice, message, of: Self.bob) == .read
        }
        for client in [alice, bob] { try await client.close() }
        await node.stop()
    }

    @Test func readReceiptsOffShowADeliveredMessageAsReadAndKeepTheReaderUnread() async throws {
        let node = try await TestNode.start("sdk-read-off")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        try await ClientHarness.connect(alice, on: node)
        try await ClientHarness.connect(bob, on: node)

        let quiet = try alice.newConversation(
            participants: [Self.bob], options: ConversationOptions(isDistinct: false, readReceiptsEnabled: false)
        ).id
        let message = try Self.send(alice, "implicitly read", in: quiet)
        // Bob's device delivers it: Alice is shown Bob's status as read.
        try await ClientHarness.waitUntil(alice, "Bob implicitly read at Alice") {
            try Self.status(alice, message, of: Self.bob) == .read
        }
        // Bob's own state is his: the message stays unread for him until he reads it.
        #expect(try bob.message(message)?.isUnread == true)
        #expect(try bob.conversation(quiet)?.unreadMessageCount == 1)
        #expect(try bob.conversation(quiet)?.conversation.readReceiptsEnabled == false)
        try bob.markAsRead(message)
        try await ClientHarness.waitUntil(bob, "Bob's unread count after reading") {
            try bob.conversation(quiet)?.unreadMessageCount == 0
        }
        for client in [alice, bob] { try await client.close() }
        await node.stop()
    }

    /// The larger participant limit comes only with read receipts off: on the device, and at
    /// the node for a client that skips the device's check.
    @Test func theLargerParticipantLimitNeedsReadReceiptsOff() async throws {
        let node = try await TestNode.start("sdk-receipts-limit")
        let alice = try ClientHarness.device(Self.alice, on: node)
        try await ClientHarness.connect(alice, on: node)
        let crowd = Set(try (1...29).map { try UserID("guest\($0)") })

        let refused = #expect(throws: ClientError.self) {
            try alice.newConversation(
                participants: crowd, options: ConversationOptions(isDistinct: false, deliveryReceiptsEnabled: false))
        }
        #expect(refused?.code == .tooManyParticipants)
        let large = try alice.newConversation(
            participants: crowd, options: ConversationOptions(isDistinct: false, readReceiptsEnabled: false)
        ).id
        let message = try Self.send(alice, "to thirty", in: large)
        try await ClientHarness.waitUntil(alice, "the message to thirty sent") { try alice.isSent(message) }

        let raw = try await node.session(Self.alice, device: UUID())
        for (delivery, read, accepted) in [(false, true, false), (true, false, true)] {
            let id = ConversationID.random()
            let create = Frame.createConversation(
                CreateConversation(
                    conversationID: id, participants: crowd,
                    options: ConversationOptions(
                        isDistinct: false, deliveryReceiptsEnabled: delivery, readReceiptsEnabled: read)))
            if accepted {
                try await raw.command(create, id: id.uuid)
            } else {
                let error = await #expect(throws: CommandFailed.self) { try await raw.command(create, id: id.uuid) }
                #expect(error?.error.code == .tooManyParticipants)
            }
        }
        await raw.close()
        try await alice.close()
        await node.stop()
    }

    /// Both off is the old single flag's "off": nobody else's status can be determined.
    @Test func bothOffShareNoStatus() async throws {
        let node = try await TestNode.start("sdk-receipts-both-off")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        try await ClientHarness.connect(alice, on: node)
        try await ClientHarness.connect(bob, on: node)

        let quiet = try alice.newConversation(
            participants: [Self.bob],
            options: ConversationOptions(isDistinct: false, deliveryReceiptsEnabled: false, readReceiptsEnabled: false)
        ).id
        let loud = try alice.newConversation(participants: [Self.bob], options: ConversationOptions(isDistinct: false))
            .id
        let message = try Self.send(alice, "quiet", in: quiet)
        try await Self.barrier(alice, loud)
        #expect(try bob.message(message) != nil)
        #expect(try Self.status(alice, message, of: Self.bob) == .invalid)
        try bob.markAsRead(message)
        let after = try Self.send(alice, "after Bob read", in: loud)
        try await ClientHarness.waitUntil(alice, "the next receipt") {
            try Self.status(alice, after, of: Self.bob) == .delivered
        }
        #expect(try Self.status(alice, message, of: Self.bob) == .invalid)
        for client in [alice, bob] { try await client.close() }
        await node.stop()
    }
}
