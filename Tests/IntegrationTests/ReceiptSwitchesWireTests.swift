import Foundation
import LaminaModel
import LaminaWire
import Testing

/// The receipts byte on the wire (SPEC §3.16, §5.1 bit 13) against a real node, on SQLite and
/// PostgreSQL: a session without the receipt switches sends and receives the old single flag
/// with its old meaning, and is refused the two switches set apart.
@Suite struct ReceiptSwitchesWireTests {
    static let carol: UserID = "carol"  // knows only the single flag
    static let dave: UserID = "dave"  // knows the two switches

    static func created(_ id: ConversationID, at client: SyncTestClient) async throws -> Conversation {
        let change = try await client.change {
            if case .conversationCreated(let c) = $0.event { return c.id == id }
            return false
        }
        guard case .conversationCreated(let c) = change.event else { fatalError("unreachable") }
        return c
    }

    static func create(
        _ client: SyncTestClient, with user: UserID, delivery: Bool, read: Bool
    ) async throws -> ConversationID {
        let id = ConversationID.random()
        try await client.command(
            .createConversation(
                CreateConversation(
                    conversationID: id, participants: [user],
                    options: ConversationOptions(
                        isDistinct: false, deliveryReceiptsEnabled: delivery, readReceiptsEnabled: read))),
            id: id.uuid)
        // The other participant learns of it with its first message.
        let message = MessageID.random()
        try await client.command(
            .sendMessage(
                SendMessage(messageID: message, conversationID: id, parts: [try MessagePart(text: "hello")])),
            id: message.uuid)
        return id
    }

    @Test(arguments: StoreBackend.allCases) func aClientWithTheSingleFlagKeepsItsMeaning(_ backend: StoreBackend)
        async throws
    {
        let node = try await TestNode.start("receipts-wire", backend: backend)
        let carol = try await node.session(
            Self.carol, device: UUID(), features: FeatureSet.all.subtracting(.receiptSwitches))
        let dave = try await node.session(Self.dave, device: UUID())

        // The two switches set apart need bit 13.
        let refusedID = ConversationID.random()
        let refused = await #expect(throws: CommandFailed.self) {
            try await carol.command(
                .createConversation(
                    CreateConversation(
                        conversationID: refusedID, participants: [Self.dave],
                        options: ConversationOptions(
                            isDistinct: false, deliveryReceiptsEnabled: false, readReceiptsEnabled: true))),
                id: refusedID.uuid)
        }
        #expect(refused?.error.code == .forbidden)
        #expect(refused?.error.isFatal == false)

        // The old flag, off and on, means both switches off and both on.
        for flag in [false, true] {
            let id = try await Self.create(carol, with: Self.dave, delivery: flag, read: flag)
            let seen = try await Self.created(id, at: dave)
            #expect(seen.deliveryReceiptsEnabled == flag && seen.readReceiptsEnabled == flag)
        }

        // What a client with the two switches creates reaches the old client as the nearest flag.
        for (delivery, read, flag) in [(false, true, true), (true, false, false)] {
            let id = try await Self.create(dave, with: Self.carol, delivery: delivery, read: read)
            let old = try await Self.created(id, at: carol)
            #expect(old.deliveryReceiptsEnabled == flag && old.readReceiptsEnabled == flag, "\(delivery), \(read)")
            // A later session with the switches gets them as created (from the store).
            let fresh = try await node.session(Self.carol, device: UUID())
            let stored = try await Self.created(id, at: fresh)
            #expect(stored.deliveryReceiptsEnabled == delivery && stored.readReceiptsEnabled == read)
            await fresh.close()
        }
        for client in [carol, dave] { await client.close() }
        await node.stop()
    }
}
