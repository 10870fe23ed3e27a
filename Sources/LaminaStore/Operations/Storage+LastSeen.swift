import Foundation
import LaminaModel

/// When each user was last seen connected and visible (SPEC §6.6 `lastSeenAt`), kept across
/// restarts: the node writes it in batches as users go offline, never per heartbeat or per
/// presence change, and reads it back for users it has not seen since it started.
extension StorageTransaction {
    /// Records the times in `seen` (one row per user; an earlier time never replaces a later one,
    /// so nodes sharing the store may write the same user in any order).
    package func recordLastSeen(_ seen: [UserID: Timestamp]) throws(StorageError) {
        for (user, time) in seen {
            try db.run(
                """
                INSERT INTO last_seen (user_id, seen_at) VALUES (?, ?)
                ON CONFLICT (user_id) DO UPDATE SET seen_at = CASE WHEN excluded.seen_at > last_seen.seen_at THEN excluded.seen_at ELSE last_seen.seen_at END
                """,
                [user.rawValue, time.millisecondsSince1970])
        }
    }
}

extension StorageReader {
    /// When each of `users` was last seen, for those ever recorded.
    package func lastSeen(of users: some Collection<UserID>) throws(StorageError) -> [UserID: Timestamp] {
        guard !users.isEmpty else { return [:] }
        var out: [UserID: Timestamp] = [:]
        let list = Array(users)
        for start in stride(from: 0, to: list.count, by: 500) {
            let chunk = list[start..<min(start + 500, list.count)]
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
            for row in try db.rows(
                "SELECT user_id, seen_at FROM last_seen WHERE user_id IN (\(marks))",
                StatementArguments(chunk.map { $0.rawValue }))
            {
                let seen: Int64 = row[1]
                out[try Columns.user(row, 0)] = Timestamp(millisecondsSince1970: seen)
            }
        }
        return out
    }
}
