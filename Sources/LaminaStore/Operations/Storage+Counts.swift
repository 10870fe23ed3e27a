import Foundation
import LaminaMerge
import LaminaModel

/// A conversation's counts for one user, as `conversation-updated` carries them (SPEC §6.4).
package struct ConversationCounts: Hashable, Sendable {
    /// Messages the user may see (all while a member; before their removal after it), not
    /// deleted for everyone, not sent by someone the user blocks.
    package var messages: Int
    /// Of those, the ones `UnreadCounts.isUnread` counts as unread for the user.
    package var unread: Int
    /// The latest of those by position.
    package var lastMessage: MessageID?

    package init(messages: Int, unread: Int, lastMessage: MessageID?) {
        self.messages = messages
        self.unread = unread
        self.lastMessage = lastMessage
    }
}

extension StorageReader {
    /// The user's counts of a conversation (SPEC §6.4), with the messages of `blocked` senders
    /// left out (the user's block list as stored). From the stored counters (`StoredCounts`):
    /// the total is a sum over the conversation's senders, the unread count one row; the last
    /// message is the newest of the position index that counts. After a removal the total
    /// leaves out the messages from the cutoff on (a range that grows only with what was sent
    /// since). Zero counts when the user never took part.
    package func counts(of conversation: ConversationID, for user: UserID, blocked: Set<UserID> = [])
        throws(StorageError) -> ConversationCounts
    {
        guard let state = try participantState(of: user, in: conversation) else {
            return ConversationCounts(messages: 0, unread: 0, lastMessage: nil)
        }
        var filter = "m.conversation_id = ? AND m.deleted = 0"
        var arguments: StatementArguments = [Columns.blob(conversation.uuid)]
        if !blocked.isEmpty {
            filter += " AND m.sender NOT IN (\(Array(repeating: "?", count: blocked.count).joined(separator: ", ")))"
            for b in blocked.sorted() { arguments += [b.rawValue] }
        }
        var total = try storedMessageCount(of: conversation, leavingOut: blocked)
        var lastFilter = filter
        var lastArguments = arguments
        if !state.isMember {
            let (p, l, n) = try Columns.hlc(state.since)
            total -= Int(
                try db.int64(
                    "SELECT count(*) FROM messages m WHERE \(filter) AND (m.pos_physical, m.pos_logical, m.pos_node) >= (?, ?, ?)",
                    arguments + [p, l, n]) ?? 0)
            lastFilter += " AND (m.pos_physical, m.pos_logical, m.pos_node) < (?, ?, ?)"
            lastArguments += [p, l, n]
        }
        var last: MessageID?
        if let row = try db.row(
            "SELECT m.id FROM messages m WHERE \(lastFilter) ORDER BY m.pos_physical DESC, m.pos_logical DESC, m.pos_node DESC LIMIT 1",
            lastArguments)
        {
            let id: Data? = row["id"]
            last = MessageID(uuid: try Columns.uuid(id, column: "id"))
        }
        return ConversationCounts(
            messages: total, unread: try storedUnread(of: user, in: conversation), lastMessage: last)
    }

    /// `counts(of:for:blocked:)` by reading the messages (the total and the messages after the
    /// read marker, each decided by `UnreadCounts.isUnread`): what the stored counters are
    /// checked against in tests. Three index range reads that grow with the conversation.
    func countsByScan(of conversation: ConversationID, for user: UserID, blocked: Set<UserID> = []) throws(StorageError)
        -> ConversationCounts
    {
        guard let state = try participantState(of: user, in: conversation) else {
            return ConversationCounts(messages: 0, unread: 0, lastMessage: nil)
        }
        let cutoff = state.isMember ? nil : state.since
        var filter = "m.conversation_id = ? AND m.deleted = 0"
        var arguments: StatementArguments = [Columns.blob(conversation.uuid)]
        if let cutoff {
            filter += " AND (m.pos_physical, m.pos_logical, m.pos_node) < (?, ?, ?)"
            let (p, l, n) = try Columns.hlc(cutoff)
            arguments += [p, l, n]
        }
        if !blocked.isEmpty {
            filter += " AND m.sender NOT IN (\(Array(repeating: "?", count: blocked.count).joined(separator: ", ")))"
            for b in blocked.sorted() { arguments += [b.rawValue] }
        }
        let total = Int(try db.int64("SELECT count(*) FROM messages m WHERE \(filter)", arguments) ?? 0)
        var last: MessageID?
        if let row = try db.row(
            "SELECT m.id FROM messages m WHERE \(filter) ORDER BY m.pos_physical DESC, m.pos_logical DESC, m.pos_node DESC LIMIT 1",
            arguments)
        {
            let id: Data? = row["id"]
            last = MessageID(uuid: try Columns.uuid(id, column: "id"))
        }
        // Only messages after the read marker can be unread (LaminaMerge's rule decides each).
        let readUpTo = try readUpTo(conversation: conversation, user: user)
        var unreadFilter = filter
        var unreadArguments = arguments
        if let readUpTo {
            unreadFilter += " AND (m.pos_physical, m.pos_logical, m.pos_node) > (?, ?, ?)"
            let (p, l, n) = try Columns.hlc(readUpTo)
            unreadArguments += [p, l, n]
        }
        var unreadQuery: StatementArguments = [user.rawValue]
        unreadQuery += unreadArguments
        unreadQuery += [user.rawValue]
        // The messages after the marker differ, for the rule, only in the status recorded for the
        // user: SQLite counts them per recorded status (one pass in C, no row reaches Swift), and
        // LaminaMerge decides each group on one real message of it (the newest).
        var unread = 0
        let anyID = MessageID(uuid: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        let source = """
            FROM messages m LEFT JOIN recipient_status s ON s.message_id = m.id AND s.user_id = ?
            WHERE \(unreadFilter) AND m.sender <> ?
            """
        let newestOfEachStatus: String
        switch db.dialect {
        case .sqlite:
            // SQLite takes the bare columns from the row that holds the max().
            newestOfEachStatus = """
                SELECT s.status AS status, count(*) AS n, max(m.pos_physical) AS pos_physical, m.pos_logical AS pos_logical,
                       m.pos_node AS pos_node, m.sender AS sender \(source) GROUP BY s.status
                """
        case .postgres:
            newestOfEachStatus = """
                SELECT DISTINCT ON (s.status) s.status AS status, count(*) OVER (PARTITION BY s.status) AS n,
                       m.pos_physical AS pos_physical, m.pos_logical AS pos_logical, m.pos_node AS pos_node, m.sender AS sender
                \(source) ORDER BY s.status, m.pos_physical DESC, m.pos_logical DESC, m.pos_node DESC
                """
        }
        for row in try db.rows(newestOfEachStatus, unreadQuery) {
            let raw: Int64? = row["status"]
            let n: Int64 = row["n"]
            let stamp = MessageStamp(
                id: anyID, conversation: conversation, sender: try Columns.user(row, "sender"),
                position: try Columns.hlc(row, "pos"))
            if UnreadCounts.isUnread(
                stamp, for: user, deleted: false, visible: true,
                recorded: raw.flatMap { RecipientStatus(rawValue: Int8(clamping: $0)) }, readUpTo: readUpTo
            ) {
                unread += Int(n)
            }
        }
        return ConversationCounts(messages: total, unread: unread, lastMessage: last)
    }
}
