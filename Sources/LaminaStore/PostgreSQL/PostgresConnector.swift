import Atomics
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO

/// Where a PostgreSQL store lives: `postgres://user[:password]@host[:port]/database`, or a
/// unix socket directory with `?host=/path/to/dir` (libpq's convention; the socket is
/// `<dir>/.s.PGSQL.<port>`).
package struct PostgresLocation: Sendable, Hashable, CustomStringConvertible {
    package var user: String
    package var password: String?
    package var host: String
    package var port: Int
    package var database: String
    /// A unix socket directory, when connecting through one.
    package var socketDirectory: String?

    package init(
        user: String, password: String? = nil, host: String = "127.0.0.1", port: Int = 5432, database: String,
        socketDirectory: String? = nil
    ) {
        self.user = user
        self.password = password
        self.host = host
        self.port = port
        self.database = database
        self.socketDirectory = socketDirectory
    }

    /// Parses a `postgres://` or `postgresql://` URL.
    package init(url: String) throws(StorageError) {
        guard url.hasPrefix("postgres://") || url.hasPrefix("postgresql://"), let parts = URLComponents(string: url)
        else {
            throw StorageError(
                .invalidArgument, "a PostgreSQL store is postgres://user[:password]@host[:port]/database, got \(url)")
        }
        let database = String(parts.path.drop { $0 == "/" })
        guard let user = parts.user, !user.isEmpty, !database.isEmpty, !database.contains("/") else {
            throw StorageError(
                .invalidArgument,
                "a PostgreSQL store URL names a user and a database: postgres://user@host[:port]/database, got \(url)")
        }
        let socket = parts.queryItems?.first { $0.name == "host" }?.value
        let port = parts.port ?? 5432
        guard (1...65_535).contains(port) else {
            throw StorageError(.invalidArgument, "port out of range in \(url)")
        }
        self.init(
            user: user.removingPercentEncoding ?? user, password: parts.password?.removingPercentEncoding,
            host: parts.host.flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1", port: port,
            database: database, socketDirectory: socket)
    }

    /// The URL without the password.
    package var description: String {
        let place = socketDirectory.map { "?host=\($0)" } ?? ""
        return "postgres://\(user)@\(host):\(port)/\(database)\(place)"
    }

    var configuration: PostgresConnection.Configuration {
        if let socketDirectory {
            return PostgresConnection.Configuration(
                unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: user, password: password,
                database: database)
        }
        return PostgresConnection.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: .disable)
    }
}

/// Opens connections to one PostgreSQL database, each set up the way the store needs it
/// (`synchronous_commit` on: a COMMIT returns once its WAL is flushed). Connects again with
/// exponential backoff while the server is unreachable.
final class PostgresConnector: Sendable {
    let location: PostgresLocation
    let syncsCommits: Bool
    /// How long a connection is retried before a command fails with `.databaseUnavailable`.
    let reconnectWindow: Duration
    private let group: MultiThreadedEventLoopGroup
    private let logger: Logger
    private let ids = ManagedAtomicCounter()
    /// Whether the server is known to be unreachable (so each outage is logged once).
    private let outage = ManagedAtomic(false)
    /// Statements, pool use and notifications of every connection of this store.
    let counters = PostgresCounters()

    init(location: PostgresLocation, syncsCommits: Bool, reconnectWindow: Duration = .seconds(30)) {
        self.location = location
        self.syncsCommits = syncsCommits
        self.reconnectWindow = reconnectWindow
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var logger = Logger(label: "lamina.storage.postgres")
        logger.logLevel = .warning
        self.logger = logger
    }

    /// One attempt.
    func connect() throws(StorageError) -> PostgresSession {
        let connection: PostgresConnection
        do {
            connection = try PostgresConnection.connect(
                on: group.next(), configuration: location.configuration, id: ids.next(), logger: logger
            ).wait()
        } catch {
            var mapped = PostgresErrors.storageError(error)
            if mapped.code == .databaseUnavailable {
                mapped.reason = "cannot connect to PostgreSQL at \(location): \(mapped.reason)"
            }
            throw mapped
        }
        let session = PostgresSession(connection, logger: logger, counters: counters)
        let wanted = syncsCommits ? "on" : "off"
        do throws(StorageError) {
            try session.run("SET synchronous_commit = \(wanted)")
            let row = try session.row("SHOW synchronous_commit")
            let actual: String? = row?[0]
            guard actual == wanted else {
                throw StorageError(
                    .openFailed, "PostgreSQL refused synchronous_commit = \(wanted) (got \(actual ?? "nothing"))")
            }
        } catch {
            try? connection.close().wait()
            throw error
        }
        if outage.exchange(false, ordering: .acquiringAndReleasing) {
            Logger(label: "lamina.storage").notice("PostgreSQL reachable again", metadata: ["at": "\(location)"])
        }
        return session
    }

    /// Connects, retrying with exponential backoff (50 ms doubling up to 2 s) for
    /// `reconnectWindow` while the server is unreachable; other failures (authentication,
    /// a missing database) are final at once.
    func connectWithBackoff() throws(StorageError) -> PostgresSession {
        let deadline = ContinuousClock.now + reconnectWindow
        var delay = Duration.milliseconds(50)
        while true {
            do throws(StorageError) {
                return try connect()
            } catch {
                guard error.code == .databaseUnavailable else { throw error }
                if !outage.exchange(true, ordering: .acquiringAndReleasing) {
                    Logger(label: "lamina.storage").error(
                        "PostgreSQL unreachable; retrying", metadata: ["reason": "\(error.reason)"])
                }
                guard ContinuousClock.now + delay < deadline else { throw error }
                Thread.sleep(forTimeInterval: delay.seconds)
                delay = min(delay * 2, .seconds(2))
            }
        }
    }

    func close(_ session: PostgresSession) {
        try? session.connection.close().wait()
    }

    private let shutDown = ManagedAtomic(false)

    /// Stops the connections' event loop (once; without blocking the caller).
    func shutdown() {
        guard !shutDown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        group.shutdownGracefully { _ in }
    }
}

/// The read connections: at most `size`, each used by one read at a time, opened on demand
/// and replaced when one breaks. Each read runs in a read-only snapshot transaction.
final class PostgresReaderPool: @unchecked Sendable {
    private let connector: PostgresConnector
    private let size: Int
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var idle: [PostgresSession] = []
    private var open = 0
    private var closed = false

    init(connector: PostgresConnector, size: Int) {
        self.connector = connector
        self.size = size
        connector.counters.update { $0.readerPoolSize = size }
    }

    func read<T>(_ body: (PostgresSession) throws -> T) throws -> T {
        var retried = false
        while true {
            let (session, reused) = try checkOut()
            connector.counters.update { $0.readersInUse += 1 }
            var result: Result<T, any Error>
            do {
                // BEGIN and COMMIT are not waited for: BEGIN goes with the read's first
                // statement, COMMIT is settled by the connection's next use (a read-only
                // transaction's COMMIT fails only with its connection).
                try session.sendWithoutWaiting("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                result = .success(try body(session))
                try session.sendWithoutWaiting("COMMIT", now: true)
            } catch {
                result = .failure(error)
                if !session.isBroken { _ = try? session.run("ROLLBACK") }
            }
            connector.counters.update { $0.readersInUse -= 1 }
            checkIn(session)
            // An idle connection the server closed meanwhile (a restart, another node's
            // administrator): the read fails on it and runs once more on a new connection
            // (a read changes nothing: running it again is safe).
            if case .failure = result, reused, !retried, session.isBroken {
                retried = true
                continue
            }
            return try result.get()
        }
    }

    /// A connection for one read, and whether it was used before (idle in the pool).
    private func checkOut() throws(StorageError) -> (PostgresSession, reused: Bool) {
        condition.lock()
        if idle.isEmpty, open >= size, !closed {
            // Every read connection is busy: count the wait and how long it lasts.
            let started = ContinuousClock.now
            while idle.isEmpty, open >= size, !closed { condition.wait() }
            let waited = ContinuousClock.now - started
            connector.counters.update {
                $0.poolWaits += 1
                $0.poolWaitMicroseconds +=
                    Int(waited.components.seconds) * 1_000_000 + Int(waited.components.attoseconds / 1_000_000_000_000)
            }
        }
        if closed {
            condition.unlock()
            throw StorageError(.closed, "the store is closed")
        }
        while let session = idle.popLast() {
            if session.isBroken {
                // Closed while idle (the server restarted, say): replace it.
                open -= 1
                connector.close(session)
                continue
            }
            condition.unlock()
            return (session, true)
        }
        open += 1
        condition.unlock()
        do throws(StorageError) {
            return (try connector.connectWithBackoff(), false)
        } catch {
            condition.lock()
            open -= 1
            condition.signal()
            condition.unlock()
            throw error
        }
    }

    private func checkIn(_ session: PostgresSession) {
        condition.lock()
        if session.isBroken || closed {
            open -= 1
            condition.unlock()
            connector.close(session)
        } else {
            idle.append(session)
            condition.unlock()
        }
        condition.lock()
        condition.signal()
        condition.unlock()
    }

    /// Closes the idle connections; `waiting: false` does not wait for them to close (from a
    /// deinit, which may run on an event loop, where waiting is refused).
    func close(waiting: Bool = true) {
        condition.lock()
        closed = true
        let sessions = idle
        idle.removeAll()
        open -= sessions.count
        condition.broadcast()
        condition.unlock()
        for session in sessions {
            if waiting { connector.close(session) } else { session.connection.close().whenComplete { _ in } }
        }
    }
}

/// The writer's connection to PostgreSQL: one session, opened again (with backoff) when it broke.
final class PostgresWriterConnection: WriterConnection, @unchecked Sendable {
    private let connector: PostgresConnector
    /// Writer thread only.
    private var session: PostgresSession?

    init(connector: PostgresConnector, session: PostgresSession) {
        self.connector = connector
        self.session = session
    }

    func withSession<T>(_ body: (any SQLSession, _ fresh: Bool) throws -> T) throws -> T {
        var fresh = false
        if session == nil || session!.isBroken {
            if let broken = session { connector.close(broken) }
            session = nil
            session = try connector.connectWithBackoff()
            fresh = true
        }
        do {
            return try body(session!, fresh)
        } catch let stale as StaleConnection where !fresh && stale.error.code == .databaseUnavailable {
            // Closed by the server while idle (BEGIN failed, nothing applied): once more on a new connection.
            if let broken = session { connector.close(broken) }
            session = nil
            session = try connector.connectWithBackoff()
            return try body(session!, true)
        }
    }

    func finish(_ body: (any SQLSession) -> Void) {
        if let session, !session.isBroken { body(session) }
        if let session { connector.close(session) }
        session = nil
    }
}

/// A counter for connection ids.
final class ManagedAtomicCounter: Sendable {
    private let value = ManagedAtomic(0)
    func next() -> Int { value.wrappingIncrementThenLoad(ordering: .relaxed) }
}

/// Operations on a whole PostgreSQL database, for tools (benchmarks) rather than nodes.
package enum PostgresMaintenance {
    /// Drops everything in the database's `public` schema (every Lamina table): a benchmark
    /// starts each round on an empty store. Never call it on a database a node is using.
    package static func emptyDatabase(_ url: String) throws(StorageError) {
        let connector = PostgresConnector(location: try PostgresLocation(url: url), syncsCommits: true)
        defer { connector.shutdown() }
        let session = try connector.connect()
        defer { connector.close(session) }
        try session.run("DROP SCHEMA public CASCADE")
        try session.run("CREATE SCHEMA public")
    }

    /// What a benchmark reads of the server for the database of `url`: the statements run in
    /// it (`pg_stat_statements`' calls, top-level statements, BEGIN and COMMIT included; nil
    /// unless the server preloads the module: `shared_preload_libraries = 'pg_stat_statements'`)
    /// and the deadlocks detected in it (`pg_stat_database`). The extension is created in a
    /// schema of its own, `lamina_bench`, which `emptyDatabase` leaves alone.
    package static func counters(_ url: String) throws(StorageError) -> (statements: Int64?, deadlocks: Int64) {
        let connector = PostgresConnector(location: try PostgresLocation(url: url), syncsCommits: true)
        defer { connector.shutdown() }
        let session = try connector.connect()
        defer { connector.close(session) }
        // The statistics collector's view of other backends' counters, not a snapshot cached in this one.
        let deadlocks =
            try session.int64(
                "SELECT CAST(deadlocks AS BIGINT) FROM pg_stat_database WHERE datname = current_database()") ?? 0
        var statements: Int64?
        do {
            try session.run("CREATE SCHEMA IF NOT EXISTS lamina_bench")
            try session.run("CREATE EXTENSION IF NOT EXISTS pg_stat_statements WITH SCHEMA lamina_bench")
            statements = try session.int64(
                """
                SELECT CAST(coalesce(sum(calls), 0) AS BIGINT) FROM lamina_bench.pg_stat_statements
                WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                """)
        } catch {
            statements = nil
        }
        return (statements, deadlocks)
    }
}
