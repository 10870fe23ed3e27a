import Foundation
import GRDB
import LaminaModel
import LaminaWire

/// Migration v3: the schema of the write path (`Writer/WRITE-PATH.md`).
///
/// - A message is one row: its parts and push configuration are one `body` BLOB (the wire
///   encoding, `MessageBodyCoding`); `message_parts` keeps only content references, which
///   download authorization and collection look up by content id. The SEND_MESSAGE's digest
///   lives in the message row (`request_digest`), so a send needs no idempotency record.
/// - Feed entries of `message-created` store no payload: they name the message, stored once.
/// - Delivery receipts are a per (conversation, user) position (`delivered_markers`), like
///   read markers; `recipient_status` holds only statuses set for one message (MARK_READ, or
///   replicated). Existing per-message rows stay valid (statuses only move up).
/// - `conversations.messages_sent` counted accepted messages, so a send learned whether it
///   was the first without counting (dropped by v4: the writer asks the messages instead).
enum WritePathMigration {
    static func run(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE messages_v3 (
                    id BLOB NOT NULL UNIQUE CHECK (length(id) = 16),
                    conversation_id BLOB NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                    sender TEXT NOT NULL,
                    pos_physical INTEGER NOT NULL,
                    pos_logical INTEGER NOT NULL,
                    pos_node INTEGER NOT NULL,
                    sent_at INTEGER NOT NULL,
                    body BLOB NOT NULL,
                    request_digest BLOB CHECK (request_digest IS NULL OR length(request_digest) = 32),
                    origin_node INTEGER NOT NULL,
                    hlc_physical INTEGER NOT NULL,
                    hlc_logical INTEGER NOT NULL,
                    hlc_node INTEGER NOT NULL,
                    deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1))
                ) STRICT
                """)
        // Old rows: the body from the part rows and push columns.
        let old = try GRDB.Row.fetchCursor(db, sql: "SELECT * FROM messages ORDER BY rowid")
        let insert = try db.makeStatement(
            sql: """
                INSERT INTO messages_v3 (id, conversation_id, sender, pos_physical, pos_logical, pos_node, sent_at, body,
                    origin_node, hlc_physical, hlc_logical, hlc_node, deleted)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        let reader = StorageReader(db: SQLiteSession(db))
        while let grdbRow = try old.next() {
            let row = SQLRow(grdbRow)
            let id: Data = grdbRow["id"]
            let parts = try reader.legacyParts(of: id)
            let push = try reader.legacyPush(row)
            let body = try MessageBodyCoding.encode(parts: parts, push: push)
            let columns = ["conversation_id", "sender", "pos_physical", "pos_logical", "pos_node", "sent_at"].map {
                grdbRow[$0] as DatabaseValue
            }
            let more = ["origin_node", "hlc_physical", "hlc_logical", "hlc_node", "deleted"].map {
                grdbRow[$0] as DatabaseValue
            }
            try insert.execute(
                arguments: GRDB.StatementArguments(
                    [(id as any GRDB.DatabaseValueConvertible).databaseValue] + columns + [
                        (Data(body) as any GRDB.DatabaseValueConvertible).databaseValue
                    ] + more))
        }
        try db.execute(sql: "DELETE FROM message_parts WHERE content_id IS NULL")
        try db.execute(sql: "DROP TABLE messages")
        try db.execute(sql: "ALTER TABLE messages_v3 RENAME TO messages")
        try db.execute(
            sql:
                "CREATE UNIQUE INDEX messages_position ON messages(conversation_id, pos_physical, pos_logical, pos_node)"
        )

        try db.execute(
            sql: """
                CREATE TABLE feed_entries_v3 (
                    user_id TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    kind INTEGER NOT NULL,
                    conversation_id BLOB,
                    message_id BLOB,
                    payload BLOB,
                    created_at INTEGER NOT NULL,
                    CHECK (payload IS NOT NULL OR message_id IS NOT NULL),
                    PRIMARY KEY (user_id, seq)
                ) STRICT, WITHOUT ROWID
                """)
        try db.execute(
            sql:
                "INSERT INTO feed_entries_v3 SELECT user_id, seq, kind, conversation_id, message_id, payload, created_at FROM feed_entries"
        )
        try db.execute(sql: "DROP TABLE feed_entries")
        try db.execute(sql: "ALTER TABLE feed_entries_v3 RENAME TO feed_entries")

        try db.execute(
            sql: """
                CREATE TABLE delivered_markers (
                    conversation_id BLOB NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                    user_id TEXT NOT NULL,
                    pos_physical INTEGER NOT NULL,
                    pos_logical INTEGER NOT NULL,
                    pos_node INTEGER NOT NULL,
                    PRIMARY KEY (conversation_id, user_id)
                ) STRICT, WITHOUT ROWID
                """)
        try db.execute(sql: "ALTER TABLE conversations ADD COLUMN messages_sent INTEGER NOT NULL DEFAULT 0")
        try db.execute(
            sql:
                "UPDATE conversations SET messages_sent = (SELECT count(*) FROM messages m WHERE m.conversation_id = conversations.id)"
        )
    }
}

extension StorageReader {
    /// The parts of a message stored before v3 (a row per part).
    fileprivate func legacyParts(of message: Data) throws -> [LaminaModel.MessagePart] {
        try db.rows("SELECT * FROM message_parts WHERE message_id = ? ORDER BY idx", [message]).map {
            (row) throws(StorageError) in
            try Columns.part(row)
        }
    }

    /// The push configuration of a message row stored before v3.
    fileprivate func legacyPush(_ row: Row) throws -> LaminaModel.PushConfiguration? {
        guard row["has_push"] as Bool else { return nil }
        var data: [String: String] = [:]
        if let encoded: Data = row["push_data"] {
            guard let decoded = try? JSONSerialization.jsonObject(with: encoded) as? [String: String] else {
                throw StorageError(.corrupt, "push data is not a string dictionary")
            }
            data = decoded
        }
        return LaminaModel.PushConfiguration(
            alert: row["push_alert"], sound: row["push_sound"], title: row["push_title"],
            category: row["push_category"], data: data)
    }
}
