import Foundation
import LaminaModel

extension StorageTransaction {
    /// Records that `blocker` blocks `blocked`; false when it did already.
    @discardableResult
    package func block(_ blocked: UserID, by blocker: UserID, at time: Timestamp) throws(StorageError) -> Bool {
        try db.run(
            "INSERT INTO blocks (blocker, blocked, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            [blocker.rawValue, blocked.rawValue, time.millisecondsSince1970])
        guard db.changesCount == 1 else { return false }
        try recountUnread(of: blocker, sharingWith: blocked)
        return true
    }

    /// Removes `blocked` from `blocker`'s block list; false when it was not on it.
    @discardableResult
    package func unblock(_ blocked: UserID, by blocker: UserID) throws(StorageError) -> Bool {
        try db.run("DELETE FROM blocks WHERE blocker = ? AND blocked = ?", [blocker.rawValue, blocked.rawValue])
        guard db.changesCount == 1 else { return false }
        try recountUnread(of: blocker, sharingWith: blocked)
        return true
    }

    /// The blocker's unread counts of the conversations where the other user sent messages.
    private func recountUnread(of blocker: UserID, sharingWith other: UserID) throws(StorageError) {
        for row in try db.rows(
            """
            SELECT p.conversation_id AS id FROM participants p
            WHERE p.user_id = ? AND EXISTS (SELECT 1 FROM message_counts c WHERE c.conversation_id = p.conversation_id AND c.sender = ?)
            """,
            [blocker.rawValue, other.rawValue]
        ) {
            let id: Data? = row["id"]
            try recountUnread(of: blocker, in: ConversationID(uuid: try Columns.uuid(id, column: "id")))
        }
    }
}

extension StorageReader {
    /// The users `blocker` blocks, in user id order.
    package func blocks(of blocker: UserID) throws(StorageError) -> [UserID] {
        try db.rows("SELECT blocked FROM blocks WHERE blocker = ? ORDER BY blocked", [blocker.rawValue]).map {
            row throws(StorageError) in
            try Columns.user(row, 0)
        }
    }

    /// Every block list (loaded once when the engine starts, then kept in step by it).
    package func allBlocks() throws(StorageError) -> [UserID: Set<UserID>] {
        var out: [UserID: Set<UserID>] = [:]
        for row in try db.rows("SELECT blocker, blocked FROM blocks") {
            out[try Columns.user(row, 0), default: []].insert(try Columns.user(row, 1))
        }
        return out
    }
}
