import Foundation
import LaminaMerge
import LaminaModel

// Replies and threads (SPEC §6.2, replies feature): the `thread_replies` index (`ThreadSchema`)
// and what is read from it: a thread's replies a page at a time, and each root's summary by
// LaminaMerge's `ThreadSummary` rule.

extension StorageTransaction {
    /// Indexes reply `message` under its thread's `root`, at its position (a replay of the same
    /// reply writes nothing).
    func indexReply(_ message: MessageID, to root: MessageID, at position: (Int64, Int64, Int64)) throws(StorageError) {
        try db.run(
            """
            INSERT INTO thread_replies (root_id, pos_physical, pos_logical, pos_node, message_id) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT DO NOTHING
            """,
            [
                Columns.blob(root.uuid), position.0, position.1, position.2, Columns.blob(message.uuid),
            ])
    }
}

extension StorageReader {
    /// The summary `root` shows: `ThreadSummary` over the thread's replies and those deleted for
    /// everyone (one range read of the root's replies); nil when it has none left.
    package func threadSummary(of root: MessageID) throws(StorageError) -> MessageThread? {
        var summary = ThreadSummary()
        let rows = try db.rows(
            """
            SELECT r.message_id, r.pos_physical, r.pos_logical, r.pos_node, m.deleted
            FROM thread_replies r JOIN messages m ON m.id = r.message_id
            WHERE r.root_id = ?
            """,
            [Columns.blob(root.uuid)])
        for row in rows {
            guard let id = row.uuid(0) else { throw StorageError(.corrupt, "a thread reply id is not 16 bytes") }
            let reply = MessageID(uuid: id)
            summary.apply(.replied(reply, at: try Columns.hlc(row, from: 1)))
            if row.int64(4) != 0 { summary.apply(.deleted(reply)) }
        }
        guard let last = summary.lastReply else { return nil }
        return MessageThread(replyCount: UInt64(summary.replyCount), lastReply: last.id, lastReplyAt: last.at)
    }

    /// `messages` with each thread root's summary (`Message.thread`); replies and messages
    /// without replies unchanged. One index probe for the page, then one range read per root.
    package func withThreadSummaries(_ messages: [Message]) throws(StorageError) -> [Message] {
        let candidates = messages.filter { $0.replyTo == nil }
        guard !candidates.isEmpty else { return messages }
        var roots = Set<MessageID>()
        for chunk in stride(from: 0, to: candidates.count, by: 256) {
            let slice = candidates[chunk..<min(chunk + 256, candidates.count)]
            let marks = Array(repeating: "?", count: slice.count).joined(separator: ", ")
            let rows = try db.rows(
                "SELECT DISTINCT root_id FROM thread_replies WHERE root_id IN (\(marks))",
                SQLArguments(slice.map { Columns.blob($0.id.uuid) }))
            for row in rows { if let id = row.uuid(0) { roots.insert(MessageID(uuid: id)) } }
        }
        guard !roots.isEmpty else { return messages }
        var out = messages
        for index in out.indices where roots.contains(out[index].id) {
            out[index].thread = try threadSummary(of: out[index].id)
        }
        return out
    }

    /// A page of one thread as `user` may see it: the replies to `root` in `conversation` after
    /// `after` (from the first when nil), at most `limit`, by the visibility rules of
    /// ``history(of:for:_:hidingBlocked:)`` (deleted replies, a removed participant's cutoff,
    /// blocked senders). One range read of the thread's index. Throws `.notAParticipant` if the
    /// user never took part.
    package func threadHistory(
        root: MessageID, in conversation: ConversationID, for user: UserID, after: MessagePosition?, limit: Int,
        hidingBlocked: Bool = true
    ) throws(StorageError) -> [Message] {
        guard let state = try participantState(of: user, in: conversation) else {
            throw StorageError(.notAParticipant, "\(user) never took part in \(conversation)")
        }
        var sql = """
            SELECT \(MessageStatuses.columns("m")) FROM thread_replies r JOIN messages m ON m.id = r.message_id
            WHERE r.root_id = ? AND m.conversation_id = ? AND m.deleted = 0
            """
        var arguments: SQLArguments = [Columns.blob(root.uuid), Columns.blob(conversation.uuid)]
        if hidingBlocked {
            sql += " AND m.sender NOT IN (SELECT blocked FROM blocks WHERE blocker = ?)"
            arguments += [user.rawValue]
        }
        if !state.isMember {
            sql += " AND (r.pos_physical, r.pos_logical, r.pos_node) < (?, ?, ?)"
            let (p, l, n) = try Columns.hlc(state.since)
            arguments += [p, l, n]
        }
        if let after {
            sql += " AND (r.pos_physical, r.pos_logical, r.pos_node) > (?, ?, ?)"
            let (p, l, n) = try Columns.hlc(after)
            arguments += [p, l, n]
        }
        try checkLimit(limit)
        sql += " ORDER BY r.pos_physical, r.pos_logical, r.pos_node LIMIT ?"
        arguments += [limit]
        var statuses = MessageStatuses(reader: self, viewer: user)
        return try db.rows(sql, arguments).map { (row) throws(StorageError) in try statuses.storedMessage(row).message }
    }
}

extension StorageReader {
    /// When each of `ids` was last edited (its parts replaced: the reading of the update that
    /// holds its order, the latest, `MessagePartsMap`); messages never edited are absent.
    package func editTimes(of ids: [MessageID]) throws(StorageError) -> [MessageID: HLCTimestamp] {
        var out: [MessageID: HLCTimestamp] = [:]
        for chunk in stride(from: 0, to: ids.count, by: 256) {
            let slice = ids[chunk..<min(chunk + 256, ids.count)]
            let marks = Array(repeating: "?", count: slice.count).joined(separator: ", ")
            let rows = try db.rows(
                "SELECT message_id, hlc_physical, hlc_logical, hlc_node FROM message_part_updates WHERE message_id IN (\(marks))",
                SQLArguments(slice.map { Columns.blob($0.uuid) }))
            for row in rows {
                guard let id = row.uuid(0) else { continue }
                out[MessageID(uuid: id)] = try Columns.hlc(row, from: 1)
            }
        }
        return out
    }
}
