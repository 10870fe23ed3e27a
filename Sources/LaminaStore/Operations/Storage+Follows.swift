import Foundation
import LaminaModel

extension StorageTransaction {
    /// Records that `follower` follows `followed` (SPEC §6.7); false when they did already.
    @discardableResult
    package func follow(_ followed: UserID, by follower: UserID, at time: Timestamp) throws(StorageError) -> Bool {
        try db.run(
            "INSERT INTO follows (follower, followed, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            [follower.rawValue, followed.rawValue, time.millisecondsSince1970])
        return db.changesCount == 1
    }

    /// Removes `followed` from whom `follower` follows; false when they did not.
    @discardableResult
    package func unfollow(_ followed: UserID, by follower: UserID) throws(StorageError) -> Bool {
        try db.run("DELETE FROM follows WHERE follower = ? AND followed = ?", [follower.rawValue, followed.rawValue])
        return db.changesCount == 1
    }
}

extension StorageReader {
    /// The users `follower` follows explicitly, in user id order.
    package func followees(of follower: UserID) throws(StorageError) -> [UserID] {
        try db.rows("SELECT followed FROM follows WHERE follower = ? ORDER BY followed", [follower.rawValue]).map {
            row throws(StorageError) in
            try Columns.user(row, 0)
        }
    }

    /// The users who follow `followed` explicitly, in user id order.
    package func followers(of followed: UserID) throws(StorageError) -> [UserID] {
        try db.rows("SELECT follower FROM follows WHERE followed = ? ORDER BY follower", [followed.rawValue]).map {
            row throws(StorageError) in
            try Columns.user(row, 0)
        }
    }

    /// How many users `follower` follows explicitly.
    package func followeeCount(of follower: UserID) throws(StorageError) -> Int {
        Int(try db.int64("SELECT count(*) FROM follows WHERE follower = ?", [follower.rawValue]) ?? 0)
    }
}
