import Foundation
import GRDB
import LaminaModel
import Logging

/// Where a node's store lives.
package enum StoreLocation: Sendable, Hashable, CustomStringConvertible {
    /// A SQLite database file (the zero-configuration default).
    case sqlite(path: String)
    /// A PostgreSQL database.
    case postgres(PostgresLocation)

    /// A `postgres://` URL or a SQLite file path.
    package init(parsing text: String) throws(StorageError) {
        if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            self = .postgres(try PostgresLocation(url: text))
        } else {
            self = .sqlite(path: text)
        }
    }

    package var description: String {
        switch self {
        case .sqlite(let path): return path
        case .postgres(let location): return location.description
        }
    }
}

/// The node's durable store: one database written by one group-commit writer and read
/// through a pool of concurrent readers. On SQLite (the default): one file in WAL mode,
/// `synchronous=FULL`. On PostgreSQL: one writer connection with `synchronous_commit = on`
/// and a small pool of read connections, reconnecting with backoff when the server restarts.
/// The storage operations (`Storage+*.swift`) run unchanged on both (`SQLSession`).
///
/// Writes are closures over a `StorageTransaction`, queued for the next group; the call
/// returns only after the group's transaction has committed, so whatever it reports is
/// durable. Reads are closures over a `StorageReader` and see the last committed state.
/// No SQL leaves this folder: callers use the typed operations of those two types.
///
/// Call `close()` before letting go of a store: it drains the queue and stops the writer thread.
package final class NodeStore: Sendable {
    /// The database file, or the PostgreSQL URL without its password.
    package let path: String
    package let location: StoreLocation
    package let configuration: StorageConfiguration
    let backend: Backend
    let writer: StorageWriter

    enum Backend: Sendable {
        case sqlite(DatabasePool)
        case postgres(PostgresConnector, PostgresReaderPool)
    }

    /// PostgreSQL: the connection that listens for the other nodes' commits (started by
    /// `listen`, when a node serves from this store).
    let listener: PostgresListener?

    /// The SQLite pool (SQLite stores only: for tests of SQLite's own settings).
    var pool: DatabasePool {
        guard case .sqlite(let pool) = backend else { preconditionFailure("not a SQLite store") }
        return pool
    }

    /// Opens (creating when missing) the SQLite database at `path` and migrates it to the current schema.
    package convenience init(path: String, configuration: StorageConfiguration = StorageConfiguration())
        throws(StorageError)
    {
        try self.init(location: .sqlite(path: path), configuration: configuration)
    }

    /// Opens the store at `location` and migrates it to the current schema. Refuses a
    /// database whose schema is newer than this node knows (`.schemaTooNew`); on PostgreSQL,
    /// an unreachable server is `.databaseUnavailable` and refused credentials `.authenticationFailed`.
    package init(location: StoreLocation, configuration: StorageConfiguration = StorageConfiguration())
        throws(StorageError)
    {
        try configuration.validate()
        let writerConnection: any WriterConnection
        var announcer: FeedAnnouncer?
        let searchBacklog = SearchBacklog(
            maxMessages: configuration.searchBacklogMessages,
            maxAge: .milliseconds(configuration.searchBacklogMilliseconds))
        switch location {
        case .sqlite(let path):
            let pool = try Self.openSQLite(path: path, configuration: configuration)
            if try Self.messagesWaitForTheIndex(pool) { searchBacklog.markPending() }
            backend = .sqlite(pool)
            listener = nil
            writerConnection = SQLiteWriterConnection(pool: pool, joinsWALWrites: configuration.syncsCommits)
            self.path = path
        case .postgres(let place):
            let connector = PostgresConnector(
                location: place, syncsCommits: configuration.syncsCommits,
                driver: configuration.postgresDriver ?? PostgresDriver.configured())
            let session: PostgresSession
            var opened: PostgresSession?
            do throws(StorageError) {
                session = try connector.connect()
                opened = session
                try PostgresSchema.migrate(session)
            } catch {
                if let opened { connector.close(opened) }  // a connection must be closed before it is let go
                connector.shutdown()
                Logger(label: "lamina.storage").error(
                    "cannot open the PostgreSQL store",
                    metadata: ["code": "\(error.code)", "reason": "\(error.reason)"])
                throw error
            }
            backend = .postgres(connector, PostgresReaderPool(connector: connector, size: configuration.readerCount))
            writerConnection = PostgresWriterConnection(connector: connector, session: session)
            // Other nodes may share the database: each store announces its commits under a
            // tag of its own, which its listener recognises and skips.
            let origin = String(UInt64.random(in: 1...UInt64.max), radix: 36)
            announcer = FeedAnnouncer(origin: origin, counters: connector.counters)
            listener = PostgresListener(connector: connector, origin: origin)
            self.path = place.description
        }
        self.location = location
        self.configuration = configuration
        let sources = CommandSources()
        self.commandSources = sources
        self.writer = StorageWriter(
            connection: writerConnection, capacity: configuration.writeQueueCapacity,
            maxBatchSize: configuration.maxBatchSize,
            groupDelay: .microseconds(configuration.groupCommitDelayMicroseconds),
            groupTarget: min(configuration.groupCommitTarget, configuration.maxBatchSize),
            announcer: announcer, sources: sources, feedTailRows: configuration.feedTailRows,
            feedDirectGroup: configuration.feedDirectGroupCommands, searchBacklog: searchBacklog,
            // SQLite only: a PostgreSQL commit waits on the network, too long to block a loop for.
            inlineCommitLimit: announcer == nil ? .microseconds(configuration.inlineCommitMicroseconds) : .zero)
        self.searchBacklog = searchBacklog
    }

    /// SQLite's messages not in the full-text index yet (`SearchBacklog`).
    let searchBacklog: SearchBacklog

    /// Whether messages committed before this start wait for the search index (SQLite).
    private static func messagesWaitForTheIndex(_ pool: DatabasePool) throws(StorageError) -> Bool {
        do {
            return try pool.read { db in
                try Bool.fetchOne(
                    db,
                    sql: """
                        SELECT COALESCE(MAX(rowid), 0) > (SELECT indexed_through FROM search_backlog WHERE only = 1)
                        FROM messages
                        """) ?? false
            }
        } catch {
            throw StorageError.wrapping(error)
        }
    }

    /// Whether other nodes may write to this store too (PostgreSQL): the writer then keeps
    /// no state between commands that another node could change (see `WriterCache`).
    package var isShared: Bool { listener != nil }

    /// PostgreSQL: starts listening for the other nodes' commits and ephemeral events (once).
    package func listen(_ handlers: NotificationHandlers) {
        listener?.start(handlers)
    }

    /// PostgreSQL: relays an ephemeral event to the other nodes on this database.
    package func sendEphemeral(_ body: String) {
        listener?.sendEphemeral(body)
    }

    /// PostgreSQL: `observer` drains `lease`'s outbox while this node holds the lease (see
    /// `PostgresListener.observe`). SQLite: the one node drains it, from now on.
    package func observeOutbox(_ lease: OutboxLease, _ observer: OutboxObserver) {
        guard let listener else { return observer.held(true) }
        listener.observe(lease, observer)
    }

    /// Whether this node drains `lease`'s outbox now (always on SQLite).
    func holdsOutboxLease(_ lease: OutboxLease) -> Bool { listener?.holds(lease) ?? true }

    /// PostgreSQL: the server process of the listening connection (tests end it to make it reconnect).
    var listenerBackendPID: Int64? { listener?.backendPID }

    /// PostgreSQL: records that `devices` have (`live`) or no longer have a session on this node
    /// (`live_devices`, for the other nodes' push decisions); a removal skips the devices
    /// `stillLive` says still have one. Nothing on SQLite.
    package func setPresence(
        _ devices: [(user: UserID, device: String)], live: Bool, stillLive: (@Sendable (UserID, String) -> Bool)? = nil
    ) {
        listener?.setPresence(devices, live: live, stillLive: stillLive)
    }

    /// PostgreSQL: registers every live session here again (after the listener (re)connected).
    package func registerPresence(_ snapshot: @Sendable () -> [(user: UserID, device: String)]) {
        guard let listener else { return }
        listener.registerPresence(snapshot)
    }

    /// PostgreSQL: the outbox leases this node holds (none on SQLite).
    package var heldOutboxLeases: Set<OutboxLease> { Set(OutboxLease.allCases.filter { listener?.holds($0) ?? false }) }

    /// PostgreSQL: tells the node holding `lease` that rows were queued in its outbox.
    package func wakeOutbox(_ lease: OutboxLease) { listener?.wakeOutbox(lease) }

    /// PostgreSQL: why the database is not ready for traffic (the listening connection is
    /// down, with the last error); nil when it is, or on SQLite.
    package var databaseUnavailableReason: String? { listener?.unavailableReason }

    /// PostgreSQL: counters of statements, the read pool and notifications; nil on SQLite.
    package var postgresStatistics: PostgresStatistics? {
        guard case .postgres(let connector, _) = backend else { return nil }
        return connector.counters.snapshot()
    }

    /// Like `postgresStatistics`, starting the next "slowest statement" window (`/metrics`).
    package func samplePostgresStatistics() -> PostgresStatistics? {
        guard case .postgres(let connector, _) = backend else { return nil }
        return connector.counters.snapshot(resettingSlowest: true)
    }

    private static func openSQLite(path: String, configuration: StorageConfiguration) throws(StorageError)
        -> DatabasePool
    {
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
        let writer = (cacheKiB: configuration.pageCacheKiB, mmapBytes: configuration.mmapBytes)
        let reader = (cacheKiB: configuration.readerPageCacheKiB, mmapBytes: configuration.readerMmapBytes)
        config.prepareDatabase { db in
            // The writer's cache holds the working set; readers stay small (RESOURCES.md §5).
            let own = db.configuration.readonly ? reader : writer
            try db.execute(sql: "PRAGMA cache_size = -\(own.cacheKiB)")
            try db.execute(sql: "PRAGMA mmap_size = \(own.mmapBytes)")
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
            try MessageSearchRank.register(db)
        }
        // Before the pool opens its connections: they open their files through it.
        if configuration.syncsCommits { try JoinedWALWrites.register() }
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
                throw StorageError(
                    .openFailed,
                    "SQLite refused synchronous=\(wanted) (got \(synchronous.map(String.init) ?? "nothing"))")
            }
            let known = Set(StorageSchema.migrator.migrations)
            let applied = try pool.read { db in try StorageSchema.migrator.appliedIdentifiers(db) }
            let unknown = applied.subtracting(known)
            guard unknown.isEmpty else {
                try? pool.close()
                throw StorageError(
                    .schemaTooNew,
                    "the database's schema is newer than this node knows (migrations \(unknown.sorted().joined(separator: ", "))); run a newer node"
                )
            }
            try StorageSchema.migrator.migrate(pool)
        } catch {
            throw StorageError.wrapping(error, as: .openFailed)
        }
        return pool
    }

    deinit {
        // A store dropped without `close()` still commits what was queued and stops its thread.
        writer.shutdown()
        if case .postgres(let connector, let readers) = backend {
            listener?.stop()
            readers.close(waiting: false)  // a deinit may run on an event loop
            connector.shutdown()
        }
    }

    /// Sessions with commands in flight, as the group-commit policy counts them: a caller
    /// that pipelines commands through ``submit(_:completion:)`` reports each change of its
    /// in-flight count here (a lone pipelining caller's groups skip the commit spacing).
    package let commandSources: CommandSources

    /// Counters of the group-commit writer.
    package var writerStatistics: StorageWriterStatistics { writer.statistics }

    /// Runs `body` in the next group's transaction and returns its result once committed.
    ///
    /// If `body` throws, only its own changes are rolled back (it runs in a savepoint) and the
    /// error is rethrown unchanged; storage failures are `StorageError`s (`.writeQueueFull`
    /// at once when the queue is full, `.commitFailed` when the group could not commit).
    package func write<T: Sendable>(_ body: @escaping @Sendable (StorageTransaction) throws -> T) async throws -> T {
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
    /// `conversations`: those `body` will write to, when known (with several writers the
    /// group locks them first, in one order: see `StorageWriter`).
    /// `mayCommitInline`: the caller may block for one commit (an event loop at a low rate),
    /// and `completion` may then run before this returns (`StorageWriter.enqueue`).
    package func submit<T: Sendable>(
        _ body: @escaping @Sendable (StorageTransaction) throws -> T,
        conversations: [ConversationID] = [], mayCommitInline: Bool = false,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) throws(StorageError) {
        try writer.enqueue(
            WriteCommand(body: body, conversations: conversations, completion: completion),
            mayCommitInline: mayCommitInline)
    }

    /// Reads the last committed state on the calling thread, blocking it: for start-up,
    /// before any session exists (never from an event loop).
    package func readNow<T>(_ body: (StorageReader) throws -> T) throws -> T {
        switch backend {
        case .sqlite(let pool):
            do {
                return try pool.read { db in try body(StorageReader(db: SQLiteSession(db))) }
            } catch let error as GRDB.DatabaseError {
                throw StorageError.wrapping(error)
            }
        case .postgres(_, let readers):
            return try readers.read { session in try body(StorageReader(db: session)) }
        }
    }

    /// Reads the last committed state like ``read(_:)``, once the full-text index holds every
    /// committed message: on SQLite the writer first indexes the messages waiting for it, if
    /// any (``SearchBacklog``). For searches.
    package func searchRead<T: Sendable>(_ body: @escaping @Sendable (StorageReader) throws -> T) async throws -> T {
        if searchBacklog.isPending { try await write { tx in try tx.indexWaitingMessages() } }
        return try await read(body)
    }

    /// Reads the last committed state on one of the concurrent readers.
    package func read<T: Sendable>(_ body: @escaping @Sendable (StorageReader) throws -> T) async throws -> T {
        switch backend {
        case .sqlite(let pool):
            do {
                return try await pool.read { db in try body(StorageReader(db: SQLiteSession(db))) }
            } catch let error as GRDB.DatabaseError {
                throw StorageError.wrapping(error)
            }
        case .postgres:
            let result: Result<T, any Error> = await withCheckedContinuation { continuation in
                read(body) { continuation.resume(returning: $0) }
            }
            return try result.get()
        }
    }

    /// Reads the last committed state on one of the concurrent readers and calls `completion`
    /// on that reader's queue. For callers on event loops that must not suspend.
    package func read<T: Sendable>(
        _ body: @escaping @Sendable (StorageReader) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        switch backend {
        case .sqlite(let pool):
            pool.asyncRead { result in
                switch result {
                case .success(let db):
                    do {
                        completion(.success(try body(StorageReader(db: SQLiteSession(db)))))
                    } catch let error as GRDB.DatabaseError {
                        completion(.failure(StorageError.wrapping(error)))
                    } catch {
                        completion(.failure(error))
                    }
                case .failure(let error):
                    completion(.failure(StorageError.wrapping(error)))
                }
            }
        case .postgres(_, let readers):
            // On a reader thread of the pool, which drives its own connection.
            readers.read({ session in try body(StorageReader(db: session)) }, completion: completion)
        }
    }

    /// Stops taking writes, commits everything queued, stops the writer and closes the database.
    /// Must not be called from a write's completion (the writer thread); that is refused.
    package func close() throws(StorageError) {
        guard !writer.isWriterThread else {
            throw StorageError(
                .invalidArgument,
                "close() was called on the writer thread (from a write's completion); call it elsewhere")
        }
        writer.shutdown()
        switch backend {
        case .sqlite(let pool):
            do {
                try pool.close()
            } catch {
                throw StorageError.wrapping(error)
            }
        case .postgres(let connector, let readers):
            listener?.stop()
            listener?.waitUntilStopped()
            readers.close()
            connector.shutdown()
        }
    }

    /// Values of the connection pragmas that durability depends on, as the writer sees them (SQLite).
    func writerPragmas() throws -> [String: String] {
        try pool.writeWithoutTransaction { db in
            var out: [String: String] = [:]
            for name in ["journal_mode", "synchronous", "foreign_keys", "mmap_size", "cache_size"] {
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

    let conversations: [ConversationID]

    init(
        body: @escaping @Sendable (StorageTransaction) throws -> T, conversations: [ConversationID] = [],
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        self.body = body
        self.conversations = conversations
        self.completion = completion
    }

    func apply(_ db: any SQLSession, cache: WriterCache) throws {
        result = try body(StorageTransaction(db: db, cache: cache))
    }

    var resolvesFeedSeqs: Bool { T.self is any ProvisionalFeedSeqs.Type }

    func resolveFeedSeqs(_ bases: [UserID: Int64]) {
        guard let provisional = result as? any ProvisionalFeedSeqs else { return }
        let resolved = provisional.resolvingFeedSeqs { user, seq in
            UInt64(Int64(seq) + (bases[user] ?? 0))
        }
        result = resolved as? T
    }

    func announcedFeedEvents() -> [AnnouncedFeedEvent] {
        (result as? any AnnouncesFeedEntries)?.announcedFeedEvents() ?? []
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
