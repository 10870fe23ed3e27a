import Foundation
import LaminaModel

extension StorageTransaction {
    /// Sets the unread count an app backend keeps for `user` outside the node (0 removes it).
    package func setExternalUnreadCount(_ count: Int, of user: UserID, at time: Timestamp) throws(StorageError) {
        guard count >= 0 else { throw StorageError(.invalidArgument, "an external unread count is not negative") }
        if count == 0 {
            try db.run("DELETE FROM badges WHERE user_id = ?", [user.rawValue])
        } else {
            try db.run(
                "INSERT INTO badges (user_id, external_unread_count, updated_at) VALUES (?, ?, ?) ON CONFLICT (user_id) DO UPDATE SET external_unread_count = excluded.external_unread_count, updated_at = excluded.updated_at",
                [user.rawValue, count, time.millisecondsSince1970])
        }
    }
}

extension StorageReader {
    /// The unread count an app backend set for `user` (0 when none).
    package func externalUnreadCount(of user: UserID) throws(StorageError) -> Int {
        Int(try db.int64("SELECT external_unread_count FROM badges WHERE user_id = ?", [user.rawValue]) ?? 0)
    }
}
