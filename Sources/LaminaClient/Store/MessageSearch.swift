import GRDB
import LaminaModel

/// A full-text search of the messages on this device: the words of `text`, all of which a
/// message's text parts must hold (the last one as a prefix, so results follow typing), best
/// matches first (BM25), newer first among equals.
public struct MessageSearch: Hashable, Sendable {
    /// The longest search text, in UTF-8 bytes (`MessageSearchTerms.maxTextBytes`, the node's too).
    public static let maxTextBytes = MessageSearchTerms.maxTextBytes
    /// The most words one search takes.
    public static let maxWords = MessageSearchTerms.maxWords
    /// The most results one page returns.
    public static let maxLimit = MessageSearchTerms.maxLimit

    public var text: String
    /// Only this conversation's messages (nil: every conversation).
    public var conversation: ConversationID?
    /// Results per page (1 to `maxLimit`).
    public var limit: Int
    /// Results to skip: the number already shown, to page on.
    public var offset: Int

    public init(_ text: String, in conversation: ConversationID? = nil, limit: Int = 50, offset: Int = 0) {
        self.text = text
        self.conversation = conversation
        self.limit = limit
        self.offset = offset
    }

    /// The words, each quoted for FTS5 (the user's text is never read as query syntax), the
    /// last one a prefix. Throws `.invalidObject` for a text over the limits or without a word.
    func matchExpression() throws(ClientError) -> String {
        guard (1...Self.maxLimit).contains(limit), offset >= 0 else {
            throw ClientError(.invalidObject, "a search's limit is 1 to \(Self.maxLimit) and its offset at least 0")
        }
        do { return try MessageSearchTerms(text).fts5Expression } catch {
            throw ClientError(.invalidObject, error.reason)
        }
    }
}

extension LocalStore {
    /// The messages on this device that match `search`, best first (see ``MessageSearch``).
    /// Deleted messages are never found; parts over 2 KB (rich content) are not indexed.
    public func searchMessages(_ search: MessageSearch) throws(ClientError) -> [StoredMessage] {
        let match = try search.matchExpression()
        return try read { db in
            var sql = """
                SELECT m.* FROM (
                    SELECT rowid / \(MessageSearchSchema.rowsPerMessage) AS message_row, MIN(rank) AS best
                    FROM message_search WHERE message_search MATCH ? GROUP BY message_row
                ) hit JOIN message m ON m.rowid = hit.message_row
                """
            var arguments: StatementArguments = [match]
            if let conversation = search.conversation {
                sql += " WHERE m.conversation_id = ?"
                arguments += [StoreCoding.blob(conversation)]
            }
            sql += " ORDER BY hit.best, m.pos_physical DESC, m.pos_logical DESC, m.rowid DESC LIMIT ? OFFSET ?"
            arguments += [search.limit, search.offset]
            return try Row.fetchAll(db, sql: sql, arguments: arguments).map { try StoreReader.message(db, row: $0) }
        }
    }
}
