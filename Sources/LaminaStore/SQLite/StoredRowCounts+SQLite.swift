import GRDB

extension StoredRowCounts {
    /// ``StoredRowCounts`` of the SQLite store at `path`, read through a read-only connection
    /// of its own (for a benchmark in another process than the node writing the store).
    package static func read(sqliteStoreAt path: String) throws(StorageError) -> StoredRowCounts {
        var configuration = Configuration()
        configuration.readonly = true
        do {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            return try queue.read { db in try StorageReader(db: SQLiteSession(db)).storedRowCounts() }
        } catch {
            throw StorageError.wrapping(error)
        }
    }
}
