import Atomics
import Foundation
import Logging

/// Where a PostgreSQL store lives: `postgres://user[:password]@host[:port]/database`, or a
/// unix socket directory with `?host=/path/to/dir` (libpq's convention; the socket is
/// `<dir>/.s.PGSQL.<port>`), and TLS with `?sslmode=require` (or `verify-ca`, `verify-full`:
/// libpq's modes, through the system OpenSSL), with `&sslrootcert=/path/ca.pem` naming the CA
/// that verifies the server's certificate (libpq's default otherwise: `~/.postgresql/root.crt`).
package struct PostgresLocation: Sendable, Hashable, CustomStringConvertible {
    package var user: String
    package var password: String?
    package var host: String
    package var port: Int
    package var database: String
    /// A unix socket directory, when connecting through one.
    package var socketDirectory: String?
    /// libpq's `sslmode` when the URL names one (none: no TLS).
    package var sslMode: String?
    /// libpq's `sslrootcert`: the CA certificates (PEM) that verify the server's, when the URL
    /// names a file.
    package var sslRootCertificate: String?

    /// The `sslmode`s a URL may name (libpq's).
    static let sslModes: Set<String> = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]

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
        let sslMode = parts.queryItems?.first { $0.name == "sslmode" }?.value
        if let sslMode, !Self.sslModes.contains(sslMode) {
            throw StorageError(
                .invalidArgument,
                "sslmode is one of \(Self.sslModes.sorted().joined(separator: ", ")), got \(sslMode) in \(url)")
        }
        let rootCertificate = parts.queryItems?.first { $0.name == "sslrootcert" }?.value
        if let rootCertificate, rootCertificate.isEmpty || rootCertificate.utf8.count > 4_096 {
            throw StorageError(.invalidArgument, "sslrootcert names a file path of 1 to 4,096 bytes in \(url)")
        }
        let port = parts.port ?? 5432
        guard (1...65_535).contains(port) else {
            throw StorageError(.invalidArgument, "port out of range in \(url)")
        }
        self.init(
            user: user.removingPercentEncoding ?? user, password: parts.password?.removingPercentEncoding,
            host: parts.host.flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1", port: port,
            database: database, socketDirectory: socket)
        self.sslMode = sslMode
        self.sslRootCertificate = rootCertificate
    }

    /// The URL without the password.
    package var description: String {
        var items: [String] = []
        if let socketDirectory { items.append("host=\(socketDirectory)") }
        if let sslMode { items.append("sslmode=\(sslMode)") }
        if let sslRootCertificate { items.append("sslrootcert=\(sslRootCertificate)") }
        let place = items.isEmpty ? "" : "?" + items.joined(separator: "&")
        return "postgres://\(user)@\(host):\(port)/\(database)\(place)"
    }

}

/// Which client library the PostgreSQL store runs on (`LAMINA_POSTGRES_DRIVER` in the node's
/// environment). libpq only since issue 34 item 5 (POSTGRES.md: "The driver"); postgres-nio,
/// the other driver measured, was removed with its dependencies.
package enum PostgresDriver: String, Sendable, CaseIterable {
    /// libpq (libpq-dev, the system OpenSSL): pipeline mode, each connection driven by its own thread.
    case libpq

    /// The environment variable that chooses the driver.
    package static let environmentVariable = "LAMINA_POSTGRES_DRIVER"

    /// The driver used when the environment names none: libpq (issue 34 item 5, decided by the
    /// figures in POSTGRES.md: about half the node's CPU per message and twice the messages per
    /// second of postgres-nio in one run).
    package static var standard: PostgresDriver { .libpq }

    /// The driver the environment names (`standard` when it names none); nil for a name that is
    /// not a driver of this build.
    package static func configured(_ environment: [String: String] = ProcessInfo.processInfo.environment)
        -> PostgresDriver?
    {
        guard let name = environment[environmentVariable], !name.isEmpty else { return standard }
        return PostgresDriver(rawValue: name)
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
    /// The client library (nil: the environment named none of this build's).
    let driver: PostgresDriver?
    /// Whether the server is known to be unreachable (so each outage is logged once).
    private let outage = ManagedAtomic(false)
    /// Statements, pool use and notifications of every connection of this store.
    let counters = PostgresCounters()

    init(
        location: PostgresLocation, syncsCommits: Bool, reconnectWindow: Duration = .seconds(30),
        driver: PostgresDriver? = PostgresDriver.configured()
    ) {
        self.location = location
        self.syncsCommits = syncsCommits
        self.reconnectWindow = reconnectWindow
        self.driver = driver
    }

    /// One connection of the configured driver (no settings applied).
    func openWire() throws(StorageError) -> any PostgresWire {
        do throws(StorageError) {
            switch driver {
            case .libpq:
                return try LibpqWire(LibpqConnection.connect(location))
            case nil:
                throw StorageError(
                    .invalidArgument,
                    "\(PostgresDriver.environmentVariable) names a PostgreSQL driver this build does not have (\(PostgresDriver.allCases.map(\.rawValue).joined(separator: ", ")))"
                )
            }
        } catch {
            var mapped = error
            if mapped.code == .databaseUnavailable {
                mapped.reason = "cannot connect to PostgreSQL at \(location): \(mapped.reason)"
            }
            throw mapped
        }
    }

    /// One attempt.
    func connect() throws(StorageError) -> PostgresSession {
        let session = PostgresSession(try openWire(), counters: counters)
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
            session.wire.close()
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
        session.wire.close()
    }

    private let shutDown = ManagedAtomic(false)

    /// Marks the connector shut down (once; without blocking the caller). libpq's connections
    /// need nothing more: each is closed by its owner.
    func shutdown() {
        _ = shutDown.exchange(true, ordering: .acquiringAndReleasing)
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
