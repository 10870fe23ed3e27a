import Foundation
import LaminaModel
import LaminaStoreTestSupport
import LaminaTestPostgres
import Testing

@testable import LaminaStore

/// The libpq driver (`LAMINA_POSTGRES_DRIVER=libpq`) on its own: values in and out in
/// PostgreSQL's binary formats, prepared statements with bound parameters, the pipeline's
/// deferred failures, connection failures and the driver's selection. (The PostgreSQL suites run
/// on it with the variable set.)
@Suite struct LibpqDriverTests {
    private func session(_ location: PostgresLocation) throws -> (PostgresConnector, PostgresSession) {
        let connector = PostgresConnector(location: location, syncsCommits: true, driver: .libpq)
        let session = try connector.connect()
        #expect(session.wire.driverName == "libpq")
        return (connector, session)
    }

    @Test func valuesRoundTripInBinary() throws {
        let (connector, session) = try session(try PostgresTestCluster.newLocation())
        defer {
            connector.close(session)
            connector.shutdown()
        }
        let bytes = Data([0, 1, 0xFE, 0xFF, 0x27, 0x5C])
        let row = try #require(
            try session.row(
                "SELECT ?, ?, ?, ?, ?, CAST(? AS BIGINT) IS NULL, CAST(1 AS SMALLINT), CAST(-7 AS INTEGER), TRUE",
                [Int64.min, -2.5, "é'\\ text", bytes, Int64.max, nil as Int64?]))
        #expect(row[0] as Int64 == Int64.min)
        #expect(row[1] as Double == -2.5)
        #expect(row[2] as String == "é'\\ text")
        #expect(row[3] as Data == bytes)
        #expect(row[4] as Int64 == Int64.max)
        #expect(row[5] as Int64 == 1)
        #expect(row[6] as Int64 == 1 && row[7] as Int64 == -7 && row[8] as Int64 == 1)
        // numeric (sum of bigints) decodes as an integer when it is one, else a real.
        let numbers = try #require(
            try session.row(
                "SELECT sum(x), CAST(-12345678.25 AS NUMERIC), CAST(0 AS NUMERIC), CAST(10000 AS NUMERIC) FROM (VALUES (CAST(4000000000000 AS BIGINT)), (CAST(5 AS BIGINT))) AS t(x)"
            ))
        #expect(numbers[0] as Int64 == 4_000_000_000_005)
        #expect(numbers[1] as Double == -12_345_678.25)
        #expect(numbers[2] as Int64 == 0 && numbers[3] as Int64 == 10_000)
        // A text with a NUL is refused by the server (bound, not spliced into the text).
        #expect(throws: StorageError.self) { try session.row("SELECT ?", ["a\u{0}b"]) }
    }

    @Test func arraysBindInBinary() throws {
        let (connector, session) = try session(try PostgresTestCluster.newLocation())
        defer {
            connector.close(session)
            connector.shutdown()
        }
        let wire = session.wire
        let ticket = wire.enqueue(
            .unnamed(
                "SELECT count(*), sum(a), string_agg(b, ',' ORDER BY b), sum(length(c)), bool_and(d) FROM unnest($1::bigint[], $2::text[], $3::bytea[], $4::boolean[]) AS u(a, b, c, d)",
                [
                    .bigints([1, 2, 3]), .texts(["x", "y", "z"]), .byteas([Data(), Data([1]), Data([1, 2])]),
                    .booleans([true, true, true]),
                ]))
        let result = try wire.result(ticket).get()
        #expect(result.rows.first == [.integer(3), .integer(6), .text("x,y,z"), .integer(3), .integer(1)])
        let empty = try wire.result(wire.enqueue(.unnamed("SELECT cardinality($1::bigint[])", [.bigints([])]))).get()
        #expect(empty.rows.first == [.integer(0)])
    }

    /// Statements the writer sends without waiting go in one pipeline; a failure among them is
    /// thrown at the next statement waited for, with its own code, and the statements after it
    /// did not run.
    @Test func aFailureInThePipelineIsThrownAtTheNextWait() throws {
        let (connector, session) = try session(try PostgresTestCluster.newLocation())
        defer {
            connector.close(session)
            connector.shutdown()
        }
        try session.run("CREATE TABLE t (id BIGINT PRIMARY KEY)")
        try session.begin()
        try session.run("INSERT INTO t (id) VALUES (?)", [1])
        try session.run("INSERT INTO t (id) VALUES (?)", [1])  // taken: fails, not waited for
        try session.run("INSERT INTO t (id) VALUES (?)", [2])
        do {
            _ = try session.int64("SELECT count(*) FROM t")
            Issue.record("the duplicate was not reported")
        } catch {
            #expect(error.code == .constraintViolation)
            #expect(error.reason.contains("UNIQUE constraint failed: t.id"))
        }
        session.rollback()
        #expect(try session.int64("SELECT count(*) FROM t") == 0)
        // The session goes on: prepared statements of the failed transaction are still there.
        try session.begin()
        try session.run("INSERT INTO t (id) VALUES (?)", [3])
        try session.commit()
        #expect(try session.int64("SELECT count(*) FROM t") == 1)
        #expect(!session.isBroken)
    }

    @Test func aRefusedConnectionIsDatabaseUnavailable() throws {
        // A port nothing listens on (bound and closed at once).
        let location = PostgresLocation(user: "nobody", host: "127.0.0.1", port: 1, database: "none")
        let connector = PostgresConnector(
            location: location, syncsCommits: true, reconnectWindow: .milliseconds(200), driver: .libpq)
        defer { connector.shutdown() }
        do {
            _ = try connector.connectWithBackoff()
            Issue.record("connected to nothing")
        } catch {
            #expect(error.code == .databaseUnavailable)
        }
    }

    @Test func aStoreRunsOnLibpqAndTheServerSeesPreparedStatements() async throws {
        let location = try PostgresTestCluster.newLocation()
        var configuration = StorageConfiguration()
        configuration.postgresDriver = .libpq
        let store = try NodeStore(location: .postgres(location), configuration: configuration)
        defer { try? store.close() }
        try await store.write { tx in try tx.setSetting("k", [7]) }
        #expect(try await store.read { r in try r.setting("k") } == [7])
        // The read ran on a connection of the pool, through statements prepared by libpq.
        let prepared = try await store.read { r in
            try r.db.int64("SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'lamina_%'")
        }
        #expect((prepared ?? 0) > 0)
        let threads = try await store.read { _ in Thread.current.name ?? "" }
        #expect(threads.hasPrefix(StorageThreadName.reader))
    }

    @Test func theDriverAndTLSAreChosenExplicitly() throws {
        #expect(PostgresDriver.configured([:]) == PostgresDriver.standard)
        #expect(PostgresDriver.configured(["LAMINA_POSTGRES_DRIVER": "libpq"]) == .libpq)
        #expect(PostgresDriver.configured(["LAMINA_POSTGRES_DRIVER": "odbc"]) == nil)
        let tls = try PostgresLocation(url: "postgres://u@db.example/lamina?sslmode=verify-full")
        #expect(tls.sslMode == "verify-full")
        #expect(tls.description.hasSuffix("?sslmode=verify-full"))
        #expect(throws: StorageError.self) { try PostgresLocation(url: "postgres://u@db.example/lamina?sslmode=maybe") }
        let unknown = PostgresConnector(location: tls, syncsCommits: true, driver: nil)
        defer { unknown.shutdown() }
        do {
            _ = try unknown.connect()
            Issue.record("connected with no driver")
        } catch {
            #expect(error.code == .invalidArgument)
        }
    }
}
