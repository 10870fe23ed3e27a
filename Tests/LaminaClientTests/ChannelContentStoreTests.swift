import Foundation
import GRDB
import LaminaModel
import Testing

@testable import LaminaClient

/// A channel message's parts in the local store (migration `v13-channel-content`): rich parts
/// wait for download, the content manager's rules and requests serve them as a conversation's,
/// a query finds them by MIME type, and deleting the channel removes their rows and files.
@Suite struct ChannelContentStoreTests {
    static func channelMessage(_ channel: ChannelID, seq: UInt64, _ parts: [MessagePart]) -> ChannelMessage {
        ChannelMessage(
            id: .random(), channelID: channel, sender: bob, sentAt: Timestamp(millisecondsSince1970: 1_000),
            position: position(1_000 + seq), logSeq: seq, parts: parts)
    }

    @Test func richChannelPartsDownloadByTheRulesAndGoWithTheirChannel() async throws {
        try await withStore { store in
            let channel = ChatChannel(
                id: .random(), name: try ChannelName("media"), creator: bob,
                createdAt: Timestamp(millisecondsSince1970: 500))
            let text = try MessagePart(text: "look")
            let small = richPart("image/png", size: 1_000)
            let large = richPart("image/png", size: 80_000)
            let video = richPart("video/mp4", size: 90_000)
            let first = Self.channelMessage(channel.id, seq: 1, [text, small, large])
            let second = Self.channelMessage(channel.id, seq: 2, [video])
            try store.apply([.channel(channel), .channelMessage(first), .channelMessage(second)])

            let held = try store.channelMessages(of: channel.id)
            #expect(held.map(\.id) == [first.id, second.id])
            #expect(held[0].partStates.map(\.transferStatus) == [.complete, .readyForDownload, .readyForDownload])

            // The default rules take the 1,000-byte part only; a request takes the video.
            let manager = try ContentManager(store: store, transfer: FakeTransfer())
            let smallPart = MessagePartID(message: first.id, part: small.id)
            #expect(try await manager.runAutoDownloads() == [smallPart])
            #expect(try store.channelMessages(of: channel.id)[0].partStates[1].autoDownloaded)
            let url = try await manager.downloadContent(of: MessagePartID(message: second.id, part: video.id))
            #expect((try Data(contentsOf: url)).count == 90_000)
            #expect(try store.currentDiskUtilization().contentBytes == 91_000)
            guard case .file(let smallFile) = try store.accessContent(of: smallPart) else {
                Issue.record("the auto-downloaded part has no file")
                return
            }
            #expect((try Data(contentsOf: smallFile)).count == 1_000)

            // A query over channel messages by their parts' MIME type.
            let pngs = try store.execute(
                Query<StoredChannelMessage>(predicate: .property("parts.mimeType", .contains, .string("image/png"))),
                window: nil)
            #expect(pngs.objects.map(\.id) == [first.id])
            let videos = try store.execute(
                Query<StoredChannelMessage>(predicate: .property("parts.mimeType", .contains, .string("video/mp4"))),
                window: nil)
            #expect(videos.objects.map(\.id) == [second.id])
            #expect(videos.objects.first?.partStates.map(\.transferStatus) == [.complete])

            // The channel is deleted: its parts' rows and files go with it.
            try store.apply([.channelDeleted(channel.id)])
            #expect(!FileManager.default.fileExists(atPath: url.path))
            let rows = try store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM part") ?? -1 }
            #expect(rows == 0)
            #expect(try store.currentDiskUtilization().contentBytes == 0)
        }
    }

    /// Conversation messages keep their parts through the migration's rebuilt table, and a
    /// deleted message's parts go with it (a trigger now, not a foreign key).
    @Test func aConversationMessagesPartsGoWithTheMessage() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            try store.apply([.conversation(c)])
            let m = Message(
                conversationID: c.id, sender: bob,
                parts: [try MessagePart(text: "hi"), richPart("image/png", size: 5)],
                sentAt: Timestamp(millisecondsSince1970: 2_000), position: position(2_000), recipientStatus: [:])
            try store.apply([.message(m, receivedAt: received)])
            #expect(try store.message(m.id)?.partStates.count == 2)
            try store.apply([.messageDeleted(m.id)])
            let rows = try store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM part") ?? -1 }
            #expect(rows == 0)
        }
    }
}

/// `v13-channel-content` rebuilds `part`: the triggers and indexes it had are made again, and a
/// trigger of another table that names `part` keeps working (a store that ran a later
/// migration first, such as a search index kept by triggers, loses nothing).
@Suite struct ChannelPartMigrationTests {
    @Test func theRebuildKeepsPartsTriggersAndIndexes() async throws {
        try await withTemporaryDirectory { dir in
            let queue = try DatabaseQueue(path: dir.appendingPathComponent("store.sqlite").path)
            let migrator = StoreSchema.migrator()
            try migrator.migrate(queue, upTo: "v12-receipt-switches")
            try await queue.write { db in
                try db.execute(
                    sql: """
                        CREATE TABLE part_log (message_id BLOB, what TEXT);
                        CREATE TRIGGER part_logged AFTER INSERT ON part BEGIN
                            INSERT INTO part_log VALUES (NEW.message_id, 'insert');
                        END;
                        CREATE TRIGGER message_names_part BEFORE DELETE ON message BEGIN
                            INSERT INTO part_log SELECT p.message_id, 'before' FROM part p WHERE p.message_id = OLD.id;
                        END;
                        CREATE INDEX part_by_content ON part(content_id);
                        """)
            }
            try migrator.migrate(queue)
            try await queue.write { db in
                let names = try String.fetchAll(
                    db, sql: "SELECT name FROM sqlite_master WHERE tbl_name = 'part' ORDER BY name")
                #expect(Set(names).isSuperset(of: ["part", "part_cached", "part_by_content", "part_logged"]))
                try db.execute(
                    sql: """
                        INSERT INTO conversation (id, creator, is_distinct, receipts_enabled, created_at, metadata, is_synced)
                        VALUES (x'01', 'bob', 0, 1, 0, x'', 1);
                        INSERT INTO message (id, conversation_id, sender, is_sent, is_unread) VALUES (x'02', x'01', 'bob', 1, 0);
                        INSERT INTO part (message_id, idx, part_id, mime_type, inline_bytes, transfer_status)
                        VALUES (x'02', 0, x'03', 'text/plain', x'6869', 4);
                        DELETE FROM message WHERE id = x'02';
                        """)
                let log = try String.fetchAll(db, sql: "SELECT what FROM part_log ORDER BY rowid")
                #expect(log == ["insert", "before"])
                #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM part") == 0)
            }
        }
    }
}
