import Foundation
import LaminaModel

/// The stored counters behind `counts(of:for:)` (issue 16): per conversation and sender the
/// messages not deleted for everyone (`message_counts`), and per participant the messages
/// unread for them (`participants.unread`). Both are kept in the transaction of the change
/// that moves them, so reading a conversation's counts reads no message range that grows with
/// the conversation. The unread rule is `UnreadCounts.isUnread` in SQL (`unreadRule`); the
/// migration `v13-counters` fills both from the messages.
enum StoredCounts {
    /// Whether message `m` is unread for participant row `p` (both aliases in scope):
    /// `UnreadCounts.isUnread` with the recorded status and the read marker as the store keeps
    /// them, the user's block list, and the participant's visibility cutoff.
    static let unreadRule =
        "m.deleted = 0 AND "
        + unreadRule(
            id: "m.id", conversation: "m.conversation_id", sender: "m.sender",
            position: "(m.pos_physical, m.pos_logical, m.pos_node)")

    /// The unread rule for participant row `p` and a message not deleted whose columns are the
    /// SQL expressions given (a message's row, or the values of one being stored).
    private static func unreadRule(id: String, conversation: String, sender: String, position: String) -> String {
        """
        \(sender) <> p.user_id
        AND (p.is_member = 1 OR \(position) < (p.hlc_physical, p.hlc_logical, p.hlc_node))
        AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.blocker = p.user_id AND b.blocked = \(sender))
        AND NOT EXISTS (SELECT 1 FROM read_markers r WHERE r.conversation_id = \(conversation) AND r.user_id = p.user_id
                        AND (r.pos_physical, r.pos_logical, r.pos_node) >= \(position))
        AND NOT EXISTS (SELECT 1 FROM recipient_status s WHERE s.message_id = \(id) AND s.user_id = p.user_id AND s.status >= 3)
        """
    }

    /// One more unread message for each participant of conversation `?1` that message `?3`
    /// from `?2` at position (`?4`, `?5`, `?6`), just stored, is unread for: the rule over the
    /// message's values, so no read of its row and each participant row visited once.
    static let unreadAppended = """
        UPDATE participants AS p SET unread = unread + 1 WHERE p.conversation_id = ?1 AND \(
            unreadRule(id: "?3", conversation: "?1", sender: "?2", position: "(?4, ?5, ?6)"))
        """

    /// `countSender` and `unreadAppended` for many stored messages at once (PostgreSQL's
    /// set-oriented group commit, `PostgresWriteBatch`): `$1`…`$6` are arrays of their
    /// conversations, senders, ids and positions. Each sender's count moves by its messages,
    /// each participant's unread count by the messages the rule counts for them (one update
    /// per row, so two messages of one group to one participant both count). The new rows are
    /// `a`, never `r`, `b`, `s` or `m`: the unread rule's subqueries use those aliases, and an
    /// outer `r` would be shadowed by `read_markers r` inside them.
    static let appendedBatchPostgres = """
        WITH appended AS (
            SELECT conversation_id, CAST(sender AS TEXT) COLLATE "C" AS sender, id, pos_physical, pos_logical, pos_node
            FROM unnest($1::bytea[], $2::text[], $3::bytea[], $4::bigint[], $5::bigint[], $6::bigint[])
                AS u(conversation_id, sender, id, pos_physical, pos_logical, pos_node)),
        counted AS (
            INSERT INTO message_counts (conversation_id, sender, messages)
            SELECT a.conversation_id, a.sender, count(*) FROM appended a GROUP BY a.conversation_id, a.sender
            ORDER BY a.conversation_id, a.sender
            ON CONFLICT (conversation_id, sender) DO UPDATE SET messages = message_counts.messages + EXCLUDED.messages),
        unread AS (
            SELECT p.conversation_id, p.user_id, count(*) AS n FROM appended a JOIN participants p ON p.conversation_id = a.conversation_id
            WHERE \(unreadRule(
                id: "a.id", conversation: "a.conversation_id", sender: "a.sender",
                position: "(a.pos_physical, a.pos_logical, a.pos_node)"))
            GROUP BY p.conversation_id, p.user_id)
        UPDATE participants AS t SET unread = t.unread + unread.n FROM unread
        WHERE t.conversation_id = unread.conversation_id AND t.user_id = unread.user_id
        """

    /// Adds one to the count of sender `?2` in conversation `?1`.
    static let countSender = """
        INSERT INTO message_counts (conversation_id, sender, messages) VALUES (?1, ?2, 1)
        ON CONFLICT (conversation_id, sender) DO UPDATE SET messages = message_counts.messages + 1
        """

    /// Moves the unread count by `?3` of each participant of conversation `?1` for whom
    /// message `?4` is unread now, with `which` narrowing the participants (`?5`).
    fileprivate static func unreadUpdate(which: String) -> String {
        """
        UPDATE participants SET unread = unread + ?3 WHERE conversation_id = ?1 AND user_id IN (
            SELECT p.user_id FROM participants p JOIN messages m ON m.conversation_id = p.conversation_id
            WHERE p.conversation_id = ?1 AND m.id = ?4\(which) AND \(StoredCounts.unreadRule))
        """
    }

    /// Fills the counters from the messages (migration `v13-counters`, both backends).
    static let fill: [String] = [
        "DELETE FROM message_counts",
        """
        INSERT INTO message_counts (conversation_id, sender, messages)
        SELECT conversation_id, sender, count(*) FROM messages WHERE deleted = 0 GROUP BY conversation_id, sender
        """,
        """
        UPDATE participants SET unread = (
            SELECT count(*) FROM participants p JOIN messages m ON m.conversation_id = p.conversation_id
            WHERE p.conversation_id = participants.conversation_id AND p.user_id = participants.user_id AND \(unreadRule))
        """,
    ]
}

extension StorageTransaction {
    /// A message was stored at `position`: its sender's count and, before any status of it is
    /// recorded, the unread count of every participant it is unread for (one prepared
    /// statement each; on PostgreSQL one for both, a round trip less: the unread rule reads
    /// neither count).
    func countAppended(
        _ message: MessageID, sender: UserID, in conversation: ConversationID,
        at position: (Int64, Int64, Int64)
    ) throws(StorageError) {
        let statements = try statements
        if let count = statements.countSender {
            count.bind(1, conversation.uuid)
            count.bind(2, sender.rawValue)
            try count.execute()
        }
        let unread = statements.countAppended
        unread.bind(1, conversation.uuid)
        unread.bind(2, sender.rawValue)
        unread.bind(3, message.uuid)
        unread.bind(4, position.0)
        unread.bind(5, position.1)
        unread.bind(6, position.2)
        try unread.execute()
    }

    /// A message is about to be deleted for everyone (it is not yet): the counts it held.
    func countDeleting(_ message: MessageID, sender: UserID, in conversation: ConversationID) throws(StorageError) {
        try db.run(
            "UPDATE message_counts SET messages = messages - 1 WHERE conversation_id = ? AND sender = ?",
            [Columns.blob(conversation.uuid), sender.rawValue])
        try adjustUnread(by: -1, of: message, in: conversation)
    }

    /// `user` is about to record `read` for a message that was not read for them (by the status
    /// rule): one unread less, when the message counts for them at all.
    func countReading(_ message: MessageID, by user: UserID, in conversation: ConversationID) throws(StorageError) {
        try adjustUnread(by: -1, of: message, in: conversation, only: user)
    }

    /// Moves by `delta` the unread count of each participant (or only `user`) for whom the
    /// message is unread now.
    private func adjustUnread(
        by delta: Int, of message: MessageID, in conversation: ConversationID, only user: UserID? = nil
    ) throws(StorageError) {
        let c = Columns.blob(conversation.uuid)
        var arguments: StatementArguments = [c, "", delta, Columns.blob(message.uuid)]
        var which = ""
        if let user {
            which = " AND p.user_id = ?5"
            arguments += [user.rawValue]
        }
        try db.run(StoredCounts.unreadUpdate(which: which), arguments)
    }

    /// Counts `user`'s unread messages of the conversation again: the messages after their
    /// read marker (the only ones that can be unread), so the cost is their unread backlog.
    /// For the rarer changes (a read marker raised, a block, a membership standing that
    /// changed otherwise than by a plain add or removal).
    func recountUnread(of user: UserID, in conversation: ConversationID) throws(StorageError) {
        let unread = try read.storedUnreadByRule(
            of: user, in: conversation, from: try read.readUpTo(conversation: conversation, user: user),
            inclusive: false)
        try db.run(
            "UPDATE participants SET unread = ? WHERE conversation_id = ? AND user_id = ?",
            [unread, Columns.blob(conversation.uuid), user.rawValue])
    }

    /// Counts a whole conversation again (a range deletion, a distinct merge): its senders'
    /// counts and every participant's unread count.
    func recountConversation(_ conversation: ConversationID) throws(StorageError) {
        let c = Columns.blob(conversation.uuid)
        try db.run("DELETE FROM message_counts WHERE conversation_id = ?", [c])
        try db.run(
            """
            INSERT INTO message_counts (conversation_id, sender, messages)
            SELECT conversation_id, sender, count(*) FROM messages WHERE conversation_id = ? AND deleted = 0 GROUP BY conversation_id, sender
            """,
            [c])
        for row in try db.rows("SELECT user_id FROM participants WHERE conversation_id = ?", [c]) {
            try recountUnread(of: try Columns.user(row, "user_id"), in: conversation)
        }
    }

    /// A participant's standing changed from `before` to `after` (rows as they were and are):
    /// their unread count follows by the messages whose visibility changed, a range from the
    /// cutoff to the conversation's end. A user new to the conversation, with no read marker
    /// and so nothing read, starts with every counted message of the others unread: a sum of
    /// `message_counts`, no message read. (A status recorded for a user before they were
    /// ever a participant here would not be seen; the node records none.)
    /// `removedUnread`: for a removal, what `removalUnread` counted before the row changed.
    func countStandingChange(
        of user: UserID, in conversation: ConversationID, from before: ParticipantState?, to after: ParticipantState,
        removedUnread: Int
    ) throws(StorageError) {
        let c = Columns.blob(conversation.uuid)
        switch (before, after.isMember) {
        case (nil, true) where try read.readUpTo(conversation: conversation, user: user) == nil:
            var arguments: StatementArguments = [c, user.rawValue, user.rawValue]
            let total =
                try db.int64(
                    """
                    SELECT CAST(coalesce(sum(messages), 0) AS BIGINT) FROM message_counts WHERE conversation_id = ? AND sender <> ?
                    AND sender NOT IN (SELECT blocked FROM blocks WHERE blocker = ?)
                    """,
                    arguments) ?? 0
            arguments = [total, c, user.rawValue]
            try db.run("UPDATE participants SET unread = ? WHERE conversation_id = ? AND user_id = ?", arguments)
        case (let b?, false) where b.isMember:
            // Removed: the messages from the cutoff on are no longer theirs.
            try db.run(
                "UPDATE participants SET unread = unread - ? WHERE conversation_id = ? AND user_id = ?",
                [removedUnread, c, user.rawValue])
        case (let b?, true) where !b.isMember:
            // Back: the messages from the old cutoff on are theirs again.
            let back = try read.storedUnreadByRule(of: user, in: conversation, from: b.since, inclusive: true)
            try db.run(
                "UPDATE participants SET unread = unread + ? WHERE conversation_id = ? AND user_id = ?",
                [back, c, user.rawValue])
        default:
            try recountUnread(of: user, in: conversation)
        }
    }
}

extension StorageReader {
    /// The messages from `from` on (after it unless `inclusive`; all when nil) that are unread
    /// for `user` by `StoredCounts.unreadRule`, with the participant row as it is now.
    func storedUnreadByRule(of user: UserID, in conversation: ConversationID, from: MessagePosition?, inclusive: Bool)
        throws(StorageError) -> Int
    {
        var arguments: StatementArguments = [Columns.blob(conversation.uuid), user.rawValue]
        var sql = """
            SELECT count(*) FROM participants p JOIN messages m ON m.conversation_id = p.conversation_id
            WHERE p.conversation_id = ? AND p.user_id = ? AND \(StoredCounts.unreadRule)
            """
        if let from {
            sql += " AND (m.pos_physical, m.pos_logical, m.pos_node) \(inclusive ? ">=" : ">") (?, ?, ?)"
            let (p, l, n) = try Columns.hlc(from)
            arguments += [p, l, n]
        }
        return Int(try db.int64(sql, arguments) ?? 0)
    }

    /// The stored unread count of `user` in the conversation (0 when they never took part).
    func storedUnread(of user: UserID, in conversation: ConversationID) throws(StorageError) -> Int {
        Int(
            try db.int64(
                "SELECT unread FROM participants WHERE conversation_id = ? AND user_id = ?",
                [Columns.blob(conversation.uuid), user.rawValue]) ?? 0)
    }

    /// Messages not deleted for everyone, of senders other than `blocked` (one row per sender).
    func storedMessageCount(of conversation: ConversationID, leavingOut blocked: Set<UserID> = []) throws(StorageError)
        -> Int
    {
        var sql = "SELECT CAST(coalesce(sum(messages), 0) AS BIGINT) FROM message_counts WHERE conversation_id = ?"
        var arguments: StatementArguments = [Columns.blob(conversation.uuid)]
        if !blocked.isEmpty {
            sql += " AND sender NOT IN (\(Array(repeating: "?", count: blocked.count).joined(separator: ", ")))"
            for b in blocked.sorted() { arguments += [b.rawValue] }
        }
        return Int(try db.int64(sql, arguments) ?? 0)
    }
}
