import GRDB
import LaminaModel

/// The typed write operations available inside one command of a group commit. Valid only
/// during the closure it is passed to; everything it does commits (or rolls back) together.
public struct StorageTransaction {
    let db: Database
    /// The writer's cache; nil outside the group-commit writer.
    let cache: WriterCache?

    init(db: Database, cache: WriterCache? = nil) {
        self.db = db
        self.cache = cache
    }

    /// Reads inside this transaction: they see its own uncommitted writes.
    public var read: StorageReader { StorageReader(db: db) }

    /// The conversation's header as `StorageReader.conversationHeader` reads it, from the
    /// writer's cache when a command read it before (see `WriterCache`).
    public func conversationHeader(_ id: ConversationID) throws(StorageError) -> ConversationHeader? {
        if let cached = cache?.header(id) { return cached }
        guard let header = try read.conversationHeader(id) else { return nil }
        cache?.remember(header)
        return header
    }

    /// Forgets cached headers: called by every write that changes one.
    func headersChanged() { cache?.clear() }

    /// Runs `body` in a nested savepoint: if it throws, what it wrote is rolled back (and the
    /// error rethrown) while the rest of the command goes on.
    public func attempt<T>(_ body: () throws -> T) throws -> T {
        var result: T?
        do {
            try db.inSavepoint {
                result = try body()
                return .commit
            }
        } catch {
            headersChanged()  // what the savepoint undid may be cached
            throw error
        }
        return result!
    }
}

/// The typed read operations. Valid only during the closure it is passed to.
public struct StorageReader {
    let db: Database
}

extension ModelError {
    /// A model validation failure surfaced by the storage.
    var storageError: StorageError { StorageError(.invalidArgument, "\(code): \(reason)", file: file, line: line) }
}

/// Checks a caller-encoded blob against `StorageLimits.maxBlobBytes`.
func checkBlob(_ bytes: [UInt8], _ what: String) throws(StorageError) {
    guard bytes.count <= StorageLimits.maxBlobBytes else {
        throw StorageError(.invalidArgument, "\(what) is at most \(StorageLimits.maxBlobBytes) bytes, got \(bytes.count)")
    }
}

/// Checks a page size against `StorageLimits.maxPageSize`.
func checkLimit(_ limit: Int) throws(StorageError) {
    guard (1...StorageLimits.maxPageSize).contains(limit) else {
        throw StorageError(.invalidArgument, "a page holds 1...\(StorageLimits.maxPageSize) entries, asked for \(limit)")
    }
}
