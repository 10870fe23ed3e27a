import Foundation
import LaminaModel

/// A search of the messages a user can see on the node (`StorageReader.searchMessages`).
package struct NodeMessageSearch: Hashable, Sendable {
    package var terms: MessageSearchTerms
    /// Only this conversation's messages (nil: every conversation the user takes or took part in).
    package var conversation: ConversationID?
    /// Results per page (1 to `MessageSearchTerms.maxLimit`).
    package var limit: Int
    /// Results skipped (the number already shown); offset + limit ≤ `MessageSearchTerms.maxDepth`.
    package var offset: Int

    package init(_ terms: MessageSearchTerms, in conversation: ConversationID? = nil, limit: Int = 50, offset: Int = 0)
    {
        self.terms = terms
        self.conversation = conversation
        self.limit = limit
        self.offset = offset
    }
}

extension StorageTransaction {
    /// The message just inserted by `appendMessage` on SQLite (its row is the connection's
    /// last insert) waits for the index's next batch (`SearchBacklog`); on PostgreSQL the
    /// insert itself fills the column.
    func indexInsertedMessage(text: String?, in conversation: ConversationID) throws(StorageError) {
        guard let sqlite = db as? SQLiteSession, let text else { return }
        try deferIndexing(of: sqlite.db.lastInsertedRowID, text: text, in: conversation)
    }

    /// Replaces the indexed text of a message whose parts were replaced (removes it for a
    /// message deleted for everyone, which stays out of the index).
    func reindexMessage(_ id: MessageID, parts: [MessagePart], deleted: Bool) throws(StorageError) {
        let key = Columns.blob(id.uuid)
        let text = deleted ? nil : MessageSearchSchema.indexedText(of: parts)
        switch db.dialect {
        case .sqlite:
            try db.run("DELETE FROM message_search WHERE rowid = (SELECT rowid FROM messages WHERE id = ?)", [key])
            // A message after the mark is not in the index yet: its batch reads the new parts.
            if let text {
                try db.run(
                    """
                    INSERT INTO message_search (rowid, body, conversation)
                        SELECT rowid, ?, \(MessageSearchSchema.conversationToken("conversation_id")) FROM messages
                        WHERE id = ? AND rowid <= ?
                    """, [text, key, try searchIndexedThrough()])
            }
        case .postgres:
            try db.run(
                "UPDATE messages SET search = to_tsvector('\(MessageSearchSchema.postgresConfiguration)', CAST(? AS TEXT)) WHERE id = ?",
                [text, key])
        }
    }

    /// Removes a message deleted for everyone from the index.
    func unindexMessage(_ id: MessageID) throws(StorageError) {
        let key = Columns.blob(id.uuid)
        switch db.dialect {
        case .sqlite:
            try db.run("DELETE FROM message_search WHERE rowid = (SELECT rowid FROM messages WHERE id = ?)", [key])
        case .postgres:
            try db.run("UPDATE messages SET search = NULL WHERE id = ? AND search IS NOT NULL", [key])
        }
    }

    /// Gives the messages of `conversation`, about to move into `survivor` (a distinct merge),
    /// the survivor's token in the SQLite index (run before they move); PostgreSQL's index
    /// holds no conversation.
    func retokenizeMessages(of conversation: ConversationID, into survivor: ConversationID) throws(StorageError) {
        guard db.dialect == .sqlite else { return }
        try db.run(
            """
            UPDATE message_search SET conversation = \(MessageSearchSchema.conversationToken("?"))
            WHERE rowid IN (SELECT rowid FROM messages WHERE conversation_id = ?)
            """, [Columns.blob(survivor.uuid), Columns.blob(conversation.uuid)])
    }

    /// Removes from the index the conversation's messages positioned before `position` (run
    /// before they are marked deleted: the same range as `deleteMessages(of:before:)`).
    func unindexMessages(of conversation: ConversationID, before position: MessagePosition) throws(StorageError) {
        let (p, l, n) = try Columns.hlc(position)
        let arguments: SQLArguments = [Columns.blob(conversation.uuid), p, l, n]
        switch db.dialect {
        case .sqlite:
            try db.run(
                """
                DELETE FROM message_search WHERE rowid IN (SELECT rowid FROM messages
                    WHERE conversation_id = ? AND deleted = 0 AND (pos_physical, pos_logical, pos_node) < (?, ?, ?))
                """, arguments)
        case .postgres:
            try db.run(
                """
                UPDATE messages SET search = NULL
                WHERE conversation_id = ? AND search IS NOT NULL AND (pos_physical, pos_logical, pos_node) < (?, ?, ?)
                """, arguments)
        }
    }
}

extension StorageReader {
    /// The messages matching `search` that `user` sees, exactly as `history()` shows them:
    /// conversations the user takes part in, or took part in up to their removal (then only
    /// messages positioned before it); not deleted for everyone; not from senders the user
    /// blocks now. Best match first (SQLite: `MessageSearchRank`, BM25 without the words'
    /// node-wide rarity; PostgreSQL: `ts_rank`), then newer first, then by id. Statuses are as
    /// the user sees them.
    ///
    /// On SQLite the index is read only in the user's conversations (their tokens, see
    /// `MessageSearchSchema`) when they are at most `narrowingAtMost`; beyond, every match on
    /// the node is read and joined (the joins keep the same messages either way).
    package func searchMessages(
        _ search: NodeMessageSearch, for user: UserID,
        narrowingAtMost: Int = MessageSearchSchema.narrowedConversationsLimit
    ) throws(StorageError) -> [Message] {
        do { try MessageSearchTerms.validatePage(limit: search.limit, offset: search.offset) } catch {
            throw error.storageError
        }
        let columns = MessageStatuses.columns("m")
        var sql: String
        var arguments: SQLArguments
        switch db.dialect {
        case .sqlite:
            guard let match = try searchMatch(search, for: user, narrowingAtMost: narrowingAtMost) else { return [] }
            sql = """
                SELECT \(columns) FROM message_search s
                JOIN messages m ON m.rowid = s.rowid
                JOIN participants p ON p.conversation_id = m.conversation_id AND p.user_id = ?
                WHERE message_search MATCH ?
                """
            arguments = [user.rawValue, match]
        case .postgres:
            sql = """
                SELECT \(columns) FROM messages m
                JOIN participants p ON p.conversation_id = m.conversation_id AND p.user_id = ?
                CROSS JOIN to_tsquery('\(MessageSearchSchema.postgresConfiguration)', CAST(? AS TEXT)) q
                WHERE m.search @@ q
                """
            arguments = [user.rawValue, search.terms.tsqueryExpression]
        }
        sql += """
             AND m.deleted = 0
             AND (p.is_member = 1 OR (m.pos_physical, m.pos_logical, m.pos_node) < (p.hlc_physical, p.hlc_logical, p.hlc_node))
             AND m.sender NOT IN (SELECT blocked FROM blocks WHERE blocker = ?)
            """
        arguments.values.append(.text(user.rawValue))
        if let conversation = search.conversation {
            sql += " AND m.conversation_id = ?"
            arguments.values.append(.blob(Columns.blob(conversation.uuid)))
        }
        let rank = db.dialect == .sqlite ? "\(MessageSearchRank.name)(message_search)" : "ts_rank(m.search, q) DESC"
        sql += " ORDER BY \(rank), m.pos_physical DESC, m.pos_logical DESC, m.pos_node DESC, m.id LIMIT ? OFFSET ?"
        arguments.values.append(.integer(Int64(search.limit)))
        arguments.values.append(.integer(Int64(search.offset)))
        var statuses = MessageStatuses(reader: self, viewer: user)
        return try db.rows(sql, arguments).map { (row) throws(StorageError) in
            try statuses.storedMessage(row).message
        }
    }

    /// The FTS5 query of a search on SQLite: the words in `body`, within the tokens of the
    /// conversations the user takes or took part in (of `search.conversation` only, when it
    /// names one) when they are at most `narrowingAtMost`. Nil: the user has none.
    private func searchMatch(_ search: NodeMessageSearch, for user: UserID, narrowingAtMost: Int)
        throws(StorageError) -> String?
    {
        var sql = "SELECT DISTINCT \(MessageSearchSchema.conversationToken("conversation_id")) FROM participants"
        sql += " WHERE user_id = ?"
        var arguments: SQLArguments = [user.rawValue]
        if let conversation = search.conversation {
            sql += " AND conversation_id = ?"
            arguments.values.append(.blob(Columns.blob(conversation.uuid)))
        }
        let tokens: [String] = try db.rows(sql, arguments).map { $0[0] }
        guard !tokens.isEmpty else { return nil }
        let words = "body : (\(search.terms.fts5Expression))"
        guard tokens.count <= narrowingAtMost else { return words }
        return "conversation : (" + tokens.map { "\"\($0)\"" }.joined(separator: " OR ") + ") AND " + words
    }

    /// The bytes the search index takes (for the bench): SQLite, the pages of the FTS5 tables;
    /// PostgreSQL, the `search` column's values plus the GIN index.
    package func searchIndexBytes() throws(StorageError) -> Int {
        switch db.dialect {
        case .sqlite:
            return Int(
                try db.int64("SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name LIKE 'message_search%'") ?? 0)
        case .postgres:
            let column =
                try db.int64("SELECT CAST(COALESCE(SUM(pg_column_size(search)), 0) AS BIGINT) FROM messages") ?? 0
            let index = try db.int64("SELECT CAST(pg_relation_size('messages_search') AS BIGINT)") ?? 0
            return Int(column + index)
        }
    }
}
