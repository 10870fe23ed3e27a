import Foundation
import LaminaModel
import LaminaWire

/// The node's full-text index of messages (`v26-message-search`): the text of each message's
/// inline `text/*` parts (MIME type compared without case; `text/plain`, `text/markdown`, …;
/// parts over 2 KB are rich content and not indexed), joined by line breaks, extracted in
/// Swift from the parts (`indexedText(of:)`) and written in the same transaction as the
/// message: by `appendMessage` (local sends and replicated ones), replaced by `replaceParts`,
/// removed when the message is deleted for everyone. A message without such text has no entry.
///
/// - SQLite: an FTS5 table holding the text (contentful: the body is an encoding of the parts,
///   not text an external-content table could read), rowid = the message's rowid in `messages`
///   (the node never runs VACUUM, which could renumber them), tokenizer `unicode61` with
///   diacritics removed, as the device's index (`v14-message-search` on the client).
/// - PostgreSQL: a `tsvector` column of `messages` (`to_tsvector('simple', text)`: words
///   lowercased, no stemming, diacritics kept) with a GIN index, filled by the batch insert of
///   the group's messages (no statement of its own).
///
/// Messages stored before the migration are indexed by it, `backfillBatch` messages per read.
enum MessageSearchSchema {
    static let migration = "v26-message-search"

    /// Messages read per batch by the backfill (each batch one read and its inserts).
    static let backfillBatch = 1_000

    static let sqlite: [String] = [
        """
        CREATE VIRTUAL TABLE message_search USING fts5(body, tokenize = 'unicode61 remove_diacritics 2')
        """
    ]

    static let postgres: [String] = [
        "ALTER TABLE messages ADD COLUMN search tsvector",
        "CREATE INDEX messages_search ON messages USING gin (search)",
    ]

    /// The PostgreSQL text search configuration of both the column and the queries.
    static let postgresConfiguration = "simple"

    /// The column's value in the single-row insert of a message, from its text bound as one `?`
    /// (empty: NULL, no entry).
    static let postgresVector = "to_tsvector('\(postgresConfiguration)', NULLIF(CAST(? AS TEXT), ''))"

    /// The text a message is indexed with: its inline `text/*` parts, decoded as UTF-8 (invalid
    /// bytes replaced), joined by line breaks; nil when it has none.
    static func indexedText(of parts: [MessagePart]) -> String? {
        var text: String?
        for part in parts {
            guard case .inline(let bytes) = part.content, isText(part.mimeType), !bytes.isEmpty else { continue }
            let piece = String(decoding: bytes, as: UTF8.self)
            text = text.map { $0 + "\n" + piece } ?? piece
        }
        return text
    }

    /// Whether the type is `text/*`, compared without case.
    static func isText(_ type: MIMEType) -> Bool {
        let prefix = Array("text/".utf8)
        var i = 0
        for byte in type.rawValue.utf8 {
            guard i < prefix.count else { return true }
            let lower = (byte >= 0x41 && byte <= 0x5A) ? byte + 0x20 : byte
            guard lower == prefix[i] else { return false }
            i += 1
        }
        return false
    }

    /// Indexes every message not deleted for everyone, `backfillBatch` at a time, in the
    /// migration's transaction (memory stays bounded by a batch).
    static func backfill(_ db: any SQLSession, batch: Int = backfillBatch) throws(StorageError) {
        var after = Data()
        while true {
            let rows = try db.rows(
                "SELECT id, body FROM messages WHERE id > ? AND deleted = 0 ORDER BY id LIMIT ?",
                [after, batch])
            for row in rows {
                let id: Data = row["id"]
                let body: Data = row["body"]
                after = id
                let parts: [MessagePart]
                do { parts = try MessageBodyCoding.decode(body).parts } catch {
                    throw StorageError(.corrupt, "a message body does not decode: \(error.reason)")
                }
                guard let text = indexedText(of: parts) else { continue }
                switch db.dialect {
                case .sqlite:
                    try db.run(
                        "INSERT INTO message_search (rowid, body) SELECT rowid, ? FROM messages WHERE id = ?",
                        [text, id])
                case .postgres:
                    try db.run(
                        "UPDATE messages SET search = to_tsvector('\(postgresConfiguration)', CAST(? AS TEXT)) WHERE id = ?",
                        [text, id])
                }
            }
            if rows.count < batch { return }
        }
    }
}
