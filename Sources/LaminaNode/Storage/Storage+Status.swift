import Foundation
import GRDB
import LaminaModel

/// A recipient status that moved up.
public struct StatusChange: Hashable, Sendable {
    public var user: UserID
    /// The status before; nil when none was recorded.
    public var before: RecipientStatus?
    public var after: RecipientStatus
}

extension StorageTransaction {
    /// Records a user's status for a message, keeping the maximum: a status never moves down.
    /// Returns the change, or nil when the stored status was already at least `status`.
    @discardableResult
    public func recordStatus(_ status: RecipientStatus, of message: MessageID, for user: UserID) throws(StorageError) -> StatusChange? {
        let id = Columns.blob(message.uuid)
        let current = try db.int64("SELECT status FROM recipient_status WHERE message_id = ? AND user_id = ?", [id, user.rawValue])
        let before = try current.map { (raw) throws(StorageError) -> RecipientStatus in
            guard let s = RecipientStatus(rawValue: Int8(clamping: raw)) else { throw StorageError(.corrupt, "status \(raw) of \(message)") }
            return s
        }
        if let before, before >= status { return nil }
        guard try db.int64("SELECT 1 FROM messages WHERE id = ?", [id]) != nil else {
            throw StorageError(.notFound, "no message \(message)")
        }
        try db.run(
            """
            INSERT INTO recipient_status (message_id, user_id, status) VALUES (?, ?, ?)
            ON CONFLICT (message_id, user_id) DO UPDATE SET status = max(status, excluded.status)
            """,
            [id, user.rawValue, Int64(status.rawValue)]
        )
        return StatusChange(user: user, before: before, after: status)
    }

    /// Moves the user's read marker of a conversation up to `position` (inclusive); it never
    /// moves back. Returns whether it moved.
    @discardableResult
    public func setReadUpTo(_ position: MessagePosition, user: UserID, conversation: ConversationID) throws(StorageError) -> Bool {
        let (p, l, n) = try Columns.hlc(position)
        try db.run(
            """
            INSERT INTO read_markers (conversation_id, user_id, pos_physical, pos_logical, pos_node) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (conversation_id, user_id) DO UPDATE SET
                pos_physical = excluded.pos_physical, pos_logical = excluded.pos_logical, pos_node = excluded.pos_node
            WHERE (excluded.pos_physical, excluded.pos_logical, excluded.pos_node)
                > (read_markers.pos_physical, read_markers.pos_logical, read_markers.pos_node)
            """,
            [Columns.blob(conversation.uuid), user.rawValue, p, l, n]
        )
        return db.changesCount == 1
    }

    /// Marks every message of others up to `position` read for `user`: moves the read marker
    /// and raises those messages' status to `.read`. Returns the messages whose status rose.
    public func markRead(upTo position: MessagePosition, user: UserID, conversation: ConversationID) throws(StorageError) -> [MessageID] {
        let (p, l, n) = try Columns.hlc(position)
        _ = try setReadUpTo(position, user: user, conversation: conversation)
        let rows = try db.rows(
            """
            SELECT m.id FROM messages m
            LEFT JOIN recipient_status s ON s.message_id = m.id AND s.user_id = ?
            WHERE m.conversation_id = ? AND m.sender <> ? AND m.deleted = 0
              AND (m.pos_physical, m.pos_logical, m.pos_node) <= (?, ?, ?)
              AND (s.status IS NULL OR s.status < ?)
            ORDER BY m.pos_physical, m.pos_logical, m.pos_node
            """,
            [user.rawValue, Columns.blob(conversation.uuid), user.rawValue, p, l, n, Int64(RecipientStatus.read.rawValue)]
        )
        var raised: [MessageID] = []
        for row in rows {
            let data: Data? = row["id"]
            let id = MessageID(uuid: try Columns.uuid(data, column: "id"))
            if try recordStatus(.read, of: id, for: user) != nil { raised.append(id) }
        }
        return raised
    }
}

extension StorageReader {
    /// Every recorded status of a message.
    public func recipientStatus(of message: MessageID) throws(StorageError) -> [UserID: RecipientStatus] {
        var out: [UserID: RecipientStatus] = [:]
        for row in try db.rows("SELECT user_id, status FROM recipient_status WHERE message_id = ?", [Columns.blob(message.uuid)]) {
            let raw: Int64 = row["status"]
            guard let status = RecipientStatus(rawValue: Int8(clamping: raw)) else { throw StorageError(.corrupt, "status \(raw) of \(message)") }
            out[try Columns.user(row, "user_id")] = status
        }
        return out
    }

    /// The user's read marker in a conversation, if any.
    public func readUpTo(conversation: ConversationID, user: UserID) throws(StorageError) -> MessagePosition? {
        guard let row = try db.row(
            "SELECT pos_physical, pos_logical, pos_node FROM read_markers WHERE conversation_id = ? AND user_id = ?",
            [Columns.blob(conversation.uuid), user.rawValue]
        ) else { return nil }
        return try Columns.hlc(row, "pos")
    }
}
