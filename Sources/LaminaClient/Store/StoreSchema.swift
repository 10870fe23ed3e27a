import Foundation
import GRDB

/// The local store's schema, as versioned migrations. A migration once shipped is never
/// edited; changes go in a new, later migration.
enum StoreSchema {
    static func migrator() -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE store_info (
                        key TEXT PRIMARY KEY NOT NULL,
                        value
                    ) WITHOUT ROWID;

                    CREATE TABLE conversation (
                        id BLOB NOT NULL UNIQUE,
                        creator TEXT NOT NULL,
                        is_distinct INTEGER NOT NULL,
                        receipts_enabled INTEGER NOT NULL,
                        created_at INTEGER NOT NULL,
                        metadata BLOB NOT NULL,
                        is_synced INTEGER NOT NULL DEFAULT 0,
                        merged_into BLOB,
                        last_message_id BLOB,
                        total_count INTEGER NOT NULL DEFAULT 0,
                        unread_count INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE INDEX conversation_merged ON conversation(merged_into);

                    CREATE TABLE participant (
                        conversation_id BLOB NOT NULL REFERENCES conversation(id) ON DELETE CASCADE ON UPDATE CASCADE,
                        user_id TEXT NOT NULL,
                        PRIMARY KEY (conversation_id, user_id)
                    ) WITHOUT ROWID;
                    CREATE INDEX participant_user ON participant(user_id);

                    CREATE TABLE metadata_leaf (
                        conversation_id BLOB NOT NULL REFERENCES conversation(id) ON DELETE CASCADE ON UPDATE CASCADE,
                        path TEXT NOT NULL,
                        value TEXT NOT NULL,
                        PRIMARY KEY (conversation_id, path)
                    ) WITHOUT ROWID;

                    CREATE TABLE message (
                        id BLOB NOT NULL UNIQUE,
                        conversation_id BLOB NOT NULL REFERENCES conversation(id) ON DELETE CASCADE ON UPDATE CASCADE,
                        sender TEXT NOT NULL,
                        sent_at INTEGER,
                        received_at INTEGER,
                        pos_physical INTEGER,
                        pos_logical INTEGER,
                        pos_node INTEGER,
                        is_sent INTEGER NOT NULL,
                        is_unread INTEGER NOT NULL,
                        push BLOB
                    );
                    CREATE INDEX message_position ON message(conversation_id, pos_physical, pos_logical, pos_node);
                    CREATE INDEX message_unread ON message(conversation_id, is_unread);

                    CREATE TABLE part (
                        message_id BLOB NOT NULL REFERENCES message(id) ON DELETE CASCADE ON UPDATE CASCADE,
                        idx INTEGER NOT NULL,
                        part_id BLOB NOT NULL,
                        mime_type TEXT NOT NULL,
                        inline_bytes BLOB,
                        content_id BLOB,
                        content_size INTEGER,
                        content_sha256 BLOB,
                        local_path TEXT,
                        local_size INTEGER NOT NULL DEFAULT 0,
                        transfer_status INTEGER NOT NULL,
                        last_access INTEGER,
                        auto_downloaded INTEGER NOT NULL DEFAULT 0,
                        purged INTEGER NOT NULL DEFAULT 0,
                        PRIMARY KEY (message_id, part_id)
                    ) WITHOUT ROWID;
                    CREATE INDEX part_cached ON part(last_access) WHERE local_path IS NOT NULL;

                    CREATE TABLE recipient_status (
                        message_id BLOB NOT NULL REFERENCES message(id) ON DELETE CASCADE ON UPDATE CASCADE,
                        user_id TEXT NOT NULL,
                        status INTEGER NOT NULL,
                        PRIMARY KEY (message_id, user_id)
                    ) WITHOUT ROWID;

                    CREATE TABLE outbox (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        id BLOB NOT NULL UNIQUE,
                        kind TEXT NOT NULL,
                        object_id BLOB,
                        payload BLOB NOT NULL,
                        state INTEGER NOT NULL,
                        attempts INTEGER NOT NULL DEFAULT 0,
                        created_at INTEGER NOT NULL
                    );
                    """)
        }
        migrator.registerMigration("v2-outbox-failures") { db in
            try db.execute(
                sql: """
                    CREATE TABLE outbox_failure (
                        id BLOB NOT NULL UNIQUE,
                        kind TEXT NOT NULL,
                        object_id BLOB,
                        code INTEGER NOT NULL,
                        reason TEXT NOT NULL,
                        failed_at INTEGER NOT NULL
                    );
                    CREATE INDEX outbox_failure_object ON outbox_failure(object_id);
                    """)
        }
        migrator.registerMigration("v3-status-marks") { db in
            // Per (conversation, user) high-water marks of delivered (2) and read (3) from
            // `status-up-to` changes: a message arriving later at or below a mark gets its
            // status from LaminaMerge's rule (`RecipientStatusLattice.status`).
            try db.execute(
                sql: """
                    CREATE TABLE status_mark (
                        conversation_id BLOB NOT NULL REFERENCES conversation(id) ON DELETE CASCADE ON UPDATE CASCADE,
                        user_id TEXT NOT NULL,
                        status INTEGER NOT NULL,
                        pos_physical INTEGER NOT NULL,
                        pos_logical INTEGER NOT NULL,
                        pos_node INTEGER NOT NULL,
                        PRIMARY KEY (conversation_id, user_id, status)
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v4-node-counts") { db in
            // The node's counts of each conversation for the local user (SPEC §6.4), kept
            // current from the feed (null until the node first tells them), and the counts
            // the app reads (the node's when known, else the local ones).
            try db.execute(
                sql: """
                    ALTER TABLE conversation ADD COLUMN node_total INTEGER;
                    ALTER TABLE conversation ADD COLUMN node_unread INTEGER;
                    ALTER TABLE conversation ADD COLUMN node_last_message_id BLOB;
                    ALTER TABLE conversation ADD COLUMN number_of_messages INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE conversation ADD COLUMN number_of_unread INTEGER NOT NULL DEFAULT 0;
                    UPDATE conversation SET number_of_messages = total_count, number_of_unread = unread_count;
                    """)
        }
        migrator.registerMigration("v5-policy-fill") { db in
            // The conversations a snapshot's first sync still has to fill, in fill order, each
            // with the position its complete history was fetched up to (a fill cut short by a
            // reconnection resumes after it); they were a blob of identifiers in store_info.
            try db.execute(
                sql: """
                    CREATE TABLE policy_fill (
                        ord INTEGER PRIMARY KEY,
                        conversation_id BLOB NOT NULL UNIQUE,
                        pos_physical INTEGER,
                        pos_logical INTEGER,
                        pos_node INTEGER
                    );
                    """)
            if let blob = try Data.fetchOne(db, sql: "SELECT value FROM store_info WHERE key = 'policy_fills'") {
                for offset in stride(from: 0, to: blob.count - blob.count % 16, by: 16) {
                    let id = blob.subdata(in: blob.startIndex + offset..<blob.startIndex + offset + 16)
                    try db.execute(
                        sql: "INSERT OR IGNORE INTO policy_fill(conversation_id) VALUES (?)", arguments: [id])
                }
                try db.execute(sql: "DELETE FROM store_info WHERE key = 'policy_fills'")
            }
        }
        migrator.registerMigration("v6-identities-blocks") { db in
            // Users' identities as the node tells them (SPEC §6.4 `identity-changed`): the
            // string properties and metadata, each a JSON object of strings.
            try db.execute(
                sql: """
                    CREATE TABLE identity (
                        user_id TEXT PRIMARY KEY NOT NULL,
                        fields TEXT NOT NULL,
                        metadata TEXT NOT NULL
                    ) WITHOUT ROWID;
                    CREATE TABLE blocked_user (user_id TEXT PRIMARY KEY NOT NULL) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v7-outbox-conversation") { db in
            // The conversation each queued command's stored bytes address, so a flush sends
            // the bytes as they are unless that conversation has since been merged away.
            try db.execute(sql: "ALTER TABLE outbox ADD COLUMN conversation_id BLOB")
            for row in try Row.fetchAll(db, sql: "SELECT seq, kind, payload, id FROM outbox") {
                let entry = OutboxEntry(
                    id: try StoreCoding.uuid(row, "id"), kind: row["kind"], payload: [UInt8](row["payload"] as Data))
                guard let frame = try? OutboxEncoder.frame(for: entry),
                    let conversation = OutboxRedirect.conversation(of: frame)
                else { continue }
                try db.execute(
                    sql: "UPDATE outbox SET conversation_id = ? WHERE seq = ?",
                    arguments: [StoreCoding.blob(conversation.uuid), row["seq"] as Int64])
            }
        }
        migrator.registerMigration("v8-message-counts") { db in
            // Each conversation's message counts, kept by triggers on `message` so that a
            // transaction's summary reads them instead of scanning the conversation
            // (`ConversationSummary`); filled here from the messages already stored.
            try db.execute(sql: MessageCountSchema.create)
        }
        migrator.registerMigration("v9-followed-users") { db in
            // The users the local user follows explicitly (SPEC §6.7 `follow-changed`).
            try db.execute(sql: "CREATE TABLE followed_user (user_id TEXT PRIMARY KEY NOT NULL) WITHOUT ROWID")
        }
        migrator.registerMigration("v10-channels") { db in
            // Channels the user joined and the messages of their logs held here (SPEC §6.8).
            try db.execute(sql: StoredChannels.schema)
        }
        migrator.registerMigration("v12-receipt-switches") { db in
            // Layer's two receipt switches (SPEC §3.16): `receipts_enabled` is the delivery
            // receipts switch; a conversation stored before them had one flag for both.
            try db.execute(
                sql: """
                    ALTER TABLE conversation ADD COLUMN read_receipts_enabled INTEGER NOT NULL DEFAULT 1
                        CHECK (read_receipts_enabled IN (0, 1))
                    """)
            try db.execute(sql: "UPDATE conversation SET read_receipts_enabled = receipts_enabled")
        }
        migrator.registerMigration(ChannelPartSchema.migration) { db in
            try ChannelPartSchema.migrate(db)
        }
        migrator.registerMigration("v14-message-search") { db in
            // The full-text index of the messages' text parts, kept by triggers (issue 38).
            try db.execute(sql: MessageSearchSchema.create)
        }
        migrator.registerMigration(StoredReactions.migration) { db in
            // The reactions on held messages (issue 38, SPEC §6.9).
            try db.execute(sql: StoredReactions.create)
        }
        migrator.registerMigration(StoredThreads.migration) { db in
            // Replies and thread summaries (issue 38).
            try db.execute(sql: StoredThreads.create)
        }
        migrator.registerMigration(NotificationLevelSchema.migration) { db in
            try NotificationLevelSchema.migrate(db)
        }
        migrator.registerMigration(NotificationLevelUndo.migration) { db in
            try db.execute(sql: NotificationLevelUndo.create)
        }
        return migrator
    }
}
