import Foundation
import LaminaClient
import LaminaModel
import LaminaWire
import Testing

/// The SDK's promises (issue #6, point 9) against a real node over TLS + HTTP/2 on loopback:
/// offline send across a node restart, two devices of one user, receipts reaching the
/// sender. Distinct conversations created concurrently: `ClientSDKDistinctTests`.
@Suite struct ClientSDKTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    static func text(_ s: String) throws -> [MessagePart] { [try MessagePart.with(text: s)] }

    /// The text of each message of `conversation` at `client`, in order.
    static func texts(_ client: LaminaClient, _ conversation: ConversationID) throws -> [String] {
        try client.messages(in: conversation).map { m in
            m.message.parts.map { part -> String in
                if case .inline(let bytes) = part.content { return String(decoding: bytes, as: UTF8.self) }
                return "<external>"
            }.joined()
        }
    }

    // MARK: offline send across a node restart

    @Test func messagesQueuedWhileTheNodeIsDownAreDeliveredOnceInOrderAfterItComesBack() async throws {
        let node = try await TestNode.start("sdk-restart")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        let aliceEvents = Recorder(alice.syncEvents)
        try await ClientHarness.connect(alice, on: node)
        try await ClientHarness.connect(bob, on: node)

        let conversation = try alice.newConversation(participants: [Self.bob]).id
        let first = try alice.send(alice.newMessage(parts: try Self.text("before")), in: conversation).id
        try await ClientHarness.waitUntil(bob, "bob to get the first message") { try bob.message(first) != nil }

        await node.stop()
        try await aliceEvents.wait("alice to notice the node is gone") { events in
            events.contains { if case .reconnecting = $0 { true } else { false } }
        }
        let queued: [MessageID] = try ["one", "two", "three"].map { text in
            try alice.send(alice.newMessage(parts: try Self.text(text)), in: conversation).id
        }
        #expect(try queued.allSatisfy { try !alice.isSent($0) })
        #expect(try alice.store.outboxEntries().count == 3)

        try await node.startAgain()
        try await ClientHarness.waitUntil(alice, "the queued messages to be sent") {
            try queued.allSatisfy { try alice.isSent($0) }
        }
        try await ClientHarness.waitUntil(bob, "bob to get the queued messages") {
            try bob.messages(in: conversation).count >= 4
        }

        let atBob = try bob.messages(in: conversation)
        #expect(atBob.map(\.id) == [first] + queued)
        #expect(try Self.texts(bob, conversation) == ["before", "one", "two", "three"])
        let positions = atBob.compactMap(\.message.position)
        #expect(positions.count == 4 && positions == positions.sorted() && Set(positions).count == 4)
        #expect(try alice.messages(in: conversation).map(\.message.position) == atBob.map(\.message.position))
        #expect(try alice.store.outboxEntries().isEmpty)
        #expect(try await ClientHarness.nodeMessageCount(node, conversation) == 4)
        // Every wait was the policy's backoff for its attempt, jittered within its bounds.
        let policy = ClientHarness.fastReconnect
        let waits = aliceEvents.all.compactMap { e -> (Int, Duration)? in
            if case .reconnecting(let a, let d) = e { (a, d) } else { nil }
        }
        #expect(!waits.isEmpty)
        #expect(waits.map(\.0) == Array(0..<waits.count))
        for (attempt, delay) in waits {
            let base = policy.baseDelay(attempt: attempt)
            #expect(delay <= base && delay >= base * (1 - policy.jitter) - .milliseconds(1))
        }

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    // MARK: two devices of one user

    @Test func twoDevicesOfOneUserStayInStep() async throws {
        let node = try await TestNode.start("sdk-devices")
        let phone = try ClientHarness.device(Self.alice, on: node)
        let laptop = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        #expect(try phone.store.deviceID() != laptop.store.deviceID())
        for client in [phone, laptop, bob] { try await ClientHarness.connect(client, on: node) }

        let conversation = try phone.newConversation(participants: [Self.bob]).id
        let hello = try phone.send(phone.newMessage(parts: try Self.text("hello from the phone")), in: conversation).id
        try await ClientHarness.waitUntil(phone, "the phone's message to be sent") { try phone.isSent(hello) }
        let onLaptop = try await laptop.waitForCreation(of: hello, timeout: .seconds(60))
        #expect(onLaptop.message.isSent)
        #expect(onLaptop.message.sender == Self.alice)
        #expect(onLaptop.isUnread == false)
        #expect(onLaptop.message.position == (try phone.message(hello))?.message.position)
        #expect(try laptop.conversation(conversation)?.conversation.participants == [Self.alice, Self.bob])

        // Bob's reply reaches both devices, unread on both.
        _ = try await bob.waitForCreation(of: hello, timeout: .seconds(60))
        let reply = try bob.send(bob.newMessage(parts: try Self.text("hi alice")), in: conversation).id
        for device in [phone, laptop] {
            try await ClientHarness.waitUntil(device, "the reply on both devices") {
                try device.message(reply)?.message.isSent == true
            }
            #expect(try device.message(reply)?.isUnread == true)
            #expect(try device.conversation(conversation)?.unreadMessageCount == 1)
        }
        #expect(try phone.message(reply)?.message.position == (try laptop.message(reply))?.message.position)

        // Reading on the laptop clears the phone's unread state and reaches bob.
        let phoneChanges = Recorder(phone.changes())
        try laptop.markAsRead(reply)
        #expect(try laptop.conversation(conversation)?.unreadMessageCount == 0)
        try await ClientHarness.waitUntil(phone, "the read state on the phone") {
            try phone.message(reply)?.isUnread == false
        }
        #expect(try phone.conversation(conversation)?.unreadMessageCount == 0)
        #expect(try phone.message(reply)?.message.recipientStatus[Self.alice] == .read)
        try await phoneChanges.wait("the phone's unread-count change") { batches in
            batches.joined().contains {
                $0.property == ConversationProperty.unreadMessageCount && $0.before == .integer(1)
                    && $0.after == .integer(0)
            }
        }
        try await ClientHarness.waitUntil(bob, "alice's read receipt at bob") {
            try bob.message(reply)?.message.recipientStatus[Self.alice] == .read
        }

        // Conversation edits on one device reach the other.
        try laptop.setMetadata(.string("Plans"), at: try MetadataKeyPath(parsing: "title"), in: conversation)
        try await ClientHarness.waitUntil(phone, "the laptop's title on the phone") {
            try phone.conversation(conversation)?.conversation.metadata == ["title": .string("Plans")]
        }
        try phone.addParticipants(["carol"], to: conversation)
        try await ClientHarness.waitUntil(laptop, "the phone's new participant on the laptop") {
            try laptop.conversation(conversation)?.conversation.participants == [Self.alice, Self.bob, "carol"]
        }
        #expect(try laptop.conversation(conversation)?.conversation.isDistinct == false)

        for client in [phone, laptop, bob] { try await client.close() }
        await node.stop()
    }

    // MARK: receipts reaching the sender

    @Test func deliveryAndReadReceiptsReachTheSenderWithChangeNotifications() async throws {
        let node = try await TestNode.start("sdk-receipts")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        try await ClientHarness.connect(alice, on: node)

        let conversation = try alice.newConversation(participants: [Self.bob]).id
        let message = try alice.send(alice.newMessage(parts: try Self.text("did you get this?")), in: conversation).id
        // Sent (the ACK) means every recipient is at least at sent, in the same commit.
        try await ClientHarness.waitUntil(alice, "the message to be sent") { try alice.isSent(message) }
        #expect(try alice.message(message)?.message.recipientStatus[Self.bob] == .sent)
        #expect(try alice.message(message)?.message.recipientStatus[Self.alice] == .read)

        let changes = Recorder(alice.changes())
        func statusChange(_ status: RecipientStatus) -> @Sendable ([[ObjectChange]]) -> Bool {
            { batches in
                batches.joined().contains { change in
                    guard change.type == .update, change.property == MessageProperty.recipientStatus,
                        case .message(let m) = change.object, m.id == message,
                        case .recipientStatus(let after)? = change.after
                    else { return false }
                    return after[Self.bob] == status
                }
            }
        }

        // Bob's device syncs: delivered.
        try await ClientHarness.connect(bob, on: node)
        try await changes.wait("delivered at the sender", statusChange(.delivered))
        #expect(try alice.message(message)?.message.recipientStatus[Self.bob] == .delivered)
        #expect(try bob.message(message)?.isUnread == true)

        // Bob reads: read.
        try bob.markAsRead(message)
        try await changes.wait("read at the sender", statusChange(.read))
        #expect(try alice.message(message)?.message.recipientStatus[Self.bob] == .read)
        #expect(try bob.conversation(conversation)?.unreadMessageCount == 0)

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    @Test func noDeliveryReceiptsWhereTheConversationDisablesThem() async throws {
        let node = try await TestNode.start("sdk-noreceipts")
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
        let unseen = try alice.send(alice.newMessage(parts: try Self.text("quiet")), in: quiet).id
        let seen = try alice.send(alice.newMessage(parts: try Self.text("loud")), in: loud).id
        // The loud conversation's receipt comes after the quiet one's would have (one feed, in order).
        try await ClientHarness.waitUntil(alice, "the receipt in the loud conversation") {
            try alice.message(seen)?.message.recipientStatus[Self.bob] == .delivered
        }
        #expect(try bob.message(unseen) != nil)
        // Both receipt switches off (SPEC §6.2, the old single flag's "off"): the sender cannot
        // determine Bob's status. One switch off: ClientSDKReceiptSwitchesTests.
        #expect(try alice.message(unseen)?.message.recipientStatus[Self.bob] == .invalid)
        #expect(try bob.store.outboxEntries().allSatisfy { $0.objectID != quiet.uuid })  // no receipt queued for it

        try await alice.close()
        try await bob.close()
        await node.stop()
    }
}
