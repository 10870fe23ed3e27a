import GRDB
import LaminaModel

/// The typed write operations available inside one command of a group commit. Valid only
/// during the closure it is passed to; everything it does commits (or rolls back) together.
public struct StorageTransaction {
    let db: Database

    /// Reads inside this transaction: they see its own uncommitted writes.
    public var read: StorageReader { StorageReader(db: db) }

    /// Runs `body` in a nested savepoint: if it throws, what it wrote is rolled back (and the
    /// error rethrown) while the rest of the command goes on.
    public func attempt<T>(_ body: () throws -> T) throws -> T {
        var result: T?
        try db.inSavepoint {
            result = try body()
            return .commit
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
