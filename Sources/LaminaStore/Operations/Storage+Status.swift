import Foundation
import LaminaMerge
import LaminaModel

/// A recipient status that moved up.
package struct StatusChange: Hashable, Sendable {
    package var user: UserID
    /// The status before (derived by the status rule).
    package var before: RecipientStatus?
    package var after: RecipientStatus
}

/// The two per (conversation, user) positions statuses are kept as: a delivery receipt
/// moves `delivered`, mark-all-read moves `read`. Each only moves up.
package enum StatusMarker: String, Sendable, CaseIterable {
    case delivered = "delivered_markers"
    case read = "read_markers"

    /// The status every message of others at or before the marker has at least.
    package var status: RecipientStatus { self == .delivered ? .delivered : .read }
}

extension StorageTransaction {
    /// Records a user's status for one message, keeping the maximum: a status never moves
    /// down. The status before is what the status rule derives (the sender's own is read;
    /// the user's delivered and read positions count). Returns the change, or nil when the
    /// status was already at least `status`.
    @discardableResult
    package func recordStatus(_ status: RecipientStatus, of message: MessageID, for user: UserID) throws(StorageError)
        -> StatusChange?
    {
        let id = Columns.blob(message.uuid)
        guard
            let row = try db.row(
                "SELECT conversation_id, sender, pos_physical, pos_logical, pos_node FROM messages WHERE id = ?", [id])
        else {
            throw StorageError(.notFound, "no message \(message)")
        }
        let conversationData: Data? = row["conversation_id"]
        let conversation = ConversationID(uuid: try Columns.uuid(conversationData, column: "conversation_id"))
        let stamp = MessageStamp(
            id: message, conversation: conversation, sender: try Columns.user(row, "sender"),
            position: try Columns.hlc(row, "pos"))
        let before = RecipientStatusLattice.status(
            of: stamp, for: user, recorded: try read.recordedStatuses(of: id)[user],
            deliveredUpTo: try read.marker(.delivered, conversation: conversation, user: user),
            readUpTo: try read.marker(.read, conversation: conversation, user: user)
        )
        if before >= status { return nil }
        if status >= .read { try countReading(message, by: user, in: conversation) }
        try db.run(
            """
            INSERT INTO recipient_status (message_id, user_id, status) VALUES (?, ?, ?)
            ON CONFLICT (message_id, user_id) DO UPDATE SET status = \(db.dialect.greatest("recipient_status.status", "excluded.status"))
            """,
            [id, user.rawValue, Int64(status.rawValue)]
        )
        return StatusChange(user: user, before: before, after: status)
    }

    /// Moves the user's `marker` of a conversation up to `position` (inclusive); it never
    /// moves back. Returns whether it moved.
    @discardableResult
    package func raise(_ marker: StatusMarker, to position: MessagePosition, user: UserID, conversation: ConversationID)
        throws(StorageError) -> Bool
    {
        let (p, l, n) = try Columns.hlc(position)
        let table = marker.rawValue
        let moved = try db.runRaw(
            """
            INSERT INTO \(table) (conversation_id, user_id, pos_physical, pos_logical, pos_node) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (conversation_id, user_id) DO UPDATE SET
                pos_physical = excluded.pos_physical, pos_logical = excluded.pos_logical, pos_node = excluded.pos_node
            WHERE (excluded.pos_physical, excluded.pos_logical, excluded.pos_node)
                > (\(table).pos_physical, \(table).pos_logical, \(table).pos_node)
            """
        ) {
            $0.bind(1, conversation.uuid)
            $0.bind(2, user.rawValue)
            $0.bind(3, p)
            $0.bind(4, l)
            $0.bind(5, n)
        }
        if moved == 1, marker == .read { try recountUnread(of: user, in: conversation) }
        return moved == 1
    }

    /// Moves the user's read marker of a conversation up to `position` (inclusive); it never
    /// moves back. Returns whether it moved.
    @discardableResult
    package func setReadUpTo(_ position: MessagePosition, user: UserID, conversation: ConversationID)
        throws(StorageError) -> Bool
    {
        try raise(.read, to: position, user: user, conversation: conversation)
    }
}

extension StorageReader {
    /// Every status recorded for one message alone (MARK_READ, replicated statuses). Statuses
    /// that follow from positions (sent, delivered and read up to) are derived, not recorded:
    /// the whole status of a message is in `message(_:)` and `history`.
    package func recipientStatus(of message: MessageID) throws(StorageError) -> [UserID: RecipientStatus] {
        guard let stored = try self.message(message) else { return [:] }
        return stored.message.recipientStatus
    }

    /// The statuses recorded for one message alone, by user.
    func recordedStatuses(of message: Data) throws(StorageError) -> [UserID: RecipientStatus] {
        var out: [UserID: RecipientStatus] = [:]
        for row in try db.rows("SELECT user_id, status FROM recipient_status WHERE message_id = ?", [message]) {
            let raw: Int64 = row["status"]
            guard let status = RecipientStatus(rawValue: Int8(clamping: raw)) else {
                throw StorageError(.corrupt, "status \(raw) of a message")
            }
            out[try Columns.user(row, "user_id")] = status
        }
        return out
    }

    /// The user's `marker` in a conversation, if any.
    package func marker(_ marker: StatusMarker, conversation: ConversationID, user: UserID) throws(StorageError)
        -> MessagePosition?
    {
        guard
            let row = try db.row(
                "SELECT pos_physical, pos_logical, pos_node FROM \(marker.rawValue) WHERE conversation_id = ? AND user_id = ?",
                [Columns.blob(conversation.uuid), user.rawValue]
            )
        else { return nil }
        return try Columns.hlc(row, "pos")
    }

    /// The user's read marker in a conversation, if any.
    package func readUpTo(conversation: ConversationID, user: UserID) throws(StorageError) -> MessagePosition? {
        try marker(.read, conversation: conversation, user: user)
    }

    /// Every user's position in a marker table (`StatusMarker.rawValue`) of a conversation.
    func markers(_ table: String, of conversation: ConversationID) throws(StorageError) -> [UserID: MessagePosition] {
        var out: [UserID: MessagePosition] = [:]
        for row in try db.rows(
            "SELECT user_id, pos_physical, pos_logical, pos_node FROM \(table) WHERE conversation_id = ?",
            [Columns.blob(conversation.uuid)])
        {
            out[try Columns.user(row, "user_id")] = try Columns.hlc(row, "pos")
        }
        return out
    }
}
