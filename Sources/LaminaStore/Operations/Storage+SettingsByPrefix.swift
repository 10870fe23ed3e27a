import Foundation

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
