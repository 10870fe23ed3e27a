import Foundation
import LaminaModel
import LaminaStoreTestSupport
import LaminaTestPostgres
import Testing

@testable import LaminaStore

/// What only the PostgreSQL backend has: its schema versions, its durability setting, its
/// connection failures and reconnection. (The storage suites run on both backends.)
@Suite struct PostgresStoreTests {
    @Test func migratesAnEmptyDatabaseWithSynchronousCommit() async throws {
        let location = try PostgresTestCluster.newLocation()
        let store = try NodeStore(location: .postgres(location))
        defer { try? store.close() }
        let applied = try store.readNow { r in try PostgresSchema.appliedMigrations(r.db as! PostgresSession) }
        #expect(applied == PostgresSchema.migrations.map(\.id))
        let tables = try store.readNow { r in
            try r.db.rows("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'").map {
                $0[0] as String
            }
        }
        #expect(
            Set(tables).isSuperset(of: [
                "conversations", "messages", "feed_entries", "recipient_status", "replication_log", "lamina_migrations",
            ]))
        // Every connection the store opens acknowledges a commit only once its WAL is flushed.
        let synchronous = try await store.write { tx in try tx.db.row("SHOW synchronous_commit").map { $0[0] as String }
        }
        #expect(synchronous == "on")
        let reading = try store.readNow { r in try r.db.row("SHOW synchronous_commit").map { $0[0] as String } }
        #expect(reading == "on")
    }

    @Test func reopeningMigratesNothingAndANewerSchemaIsRefused() async throws {
        let location = try PostgresTestCluster.newLocation()
        let store = try NodeStore(location: .postgres(location))
        try await store.write { tx in try tx.setSetting("kept", [1]) }
        try store.close()
        let reopened = try NodeStore(location: .postgres(location))
        #expect(try await reopened.read { r in try r.setting("kept") } == [1])
        // A newer node ran a migration this one does not know.
        try await reopened.write { tx in
            try tx.db.run("INSERT INTO lamina_migrations (identifier, applied_at) VALUES ('v99-from-the-future', 0)")
        }
        try reopened.close()
        #expect(throws: StorageError.self) { try NodeStore(location: .postgres(location)) }
        do throws(StorageError) {
            _ = try NodeStore(location: .postgres(location))
        } catch {
            #expect(error.code == .schemaTooNew)
            #expect(error.reason.contains("v99-from-the-future"))
        }
    }

    @Test func aSQLiteStoreWithANewerSchemaIsRefusedToo() async throws {
        let (path, cleanup) = temporaryDatabasePath()
        defer { cleanup() }
        let store = try NodeStore(path: path)
        try await store.write { tx in
            try tx.db.run("INSERT INTO grdb_migrations (identifier) VALUES ('v99-from-the-future')")
        }
        try store.close()
        do throws(StorageError) {
            _ = try NodeStore(path: path)
            Issue.record("a store with an unknown migration was opened")
        } catch {
            #expect(error.code == .schemaTooNew)
        }
    }

    @Test func anUnreachableServerIsAClearError() throws {
        // A socket directory where no server listens.
        let nowhere = PostgresLocation(
            user: "postgres", port: 5432, database: "lamina",
            socketDirectory: "/nonexistent-\(UUID().uuidString.prefix(8))")
        do throws(StorageError) {
            _ = try NodeStore(location: .postgres(nowhere))
            Issue.record("opened a store on no server")
        } catch {
            #expect(error.code == .databaseUnavailable)
            #expect(error.reason.contains("cannot connect to PostgreSQL"))
        }
    }

    @Test func anUnknownRoleIsAnAuthenticationError() throws {
        var location = try PostgresTestCluster.serverLocation()
        location.user = "no_such_role_\(UInt32.random(in: 0...UInt32.max))"
        do throws(StorageError) {
            _ = try NodeStore(location: .postgres(location))
            Issue.record("opened a store with an unknown role")
        } catch {
            #expect(error.code == .authenticationFailed)
        }
    }

    @Test func storeURLsParse() throws {
        let plain = try PostgresLocation(url: "postgres://lamina:secret@db.example:6543/relay")
        #expect(
            plain.user == "lamina" && plain.password == "secret" && plain.host == "db.example" && plain.port == 6543
                && plain.database == "relay")
        #expect(!plain.description.contains("secret"))
        let socket = try PostgresLocation(url: "postgresql://postgres@localhost/lamina?host=/run/postgresql")
        #expect(socket.socketDirectory == "/run/postgresql" && socket.port == 5432)
        #expect(throws: StorageError.self) { try PostgresLocation(url: "postgres://host/db") }
        #expect(throws: StorageError.self) { try PostgresLocation(url: "postgres://user@host/") }
        guard case .sqlite(let path) = try StoreLocation(parsing: "/var/lib/lamina/node.sqlite") else {
            Issue.record("a path is a SQLite store")
            return
        }
        #expect(path == "/var/lib/lamina/node.sqlite")
    }

    /// The server drops every connection of the store (as a restart does): writes and reads
    /// go on over new connections; at most the group in flight fails, and nothing
    /// acknowledged is lost.
    @Test func theStoreReconnectsAfterTheServerDropsItsConnections() async throws {
        let location = try PostgresTestCluster.newLocation()
        let store = try NodeStore(location: .postgres(location))
        defer { try? store.close() }
        try await store.write { tx in try tx.setSetting("before", [1]) }
        #expect(try await store.read { r in try r.setting("before") } == [1])

        var admin = location
        admin.database = try PostgresTestCluster.serverLocation().database
        let connector = PostgresConnector(location: admin, syncsCommits: false)
        defer { connector.shutdown() }
        let session = try connector.connect()
        defer { connector.close(session) }
        let killed = try session.rows(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid()",
            [location.database])
        #expect(killed.count >= 2)  // the writer's connection and a reader's

        var failures = 0
        var acknowledged: [String] = []
        for i in 0..<5 {
            do {
                try await store.write { tx in try tx.setSetting("after-\(i)", [UInt8(i)]) }
                acknowledged.append("after-\(i)")
            } catch {
                failures += 1
            }
        }
        #expect(failures <= 1)
        #expect(acknowledged.count >= 4)
        for key in acknowledged {
            var value: [UInt8]?
            // A reader whose connection was dropped fails once, then reconnects.
            for _ in 0..<2 where value == nil { value = try? await store.read { r in try r.setting(key) } }
            #expect(value != nil, "acknowledged \(key) is missing")
        }
        #expect(try await store.read { r in try r.setting("before") } == [1])
    }

    /// The writer sends the statements whose result nothing reads without waiting for them.
    /// One that fails is still its own command's failure: the command is rolled back with
    /// that error (not a later statement's "transaction aborted"), and the other commands of
    /// its group commit.
    @Test func aFailingStatementNotWaitedForFailsOnlyItsCommand() async throws {
        let location = try PostgresTestCluster.newLocation()
        let store = try NodeStore(location: .postgres(location))
        defer { try? store.close() }
        // The writer holds a first command until the next three are queued: they make one group.
        let gate = WriterGate()
        try gate.hold(store)
        await gate.entered.wait()
        let outcomes = OutcomeBox()
        let counter = CompletionCounter(expected: 3)
        try store.submit(
            { tx in try tx.setSetting("a", [1]) },
            completion: {
                outcomes.record("a", $0)
                counter.record($0)
            })
        try store.submit(
            { tx in
                // NOT NULL: fails
                try tx.db.run("INSERT INTO node_settings (key, value) VALUES (NULL, ?)", [Data([2])])
                try tx.setSetting("b-after", [2])  // sent after it, in the failed transaction
            },
            completion: {
                outcomes.record("b", $0)
                counter.record($0)
            })
        try store.submit(
            { tx in try tx.setSetting("c", [3]) },
            completion: {
                outcomes.record("c", $0)
                counter.record($0)
            })
        gate.open()
        await counter.done.wait()
        #expect(counter.successes == 2)
        #expect(store.writerStatistics.largestBatch == 2)  // a and c, committed in b's group
        #expect(outcomes.error("a") == nil && outcomes.error("c") == nil)
        #expect(
            (outcomes.error("b") as? StorageError)?.code == .constraintViolation,
            "\(String(describing: outcomes.error("b")))")
        #expect(try await store.read { r in try r.setting("a") } == [1])
        #expect(try await store.read { r in try r.setting("c") } == [3])
        #expect(try await store.read { r in try r.setting("b-after") } == nil)
        // The writer goes on.
        try await store.write { tx in try tx.setSetting("d", [4]) }
        #expect(try await store.read { r in try r.setting("d") } == [4])
    }
}

extension PostgresStoreTests {
    /// Statements run as `EXECUTE` of a prepared statement with their values as literals:
    /// every byte value, quotes, backslashes, placeholders and non-ASCII text come back as
    /// written, and a value with a NUL or too large for a literal is bound instead.
    @Test func valuesSurviveThePreparedStatementsLiterals() async throws {
        let location = try PostgresTestCluster.newLocation()
        let store = try NodeStore(location: .postgres(location))
        defer { try? store.close() }
        let bytes = (0..<256).map { UInt8($0) }
        let key = "it's a \\ back'slash $1 ? ?1 E'x' \u{1F600} ü"
        let big = [UInt8](repeating: 0xAB, count: PostgresSession.maxLiteralBytes)  // bound, not a literal
        try await store.write { tx in
            try tx.setSetting(key, bytes)
            try tx.setSetting("big", big)
            try tx.setSetting("empty", [])
        }
        #expect(try await store.read { r in try r.setting(key) } == bytes)
        #expect(try await store.read { r in try r.setting("big") } == big)
        #expect(try await store.read { r in try r.setting("empty") } == [])
        let reals: [Double] = [0.1, -2.5e-300, 1e300, .infinity, -.infinity]
        let read = try await store.write { tx in
            try reals.map { try tx.db.row("SELECT CAST(? AS DOUBLE PRECISION) * 1", [$0])?[0] as Double? }
        }
        #expect(read == reals)
        #expect(PostgresSession.literalValues([.text("a\u{0}b")]) == nil)
        #expect(
            PostgresSession.literalValues([.integer(-3), .null, .text("a'b\\c"), .blob(Data([0, 255]))])
                == "-3, NULL, E'a''b\\\\c', E'\\\\x00ff'")
    }
}

/// The outcome of each named command.
private final class OutcomeBox: @unchecked Sendable {
    private let lock = NSLock()
    private var errors: [String: any Error] = [:]

    func record<T>(_ name: String, _ result: Result<T, any Error>) {
        lock.lock()
        defer { lock.unlock() }
        if case .failure(let error) = result { errors[name] = error }
    }

    func error(_ name: String) -> (any Error)? {
        lock.lock()
        defer { lock.unlock() }
        return errors[name]
    }
}
