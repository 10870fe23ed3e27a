import Foundation
import GRDB
import LaminaModel
import LaminaWire
import NIOCore
import Testing

@testable import LaminaClient

/// Issue 30 item 4: a command is encoded once, when queued; the session sends the stored
/// bytes as they are (no decode and encode again), and decodes an entry only to address it
/// to the conversation its own was merged into.
@Suite struct OutboxBytesTests {
    @Test func queuedCommandsGoOutAsTheBytesStoredWhenQueued() async throws {
        try await withDevices { root in
            let node = FakeNode()
            let a = try TestDevice(user: alice, node: node, directory: try deviceDirectory(root, "a"))
            let c = try a.client.newConversation(participants: [bob])
            let ids = try (0..<3).map { try a.client.send(try a.text("m\($0)"), in: c.id).id }
            let stored = try a.client.store.outboxEntries()
            #expect(stored.map(\.kind) == ["conversation.create"] + Array(repeating: "message.send", count: 3))
            // The entries know the conversation their bytes address (none for the creation).
            #expect(stored.map(\.conversationID) == [nil] + Array(repeating: c.id.uuid, count: 3))
            try await a.connect()
            try await eventually(a.client, "all sent") { try ids.allSatisfy { try a.client.isSent($0) } }
            let end = try #require(await node.clientEnds.first)
            #expect(end.sentBytes == stored.map(\.payload))
            await a.client.disconnect()
        }
    }

    @Test func storedBytesAreCheckedAgainstTheirKindAndLength() throws {
        let c = try conversation([alice, bob])
        let frame = Frame.sendMessage(
            SendMessage(messageID: MessageID(uuid: UUID()), conversationID: c.id, parts: [try MessagePart(text: "hi")]))
        var entry = try OutboxEncoder.entry(for: frame)
        #expect(Array(try OutboxEncoder.bytes(of: entry).readableBytesView) == entry.payload)
        #expect(entry.conversationID == c.id.uuid)
        entry.kind = OutboxCommandKind.markRead.rawValue
        #expect { try OutboxEncoder.bytes(of: entry) } throws: { ($0 as? ClientError)?.code == .corruptRecord }
        entry = try OutboxEncoder.entry(for: frame)
        entry.payload.removeLast()
        #expect { try OutboxEncoder.bytes(of: entry) } throws: { ($0 as? ClientError)?.code == .corruptRecord }
        entry.payload = [1, 2]
        #expect { try OutboxEncoder.bytes(of: entry) } throws: { ($0 as? ClientError)?.code == .corruptRecord }
    }

    @Test func aStoreFromBeforeTheColumnLearnsEachEntrysConversation() async throws {
        try await withTemporaryDirectory { dir in
            let location = StoreLocation(dataDirectory: dir, user: alice)
            try FileManager.default.createDirectory(at: location.contentDirectory, withIntermediateDirectories: true)
            let c = try conversation([alice, bob])
            let send = try OutboxEncoder.entry(
                for: .sendMessage(
                    SendMessage(
                        messageID: MessageID(uuid: UUID()), conversationID: c.id, parts: [try MessagePart(text: "hi")]))
            )
            let create = try OutboxEncoder.entry(
                for: .createConversation(
                    CreateConversation(conversationID: c.id, participants: [bob], options: ConversationOptions())))
            do {
                // A store as the previous version left it: migrated up to v6, two commands queued.
                let pool = try DatabasePool(path: location.databaseURL.path)
                try StoreSchema.migrator().migrate(pool, upTo: "v6-identities-blocks")
                try pool.write { db in
                    for (seq, e) in [create, send].enumerated() {
                        try db.execute(
                            sql:
                                "INSERT INTO outbox(seq, id, kind, object_id, payload, state, attempts, created_at) VALUES (?, ?, ?, ?, ?, 0, 0, 1)",
                            arguments: [
                                seq + 1, StoreCoding.blob(e.id), e.kind, e.objectID.map(StoreCoding.blob),
                                Data(e.payload),
                            ])
                    }
                }
                try pool.close()
            }
            let store = try LocalStore(location: location)
            defer { try? store.close() }
            let entries = try store.outboxEntries()
            #expect(entries.map(\.id) == [create.id, send.id])
            #expect(entries.map(\.conversationID) == [nil, c.id.uuid])
            #expect(entries.map(\.payload) == [create.payload, send.payload])
        }
    }
}
