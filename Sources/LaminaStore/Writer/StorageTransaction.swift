import LaminaModel

/// The typed write operations available inside one command of a group commit. Valid only
/// during the closure it is passed to; everything it does commits (or rolls back) together.
package struct StorageTransaction {
    let db: any SQLSession
    /// The writer's cache (headers, prepared hot-path statements).
    let cache: WriterCache

    /// Several nodes write this database (PostgreSQL shared by nodes), so what one node knows
    /// of live sessions is not all there is.
    package var sharedWriters: Bool { cache.sharedWriters }

    init(db: any SQLSession, cache: WriterCache) {
        self.db = db
        self.cache = cache
    }

    /// Reads inside this transaction: they see its own uncommitted writes.
    package var read: StorageReader { StorageReader(db: db) }

    /// The conversation's header as `StorageReader.conversationHeader` reads it, from the
    /// writer's cache when a command read it before (see `WriterCache`).
    package func conversationHeader(_ id: ConversationID) throws(StorageError) -> ConversationHeader? {
        var locking = false
        if cache.sharedWriters, !cache.holdsLock(on: id) {
            // Several nodes: the conversation's writers take turns from here to COMMIT, so
            // they see each other's messages (the first message is first once) and append
            // to its participants' feeds one after the other, not in crossing lock orders.
            // The header is read by the statement that locks (it was not kept unlocked).
            locking = true
            cache.didLock(id)
        } else if let cached = cache.header(id) {
            return cached
        }
        guard let header = try read.conversationHeader(id, locking: locking) else { return nil }
        cache.remember(header)
        return header
    }

    /// Forgets cached headers: called by every write that changes one.
    func headersChanged() { cache.clearHeaders() }

    /// The writer's prepared hot-path statements.
    var statements: HotStatements {
        get throws(StorageError) { try cache.statements(db) }
    }
}

/// The typed read operations. Valid only during the closure it is passed to.
package struct StorageReader {
    let db: any SQLSession
}

extension ModelError {
    /// A model validation failure surfaced by the storage.
    var storageError: StorageError { StorageError(.invalidArgument, "\(code): \(reason)", file: file, line: line) }
}

/// Checks a caller-encoded blob against `StorageLimits.maxBlobBytes`.
func checkBlob(_ bytes: [UInt8], _ what: String) throws(StorageError) {
    guard bytes.count <= StorageLimits.maxBlobBytes else {
        throw StorageError(
            .invalidArgument, "\(what) is at most \(StorageLimits.maxBlobBytes) bytes, got \(bytes.count)")
    }
}

/// Checks a page size against `StorageLimits.maxPageSize`.
func checkLimit(_ limit: Int) throws(StorageError) {
    guard (1...StorageLimits.maxPageSize).contains(limit) else {
        throw StorageError(
            .invalidArgument, "a page holds 1...\(StorageLimits.maxPageSize) entries, asked for \(limit)")
    }
}
