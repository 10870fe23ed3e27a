import Foundation
import LaminaModel

/// Suspended users (Layer's `PATCH /users/:id` with `suspended`): one row per suspended user,
/// none once unsuspended. A suspended user cannot log in; the node ends their sessions when
/// it suspends them. Its own table (migration `v16-user-suspensions` in both dialects).
package enum SuspensionSchema {
    package static let migration = "v16-user-suspensions"

    static let sqlite: [String] = [
        """
        CREATE TABLE user_suspensions (
            user_id TEXT PRIMARY KEY NOT NULL,
            suspended_at INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID
        """
    ]

    static let postgres: [String] = [
        """
        CREATE TABLE user_suspensions (
            user_id TEXT COLLATE "C" PRIMARY KEY NOT NULL,
            suspended_at BIGINT NOT NULL
        )
        """
    ]
}

extension StorageTransaction {
    /// Suspends (`true`) or unsuspends `user`; whether that changed anything.
    @discardableResult
    package func setSuspended(_ suspended: Bool, user: UserID, at time: Timestamp) throws(StorageError) -> Bool {
        if suspended {
            try db.run(
                "INSERT INTO user_suspensions (user_id, suspended_at) VALUES (?, ?) ON CONFLICT (user_id) DO NOTHING",
                [user.rawValue, time.millisecondsSince1970])
        } else {
            try db.run("DELETE FROM user_suspensions WHERE user_id = ?", [user.rawValue])
        }
        return db.changesCount == 1
    }
}

extension StorageReader {
    /// Whether `user` is suspended.
    package func isSuspended(_ user: UserID) throws(StorageError) -> Bool {
        try !db.rows("SELECT 1 FROM user_suspensions WHERE user_id = ?", [user.rawValue]).isEmpty
    }
}
