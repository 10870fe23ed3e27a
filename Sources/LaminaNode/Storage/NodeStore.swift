import Foundation
import GRDB

/// The node's durable store: one SQLite database in WAL mode, written by one group-commit
/// writer (`synchronous=FULL`) and read through a pool of concurrent readers.
///
/// Writes are closures over a `StorageTransaction`, queued for the next group; the call
/// returns only after the group's transaction has committed, so whatever it reports is
/// durable. Reads are closures over a `StorageReader` and see the last committed state.
/// No SQL leaves this folder: callers use the typed operations of those two types.
///
/// Call `close()` before letting go of a store: it drains the queue and stops the writer thread.
public final class NodeStore: Sendable {
    /// The database file.
    public let path: String
    public let configuration: StorageConfiguration
    let pool: DatabasePool
    let writer: StorageWriter

    /// Opens (creating when missing) the database at `path` and migrates it to the current schema.
    public init(path: String, configuration: StorageConfiguration = StorageConfiguration()) throws(StorageError) {
        try configuration.validate()
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw StorageError(.openFailed, "cannot create directory \(directory): \(error)")
            }
        }
        var config = Configuration()
        config.foreignKeysEnabled = true
        config.maximumReaderCount = configuration.readerCount
        config.busyMode = .timeout(10)
        config.label = "lamina.storage"
        let cacheKiB = configuration.pageCacheKiB, mmapBytes = configuration.mmapBytes
        config.prepareDatabase { db in
            // The writer's cache holds the working set; readers lean on the memory map.
            try db.execute(sql: "PRAGMA cache_size = -\(db.configuration.readonly ? min(cacheKiB, 8 * 1_024) : cacheKiB)")
            try db.execute(sql: "PRAGMA mmap_size = \(mmapBytes)")
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
        }
        let pool: DatabasePool
        do {
            pool = try DatabasePool(path: path, configuration: config)
            // After the pool's own WAL setup (which picks NORMAL): every commit of the one
            // writer connection syncs the WAL, so what is acknowledged survives a power loss.
            let wanted = configuration.syncsCommits ? 2 : 0
            let synchronous = try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = \(wanted)")
                return try Int.fetchOne(db, sql: "PRAGMA synchronous")
            }
            guard synchronous == wanted else {
                try? pool.close()
                throw StorageError(.openFailed, "SQLite refused synchronous=\(wanted) (got \(synchronous.map(String.init) ?? "nothing"))")
            }
            try StorageSchema.migrator.migrate(pool)
        } catch {
            throw StorageError.wrapping(error, as: .openFailed)
        }
        self.path = path
        self.configuration = configuration
        self.pool = pool
        self.writer = StorageWriter(
            pool: pool, capacity: configuration.writeQueueCapacity, maxBatchSize: configuration.maxBatchSize,
            groupDelay: .microseconds(configuration.groupCommitDelayMicroseconds), groupTarget: min(configuration.groupCommitTarget, configuration.maxBatchSize))
    }

    deinit {
        // A store dropped without `close()` still commits what was queued and stops its thread.
        writer.shutdown()
    }

    /// Counters of the group-commit writer.
    public var writerStatistics: StorageWriterStatistics { writer.statistics }

    /// Runs `body` in the next group's transaction and returns its result once committed.
    ///
    /// If `body` throws, only its own changes are rolled back (it runs in a savepoint) and the
    /// error is rethrown unchanged; storage failures are `StorageError`s (`.writeQueueFull`
    /// at once when the queue is full, `.commitFailed` when the group could not commit).
    public func write<T: Sendable>(_ body: @escaping @Sendable (StorageTransaction) throws -> T) async throws -> T {
        let result: Result<T, any Error> = await withCheckedContinuation { continuation in
            do {
                try submit(body) { continuation.resume(returning: $0) }
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
        return try result.get()
    }

    /// Queues `body` for the next group and calls `completion` on the writer thread once the
    /// group committed (or failed). For callers on event loops that must not suspend; the
    /// completion should only hop back to the caller's loop. Throws at once when the queue
    /// is full or the store closed (then `completion` is never called).
    public func submit<T: Sendable>(
        _ body: @escaping @Sendable (StorageTransaction) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) throws(StorageError) {
        try writer.enqueue(WriteCommand(body: body, completion: completion))
    }

    /// Reads the last committed state on the calling thread, blocking it: for start-up,
    /// before any session exists (never from an event loop).
    public func readNow<T>(_ body: (StorageReader) throws -> T) throws -> T {
        do {
            return try pool.read { db in try body(StorageReader(db: db)) }
        } catch let error as DatabaseError {
            throw StorageError.wrapping(error)
        }
    }

    /// Reads the last committed state on one of the concurrent readers.
    public func read<T: Sendable>(_ body: @escaping @Sendable (StorageReader) throws -> T) async throws -> T {
        do {
            return try await pool.read { db in try body(StorageReader(db: db)) }
        } catch let error as DatabaseError {
            throw StorageError.wrapping(error)
        }
    }

    /// Reads the last committed state on one of the concurrent readers and calls `completion`
    /// on that reader's queue. For callers on event loops that must not suspend.
    public func read<T: Sendable>(
        _ body: @escaping @Sendable (StorageReader) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        pool.asyncRead { result in
            switch result {
            case .success(let db):
                do {
                    completion(.success(try body(StorageReader(db: db))))
                } catch let error as DatabaseError {
                    completion(.failure(StorageError.wrapping(error)))
                } catch {
                    completion(.failure(error))
                }
            case .failure(let error):
                completion(.failure(StorageError.wrapping(error)))
            }
        }
    }

    /// Stops taking writes, commits everything queued, stops the writer and closes the database.
    /// Must not be called from a write's completion (the writer thread); that is refused.
    public func close() throws(StorageError) {
        guard !writer.isWriterThread else {
            throw StorageError(.invalidArgument, "close() was called on the writer thread (from a write's completion); call it elsewhere")
        }
        writer.shutdown()
        do {
            try pool.close()
        } catch {
            throw StorageError.wrapping(error)
        }
    }

    /// Values of the connection pragmas that durability depends on, as the writer sees them.
    func writerPragmas() throws -> [String: String] {
        try pool.writeWithoutTransaction { db in
            var out: [String: String] = [:]
            for name in ["journal_mode", "synchronous", "foreign_keys"] {
                out[name] = try String.fetchOne(db, sql: "PRAGMA \(name)")
            }
            return out
        }
    }
}

/// A queued write closure with its completion.
final class WriteCommand<T: Sendable>: StorageCommand, @unchecked Sendable {
    private let body: @Sendable (StorageTransaction) throws -> T
    private let completion: @Sendable (Result<T, any Error>) -> Void
    // Written on the writer thread, read on the completion thread after the group's hand-over.
    private var result: T?

    init(body: @escaping @Sendable (StorageTransaction) throws -> T, completion: @escaping @Sendable (Result<T, any Error>) -> Void) {
        self.body = body
        self.completion = completion
    }

    func apply(_ db: Database, cache: WriterCache) throws {
        result = try body(StorageTransaction(db: db, cache: cache))
    }

    func complete(_ failure: (any Error)?) {
        if let failure {
            completion(.failure(failure))
        } else if let result {
            completion(.success(result))
        } else {
            completion(.failure(StorageError(.commitFailed, "the command committed without a result")))
        }
        result = nil
    }
}
