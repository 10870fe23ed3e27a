import Foundation
import LaminaModel
import LaminaWire

/// The node's full-text index of messages (`v26-message-search`): the text of each message's
/// inline `text/*` parts (MIME type compared without case; `text/plain`, `text/markdown`, …;
/// parts over 2 KB are rich content and not indexed), joined by line breaks, extracted in
/// Swift from the parts (`indexedText(of:)`): on PostgreSQL written by the message's insert
/// (`appendMessage`: local sends and replicated ones), on SQLite by the writer in batches
/// behind the messages (`SearchBacklog`); replaced when the parts change, removed when the
/// message is deleted for everyone. A message without such text has no entry.
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
///
/// `v29-message-search-conversations` (SQLite) rebuilds the FTS5 table with a second column,
/// `conversation`: one token per message naming its conversation (`conversationToken`), so
/// that a search reads only the postings of the user's conversations (`searchMessages`
/// queries `conversation : (…) AND body : (…)`) instead of every match on the node; and
/// prefix indexes of 2 and 3 characters, so that the last word's prefix (`"ba"*`) is one
/// posting list read lazily rather than every word starting so merged up front. Words are
/// searched in `body` only (a column filter). The token follows the message when a merge
/// moves it (`retokenizeMessages`).
enum MessageSearchSchema {
    static let migration = "v26-message-search"
    static let conversationsMigration = "v29-message-search-conversations"

    /// The most conversations a search on SQLite names in its FTS5 query (`searchMessages`):
    /// beyond, the query reads every match on the node (each token is one more posting list
    /// the query merges).
    static let narrowedConversationsLimit = 256

    /// Messages read per batch by the backfill (each batch one read and its inserts).
    static let backfillBatch = 1_000

    static let sqlite: [String] = [
        """
        CREATE VIRTUAL TABLE message_search USING fts5(body, tokenize = 'unicode61 remove_diacritics 2')
        """
    ]

    /// `v29-message-search-conversations`: the table rebuilt (filled by `backfill`).
    static let sqliteConversations: [String] = [
        "DROP TABLE message_search",
        """
        CREATE VIRTUAL TABLE message_search USING fts5(body, conversation, prefix = '2 3',
            tokenize = 'unicode61 remove_diacritics 2')
        """,
    ]

    /// The SQL of a conversation's token in the index, from the column or parameter holding
    /// its 16-byte id: the last 4 bytes in lowercase hexadecimal (one `unicode61` token). Two
    /// conversations may share a token: a search then reads a few more postings, and its joins
    /// still keep exactly the user's messages.
    static func conversationToken(_ id: String) -> String { "lower(hex(substr(\(id), 13, 4)))" }

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

    /// The text a stored message body (`MessageBodyCoding`) is indexed with; a body that does
    /// not decode is `.corrupt`.
    static func indexedText(ofBody body: some ContiguousBytes) throws(StorageError) -> String? {
        do throws(WireError) {
            return indexedText(of: try MessageBodyCoding.decode(body).parts)
        } catch {
            throw StorageError(.corrupt, "a message body does not decode: \(error.reason)")
        }
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
    /// migration's transaction (memory stays bounded by a batch). `conversations`: on SQLite,
    /// the table of v29 (with the conversation's token); false for v26's (text only).
    static func backfill(_ db: any SQLSession, batch: Int = backfillBatch, conversations: Bool = true)
        throws(StorageError)
    {
        var after = Data()
        while true {
            let rows = try db.rows(
                "SELECT id, body FROM messages WHERE id > ? AND deleted = 0 ORDER BY id LIMIT ?",
                [after, batch])
            for row in rows {
                let id: Data = row["id"]
                let body: Data = row["body"]
                after = id
                guard let text = try indexedText(ofBody: body) else { continue }
                switch db.dialect {
                case .sqlite where conversations:
                    try db.run(
                        """
                        INSERT INTO message_search (rowid, body, conversation)
                            SELECT rowid, ?, \(conversationToken("conversation_id")) FROM messages WHERE id = ?
                        """, [text, id])
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
            if rows.count < batch { break }
        }
        // Every message is indexed: SQLite's backlog, when the store has one, starts after them.
        if db.dialect == .sqlite,
            try db.int64("SELECT 1 FROM sqlite_master WHERE name = 'search_backlog'", []) != nil
        {
            try db.run("UPDATE search_backlog SET indexed_through = (SELECT COALESCE(MAX(rowid), 0) FROM messages)", [])
        }
    }
}
