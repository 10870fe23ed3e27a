import Foundation
import LaminaModel
import LaminaWire
import Testing

@testable import LaminaClient

/// The outbox rules the sync session relies on: a creation is pipelined, queued commands
/// follow a distinct merge, and remote changes commit with the commands they cause.
@Suite struct SyncOutboxOrderTests {
    @Test func aConversationCreationAndTheCommandsBehindItLeaveInOneBatch() async throws {
        try await withTemporaryDirectory { dir in
            let store = try LocalStore(location: StoreLocation(dataDirectory: dir, user: alice))
            defer { try? store.close() }
            let cid = ConversationID.random()
            let create = try OutboxEncoder.entry(
                for: .createConversation(CreateConversation(conversationID: cid, participants: [bob])))
            let send = try OutboxEncoder.entry(
                for: .sendMessage(
                    SendMessage(messageID: .random(), conversationID: cid, parts: [try MessagePart.with(text: "hi")])))
            try store.enqueue(create)
            try store.enqueue(send)
            #expect(try store.dequeueOutbox(limit: 10).map(\.id) == [create.id, send.id])
            #expect(try store.dequeueOutbox(limit: 10).isEmpty)
        }
    }

    /// A receipt that replaces pending ones leaves one per conversation waiting; a receipt
    /// already handed to the connection is never withdrawn, and other conversations' stay.
    @Test func aDeliveryReceiptReplacesThePendingOnesOfItsConversation() async throws {
        try await withTemporaryDirectory { dir in
            let store = try LocalStore(location: StoreLocation(dataDirectory: dir, user: alice))
            defer { try? store.close() }
            let c = ConversationID.random()
            let other = ConversationID.random()
            func receipt(_ conversation: ConversationID, _ at: UInt64) throws -> OutboxEntry {
                var entry = try OutboxEncoder.entry(
                    for: .deliveryReceipt(
                        DeliveryReceipt(
                            requestID: UUID(), conversationID: conversation,
                            upTo: HLCTimestamp(physical: at, logical: 0, node: NodeID(1)))))
                entry.replacesPending = true
                return entry
            }
            let first = try receipt(c, 5)
            let elsewhere = try receipt(other, 6)
            let second = try receipt(c, 7)
            for entry in [first, elsewhere, second] { try store.enqueue(entry) }
            #expect(try store.outboxEntries().map(\.id) == [elsewhere.id, second.id])
            #expect(
                try store.pendingEntries(kind: OutboxCommandKind.deliveryReceipt.rawValue, objectID: c.uuid).map(\.id)
                    == [second.id])
            #expect(try store.dequeueOutbox(limit: 10).map(\.id) == [elsewhere.id, second.id])
            let third = try receipt(c, 9)
            try store.enqueue(third)
            #expect(try store.outboxEntries().map(\.id) == [elsewhere.id, second.id, third.id])
        }
    }

    @Test func everyConversationCommandCanBeRedirected() throws {
        let from = ConversationID.random()
        let to = ConversationID.random()
        let message = MessageID.random()
        let frames: [Frame] = [
            .addParticipants(ParticipantsUpdate(requestID: UUID(), conversationID: from, users: [bob])),
            .removeParticipants(ParticipantsUpdate(requestID: UUID(), conversationID: from, users: [bob])),
            .setMetadata(
                SetMetadata(
                    requestID: UUID(), conversationID: from, keyPath: try MetadataKeyPath(parsing: "a"),
                    value: .string("b"))),
            .deleteMetadata(
                DeleteMetadata(requestID: UUID(), conversationID: from, keyPath: try MetadataKeyPath(parsing: "a"))),
            .deleteConversation(DeleteConversation(requestID: UUID(), conversationID: from, mode: .myDevices)),
            .markAllRead(
                MarkAllRead(
                    requestID: UUID(), conversationID: from,
                    upTo: HLCTimestamp(physical: 1, logical: 0, node: NodeID(1)))),
            .sendMessage(
                SendMessage(messageID: message, conversationID: from, parts: [try MessagePart.with(text: "hi")])),
            .markRead(MarkRead(requestID: UUID(), conversationID: from, messageID: message)),
            .deleteMessage(
                DeleteMessage(requestID: UUID(), conversationID: from, messageID: message, mode: .allParticipants)),
            .deliveryReceipt(
                DeliveryReceipt(
                    requestID: UUID(), conversationID: from,
                    upTo: HLCTimestamp(physical: 1, logical: 0, node: NodeID(1)))),
        ]
        for frame in frames {
            #expect(OutboxRedirect.conversation(of: frame) == from)
            let moved = OutboxRedirect.redirect(frame, to: to)
            #expect(OutboxRedirect.conversation(of: moved) == to)
            #expect(moved.commandID == frame.commandID)
            #expect(moved.type == frame.type)
        }
        let create = Frame.createConversation(CreateConversation(conversationID: from, participants: [bob]))
        #expect(OutboxRedirect.conversation(of: create) == nil)
        #expect(OutboxRedirect.redirect(create, to: to) == create)
    }

    @Test func remoteChangesCommitWithTheCommandsTheyCauseOrNotAtAll() async throws {
        try await withTemporaryDirectory { dir in
            let store = try LocalStore(location: StoreLocation(dataDirectory: dir, user: alice))
            defer { try? store.close() }
            let c = try conversation([alice, bob])
            let m = try remoteMessage(in: c.id, at: 100)
            let receipt = try OutboxEncoder.entry(
                for: .deliveryReceipt(DeliveryReceipt(requestID: UUID(), conversationID: c.id, upTo: m.position!)))

            // A message for a conversation that is not here fails the whole transaction:
            // no message, no cursor, no receipt.
            let orphan = try remoteMessage(in: .random(), at: 50)
            #expect(throws: ClientError.self) {
                try store.apply([.message(orphan, receivedAt: received)], cursor: 7, outbox: [receipt])
            }
            #expect(try store.outboxEntries().isEmpty)
            #expect(try store.syncCursor() == nil)

            try store.apply([.conversation(c), .message(m, receivedAt: received)], cursor: 8, outbox: [receipt])
            #expect(try store.message(m.id) != nil)
            #expect(try store.syncCursor() == 8)
            #expect(try store.outboxEntries().map(\.id) == [receipt.id])

            // An acknowledged command leaves the outbox with the changes its ACK brings.
            var mine = try remoteMessage(in: c.id, from: alice, at: 200)
            let position = mine.position
            mine.position = nil
            try store.apply([.message(mine, receivedAt: received)])
            mine.position = position
            #expect(throws: ClientError.self) {
                try store.apply([.message(orphan, receivedAt: received)], acknowledged: receipt.id)
            }
            #expect(try store.outboxEntries().map(\.id) == [receipt.id])
            try store.apply([.message(mine, receivedAt: received)], acknowledged: receipt.id)
            #expect(try store.outboxEntries().isEmpty)
            #expect(try store.message(mine.id)?.message.position == position)
        }
    }
}
