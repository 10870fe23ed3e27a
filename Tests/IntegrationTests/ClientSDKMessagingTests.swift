import Foundation
import LaminaClient
import LaminaModel
import LaminaWire
import Testing

/// Typing, mark-all-read, deletions and live queries through the SDK against a real node.
@Suite struct ClientSDKMessagingTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    static func send(_ client: LaminaClient, _ text: String, in conversation: ConversationID) throws -> MessageID {
        try client.send(client.newMessage(parts: [MessagePart.with(text: text)]), in: conversation).id
    }

    @Test func typingIndicatorsReachTheOtherParticipant() async throws {
        let node = try await TestNode.start("sdk-typing")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        _ = try await ClientHarness.connectLive(alice, on: node)
        let bobEvents = try await ClientHarness.connectLive(bob, on: node)
        let conversation = try alice.newConversation(participants: [Self.bob]).id
        let first = try Self.send(alice, "hi", in: conversation)
        _ = try await bob.waitForCreation(of: first, timeout: .seconds(60))

        try await alice.typing(.started, in: conversation)
        try await bobEvents.wait("alice typing at bob") {
            $0.contains(.typing(TypingChanged(conversationID: conversation, user: Self.alice, state: .started)))
        }
        try await alice.typing(.finished, in: conversation)
        try await bobEvents.wait("alice finished at bob") {
            $0.contains(.typing(TypingChanged(conversationID: conversation, user: Self.alice, state: .finished)))
        }
        // Nobody hears their own indicators.
        #expect(!bobEvents.all.contains { if case .typing(let t) = $0 { t.user == Self.bob } else { false } })

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    @Test(arguments: StoreBackend.allCases) func markingAllReadReachesTheSenderForEveryMessage(_ backend: StoreBackend)
        async throws
    {
        let node = try await TestNode.start("sdk-markall", backend: backend)
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        try await ClientHarness.connect(alice, on: node)
        try await ClientHarness.connect(bob, on: node)
        let conversation = try alice.newConversation(participants: [Self.bob]).id
        let sent = try (1...3).map { try Self.send(alice, "m\($0)", in: conversation) }
        do {
            try await ClientHarness.waitUntil(bob, "three unread at bob") {
                try bob.conversation(conversation)?.unreadMessageCount == 3
            }
        } catch {
            // What each side holds, to tell a lost message from a miscounted one.
            Issue.record(
                """
                bob: \(String(describing: try bob.conversation(conversation))) \
                messages \(try bob.messages(in: conversation).map { ($0.id, $0.isUnread) }); \
                alice: sent \(try sent.map { try alice.isSent($0) }), outbox \(try alice.store.outboxEntries().map(\.kind)), \
                failures \(try alice.store.outboxFailures())
                """)
            throw error
        }

        try bob.markAllMessagesAsRead(in: conversation)
        #expect(try bob.conversation(conversation)?.unreadMessageCount == 0)
        #expect(try bob.messages(in: conversation).allSatisfy { !$0.isUnread })
        try await ClientHarness.waitUntil(alice, "bob's reads at alice") {
            try sent.allSatisfy { try alice.message($0)?.message.recipientStatus[Self.bob] == .read }
        }

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    @Test func deletionsReachTheirAudience() async throws {
        let node = try await TestNode.start("sdk-delete")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let laptop = try ClientHarness.device(Self.alice, on: node)  // alice's second device
        let bob = try ClientHarness.device(Self.bob, on: node)
        // Every device is live before alice sends. The laptop syncs unread-only (the default): had its
        // first sync come after both sends, it would hold only the last message, as Layer's devices
        // did (the user's own messages are read), and this test is about deletions, not first syncs.
        for client in [alice, bob] { _ = try await ClientHarness.connectLive(client, on: node) }
        let laptopFrames = FrameLog()
        let laptopEvents = Recorder(laptop.syncEvents)
        try await laptop.connect(
            identityToken: { nonce in try node.dev.mintToken(user: Self.alice, nonce: nonce) },
            wrappingConnector: laptopFrames.wrap)
        try await laptopEvents.wait("the laptop's session to be live") { $0.contains(.state(.live)) }
        let conversation = try alice.newConversation(participants: [Self.bob]).id
        let m1 = try Self.send(alice, "one", in: conversation)
        let m2 = try Self.send(alice, "two", in: conversation)
        try await ClientHarness.waitUntil(alice, "both sent by alice's phone") {
            try alice.isSent(m1) && alice.isSent(m2)
        }
        do {
            try await ClientHarness.waitUntil(laptop, "both on the laptop") {
                try laptop.message(m2) != nil && laptop.message(m1) != nil
            }
        } catch {
            Issue.record(
                """
                the laptop holds m1: \(try laptop.message(m1) != nil), m2: \(try laptop.message(m2) != nil), \
                the conversation: \(try laptop.conversation(conversation) != nil); its cursor \
                \(String(describing: try laptop.store.syncCursor())), its messages there \
                \(try laptop.messages(in: conversation).map { ($0.id, $0.message.position.map { "\($0)" } ?? "unsent") }); \
                m1 \(m1), m2 \(m2); alice's phone cursor \(String(describing: try alice.store.syncCursor()))
                the laptop's frames:
                \(laptopFrames.text)
                """
            )
            throw error
        }
        try await ClientHarness.waitUntil(bob, "both at bob") { try bob.message(m2) != nil && bob.message(m1) != nil }
        let bobChanges = Recorder(bob.changes())

        // For everyone: gone at bob too, with a delete change.
        try alice.delete(m1, mode: .allParticipants)
        #expect(try alice.message(m1) == nil)
        try await ClientHarness.waitUntil(bob, "m1 deleted at bob") { try bob.message(m1) == nil }
        try await bobChanges.wait("m1's delete change at bob") { batches in
            batches.joined().contains {
                if case .message(let m) = $0.object { $0.type == .delete && m.id == m1 } else { false }
            }
        }

        // For my devices: alice's copies go (on the laptop too), bob's stays (m3 shows bob is
        // past the deletion).
        try alice.delete(m2, mode: .myDevices)
        #expect(try alice.message(m2) == nil)
        try await ClientHarness.waitUntil(laptop, "m2 deleted on the laptop") { try laptop.message(m2) == nil }
        #expect(try laptop.message(m1) == nil)
        let m3 = try Self.send(alice, "three", in: conversation)
        try await ClientHarness.waitUntil(bob, "m3 at bob") { try bob.message(m3) != nil }
        #expect(try bob.messages(in: conversation).map(\.id) == [m2, m3])
        #expect(try alice.messages(in: conversation).map(\.id) == [m3])

        // The conversation for everyone.
        try alice.delete(conversation, mode: .allParticipants)
        try await ClientHarness.waitUntil(bob, "the conversation deleted at bob") {
            try bob.conversation(conversation) == nil
        }
        try await ClientHarness.waitUntil(laptop, "the conversation deleted on the laptop") {
            try laptop.conversation(conversation) == nil
        }
        #expect(try bob.message(m3) == nil)
        try await bobChanges.wait("the conversation's delete change at bob") { batches in
            batches.joined().contains {
                if case .conversation(let c) = $0.object { $0.type == .delete && c.id == conversation } else { false }
            }
        }

        try await laptop.close()
        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    @Test func deletingMessagesBeforeAPositionKeepsTheConversationAndLaterMessages() async throws {
        let node = try await TestNode.start("sdk-delete-below")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        try await ClientHarness.connect(alice, on: node)
        try await ClientHarness.connect(bob, on: node)
        let conversation = try alice.newConversation(participants: [Self.bob]).id
        let sent = try (1...3).map { try Self.send(alice, "m\($0)", in: conversation) }
        try await ClientHarness.waitUntil(bob, "three at bob") {
            try bob.messages(in: conversation).filter(\.message.isSent).count == 3
        }
        // The node's ACKs to alice race its fan-out to bob: wait for alice's positions too.
        try await ClientHarness.waitUntil(alice, "three acknowledged at alice") {
            try alice.messages(in: conversation).filter(\.message.isSent).count == 3
        }
        let third = try #require(try alice.message(sent[2])?.message.position)
        let bobChanges = Recorder(bob.changes())

        try alice.deleteMessages(in: conversation, before: third, mode: .allParticipants)
        #expect(try alice.messages(in: conversation).map(\.id) == [sent[2]])
        try await ClientHarness.waitUntil(bob, "the older two gone at bob") {
            try bob.messages(in: conversation).map(\.id) == [sent[2]]
        }
        #expect(try bob.conversation(conversation)?.totalMessageCount == 1)
        try await bobChanges.wait("delete changes for the older two at bob") { batches in
            let deleted = batches.joined().compactMap { c -> MessageID? in
                if case .message(let m) = c.object, c.type == .delete { m.id } else { nil }
            }
            return deleted.count == 2 && Set(deleted) == [sent[0], sent[1]]
        }
        #expect(try await ClientHarness.nodeMessageCount(node, conversation) == 1)

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    @Test func aLiveQueryFollowsMessagesArrivingFromTheNode() async throws {
        let node = try await TestNode.start("sdk-livequery")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        try await ClientHarness.connect(alice, on: node)
        try await ClientHarness.connect(bob, on: node)
        let conversation = try alice.newConversation(participants: [Self.bob]).id
        let m1 = try Self.send(alice, "one", in: conversation)
        _ = try await bob.waitForCreation(of: m1, timeout: .seconds(60))

        let query = Query<StoredMessage>(
            predicate: .property(MessageProperty.conversation, .equalTo, .conversation(conversation)),
            sortDescriptors: [QuerySortDescriptor(MessageProperty.position)])
        let controller = try bob.queryController(for: query)
        #expect(try controller.start().map(\.id) == [m1])
        let updates = Recorder(controller.updates)

        let m2 = try Self.send(alice, "two", in: conversation)
        try await updates.wait("m2 inserted in bob's live query") {
            $0.contains { $0.objects.map(\.id) == [m1, m2] && $0.changes.inserts == [1] }
        }

        try alice.delete(m1, mode: .allParticipants)
        try await updates.wait("m1 deleted from bob's live query") {
            $0.contains { $0.objects.map(\.id) == [m2] && $0.changes.deletes == [0] }
        }

        try bob.markAsRead(m2)
        try await updates.wait("m2's read state updated in the live query") {
            $0.contains { $0.objects.first?.isUnread == false && $0.changes.updates == [0] }
        }

        controller.stop()
        try await alice.close()
        try await bob.close()
        await node.stop()
    }
}
