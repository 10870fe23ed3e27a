import Foundation
import LaminaClient
import LaminaModel
import LaminaWire
import Testing

/// The SDK's promises (issue #6, point 9) against a real node over TLS + HTTP/2 on loopback:
/// offline send across a node restart, two devices of one user, concurrent distinct
/// conversations, receipts reaching the sender.
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
        try await ClientHarness.waitUntil(alice, "the queued messages to be sent") { try queued.allSatisfy { try alice.isSent($0) } }
        try await ClientHarness.waitUntil(bob, "bob to get the queued messages") { try bob.messages(in: conversation).count >= 4 }

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
        let waits = aliceEvents.all.compactMap { e -> (Int, Duration)? in if case .reconnecting(let a, let d) = e { (a, d) } else { nil } }
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
        let onLaptop = try await laptop.waitForCreation(of: hello, timeout: .seconds(20))
        #expect(onLaptop.message.isSent)
        #expect(onLaptop.message.sender == Self.alice)
        #expect(onLaptop.isUnread == false)
        #expect(onLaptop.message.position == (try phone.message(hello))?.message.position)
        #expect(try laptop.conversation(conversation)?.conversation.participants == [Self.alice, Self.bob])

        // Bob's reply reaches both devices, unread on both.
        _ = try await bob.waitForCreation(of: hello, timeout: .seconds(20))
        let reply = try bob.send(bob.newMessage(parts: try Self.text("hi alice")), in: conversation).id
        for device in [phone, laptop] {
            try await ClientHarness.waitUntil(device, "the reply on both devices") { try device.message(reply)?.message.isSent == true }
            #expect(try device.message(reply)?.isUnread == true)
            #expect(try device.conversation(conversation)?.unreadMessageCount == 1)
        }
        #expect(try phone.message(reply)?.message.position == (try laptop.message(reply))?.message.position)

        // Reading on the laptop clears the phone's unread state and reaches bob.
        let phoneChanges = Recorder(phone.changes())
        try laptop.markAsRead(reply)
        #expect(try laptop.conversation(conversation)?.unreadMessageCount == 0)
        try await ClientHarness.waitUntil(phone, "the read state on the phone") { try phone.message(reply)?.isUnread == false }
        #expect(try phone.conversation(conversation)?.unreadMessageCount == 0)
        #expect(try phone.message(reply)?.message.recipientStatus[Self.alice] == .read)
        try await phoneChanges.wait("the phone's unread-count change") { batches in
            batches.joined().contains {
                $0.property == ConversationProperty.unreadMessageCount && $0.before == .integer(1) && $0.after == .integer(0)
            }
        }
        try await ClientHarness.waitUntil(bob, "alice's read receipt at bob") { try bob.message(reply)?.message.recipientStatus[Self.alice] == .read }

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

    // MARK: distinct conversations created at the same time

    @Test func distinctConversationsCreatedConcurrentlyEndAsOneOnBothSides() async throws {
        let node = try await TestNode.start("sdk-distinct")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        let aliceChanges = Recorder(alice.changes())
        let bobChanges = Recorder(bob.changes())

        // Both create "the" distinct conversation of {alice, bob} and write in it before
        // either has seen the other's.
        let fromAlice = try alice.newConversation(participants: [Self.bob]).id
        let fromBob = try bob.newConversation(participants: [Self.alice]).id
        #expect(fromAlice != fromBob)
        let aliceMessage = try alice.send(alice.newMessage(parts: try Self.text("alice first")), in: fromAlice).id
        let bobMessage = try bob.send(bob.newMessage(parts: try Self.text("bob first")), in: fromBob).id

        async let a: Void = ClientHarness.connect(alice, on: node)
        async let b: Void = ClientHarness.connect(bob, on: node)
        _ = try await (a, b)

        for client in [alice, bob] {
            try await ClientHarness.waitUntil(client, "both messages in one conversation at \(client.user)") {
                let live = try client.execute(Query<StoredConversation>())
                guard live.count == 1, let only = live.first else { return false }
                return try client.messages(in: only.id).filter(\.message.isSent).count == 2
            }
        }
        // The node kept one of the two; every client follows it.
        let survivor = try alice.store.currentIdentifier(of: fromAlice)
        #expect([fromAlice, fromBob].contains(survivor))
        #expect(try bob.store.currentIdentifier(of: fromBob) == survivor)
        #expect(try alice.store.currentIdentifier(of: fromBob) == survivor || alice.conversation(fromBob) == nil)
        let loser = survivor == fromAlice ? fromBob : fromAlice
        let loserClient = survivor == fromAlice ? bob : alice
        let loserChanges = survivor == fromAlice ? bobChanges : aliceChanges

        let everyone = Query<StoredConversation>()
        for client in [alice, bob] {
            let conversations = try client.execute(everyone)
            #expect(conversations.map(\.id) == [survivor])
            #expect(conversations.first?.conversation.participants == [Self.alice, Self.bob])
            #expect(conversations.first?.conversation.isDistinct == true)
            let messages = try client.messages(in: survivor)
            #expect(Set(messages.map(\.id)) == [aliceMessage, bobMessage])
            #expect(messages.allSatisfy { $0.message.conversationID == survivor && $0.message.position != nil })
            #expect(try client.conversation(loser)?.id ?? survivor == survivor)  // the old identifier leads to the survivor
        }
        #expect(try alice.messages(in: survivor).map(\.id) == bob.messages(in: survivor).map(\.id))
        #expect(try await ClientHarness.nodeMessageCount(node, survivor) == 2)

        // The losing side's app object followed the new identifier, and a change said so.
        try await loserChanges.wait("the identifier change on the losing side") { batches in
            batches.joined().contains {
                $0.type == .update && $0.property == ConversationProperty.identifier
                    && $0.before == .conversationID(loser) && $0.after == .conversationID(survivor)
            }
        }
        #expect(try loserClient.sendFailure(of: loserClient === alice ? aliceMessage : bobMessage) == nil)

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    /// Waits for the change that says `loser` now goes by `survivor`.
    static func identifierChange(_ changes: Recorder<[ObjectChange]>, from loser: ConversationID, to survivor: ConversationID) async throws {
        try await changes.wait("the identifier change \(loser) -> \(survivor)") { batches in
            batches.joined().contains {
                $0.type == .update && $0.property == ConversationProperty.identifier
                    && $0.before == .conversationID(loser) && $0.after == .conversationID(survivor)
            }
        }
    }

    @Test func anOfflineDistinctConversationFollowsTheOneTheOtherUserAlreadyWroteIn() async throws {
        let node = try await TestNode.start("sdk-distinct-late")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        try await ClientHarness.connect(alice, on: node)
        let alices = try alice.newConversation(participants: [Self.bob]).id
        let first = try alice.send(alice.newMessage(parts: try Self.text("first")), in: alices).id
        try await ClientHarness.waitUntil(alice, "alice's message sent") { try alice.isSent(first) }

        // Bob, offline, made his own and wrote in it; on connecting he gets alice's first.
        let bobs = try bob.newConversation(participants: [Self.alice]).id
        let second = try bob.send(bob.newMessage(parts: try Self.text("second")), in: bobs).id
        let changes = Recorder(bob.changes())
        try await ClientHarness.connect(bob, on: node)
        try await Self.identifierChange(changes, from: bobs, to: alices)
        try await ClientHarness.waitUntil(bob, "bob's message sent into alice's conversation") { try bob.isSent(second) }
        try await ClientHarness.waitUntil(alice, "bob's message at alice") { try alice.message(second) != nil }

        for client in [alice, bob] {
            #expect(try client.execute(Query<StoredConversation>()).map(\.id) == [alices])
            #expect(try client.messages(in: alices).map(\.id) == [first, second])
            #expect(try Self.texts(client, alices) == ["first", "second"])
        }
        #expect(try bob.store.currentIdentifier(of: bobs) == alices)
        #expect(try bob.message(second)?.message.conversationID == alices)
        #expect(try bob.conversation(bobs)?.id == alices)
        #expect(try await ClientHarness.nodeMessageCount(node, alices) == 2)

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    @Test func aDistinctConversationResolvedBeforeAnyMessageIsRenamedInPlace() async throws {
        let node = try await TestNode.start("sdk-distinct-rename")
        // Alice's device (raw protocol) creates the distinct conversation and writes nothing:
        // bob cannot see it yet.
        let raw = try await node.session(Self.alice, device: UUID())
        let alices = ConversationID.random()
        try await raw.command(.createConversation(CreateConversation(conversationID: alices, participants: [Self.bob])), id: alices.uuid)

        let bob = try ClientHarness.device(Self.bob, on: node)
        let bobs = try bob.newConversation(participants: [Self.alice]).id
        let hello = try bob.send(bob.newMessage(parts: try Self.text("hello")), in: bobs).id
        let changes = Recorder(bob.changes())
        try await ClientHarness.connect(bob, on: node)
        try await Self.identifierChange(changes, from: bobs, to: alices)
        try await ClientHarness.waitUntil(bob, "bob's message sent") { try bob.isSent(hello) }

        let renamed = try #require(try bob.conversation(bobs))
        #expect(renamed.id == alices)
        #expect(renamed.isSynced)
        #expect(renamed.conversation.participants == [Self.alice, Self.bob])
        try await ClientHarness.waitUntil(bob, "the node's account of the conversation at bob") {
            try bob.conversation(alices)?.conversation.creator == Self.alice
        }
        #expect(try bob.execute(Query<StoredConversation>()).map(\.id) == [alices])
        #expect(try bob.messages(in: alices).map(\.id) == [hello])
        let atAlice = try await raw.message(hello)
        #expect(atAlice.conversationID == alices)
        #expect(atAlice.sender == Self.bob)
        #expect(try await ClientHarness.nodeMessageCount(node, alices) == 1)

        await raw.close()
        try await bob.close()
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
        try await ClientHarness.waitUntil(alice, "the message to be sent") { try alice.isSent(message) }
        #expect(try alice.message(message)?.message.recipientStatus[Self.bob] == .sent)
        #expect(try alice.message(message)?.message.recipientStatus[Self.alice] == .read)

        let changes = Recorder(alice.changes())
        func statusChange(_ status: RecipientStatus) -> @Sendable ([[ObjectChange]]) -> Bool {
            { batches in
                batches.joined().contains { change in
                    guard change.type == .update, change.property == MessageProperty.recipientStatus,
                          case .message(let m) = change.object, m.id == message,
                          case .recipientStatus(let after)? = change.after else { return false }
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

        let quiet = try alice.newConversation(participants: [Self.bob], options: ConversationOptions(isDistinct: false, deliveryReceiptsEnabled: false)).id
        let loud = try alice.newConversation(participants: [Self.bob], options: ConversationOptions(isDistinct: false)).id
        let unseen = try alice.send(alice.newMessage(parts: try Self.text("quiet")), in: quiet).id
        let seen = try alice.send(alice.newMessage(parts: try Self.text("loud")), in: loud).id
        // The loud conversation's receipt comes after the quiet one's would have (one feed, in order).
        try await ClientHarness.waitUntil(alice, "the receipt in the loud conversation") {
            try alice.message(seen)?.message.recipientStatus[Self.bob] == .delivered
        }
        #expect(try bob.message(unseen) != nil)
        #expect(try alice.message(unseen)?.message.recipientStatus[Self.bob] == .sent)
        #expect(try bob.store.outboxEntries().isEmpty)

        try await alice.close()
        try await bob.close()
        await node.stop()
    }
}
