import Foundation
import LaminaModel

extension StorageReader {
    /// The node-wide settings whose keys start with `prefix` (which holds no `%` or `_`), by key.
    package func settings(withPrefix prefix: String) throws(StorageError) -> [String: [UInt8]] {
        guard !prefix.contains("%"), !prefix.contains("_") else {
            throw StorageError(.invalidArgument, "a settings prefix holds no % or _")
        }
        var out: [String: [UInt8]] = [:]
        for row in try db.rows("SELECT key, value FROM node_settings WHERE key LIKE ?", [prefix + "%"]) {
            let key: String = row["key"]
            out[key] = try Columns.bytes(row, "value")
        }
        return out
    }
}

extension StorageTransaction {
    /// The prefix of the keys that remember push-only notifications' ids.
    package static let notificationIDPrefix = "notification/"

    /// Remembers the id of a push-only notification (`POST /notifications`) in `node_settings`
    /// (the value: when, as 8 big-endian bytes, so ids are forgotten by comparing values);
    /// false when it was remembered already. Ids remembered before `forgettingBefore` are
    /// forgotten first, so the rows stay as many as the notifications of one push lifetime.
    package func recordNotificationID(_ id: UUID, at time: Timestamp, forgettingBefore oldest: Timestamp)
        throws(StorageError) -> Bool
    {
        func bytes(_ t: Timestamp) -> Data {
            withUnsafeBytes(of: UInt64(bitPattern: t.millisecondsSince1970).bigEndian) { Data($0) }
        }
        try db.run(
            "DELETE FROM node_settings WHERE key LIKE ? AND value < ?",
            [Self.notificationIDPrefix + "%", bytes(oldest)])
        try db.run(
            "INSERT INTO node_settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
            [Self.notificationIDPrefix + id.uuidString.lowercased(), bytes(time)])
        return db.changesCount == 1
    }
}
