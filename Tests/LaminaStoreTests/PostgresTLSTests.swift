import Foundation
import LaminaModel
import LaminaTestPostgres
import Testing

@testable import LaminaStore

/// The store's TLS to PostgreSQL (`sslmode`, `sslrootcert` in the store URL, through libpq and
/// the system OpenSSL) against a real server that accepts TLS connections only and holds a
/// certificate signed by a CA of the test's own (POSTGRES.md, "TLS").
@Suite(.serialized) struct PostgresTLSTests {
    private func connect(_ url: String) throws(StorageError) -> (PostgresConnector, PostgresSession) {
        let connector = PostgresConnector(
            location: try PostgresLocation(url: url), syncsCommits: true, reconnectWindow: .milliseconds(300),
            driver: .libpq)
        do {
            return (connector, try connector.connect())
        } catch {
            connector.shutdown()
            throw error
        }
    }

    /// Whether the server sees this session's connection as TLS, and with which version.
    private func tls(of session: PostgresSession) throws -> (on: Bool, version: String) {
        let row = try #require(
            try session.row("SELECT ssl, coalesce(version, '') FROM pg_stat_ssl WHERE pid = pg_backend_pid()"))
        return (row[0] as Int64 == 1, row[1] as String)
    }

    @Test func requireAndVerifyFullConnectOverTLSAndAStoreRunsThere() async throws {
        let cluster = try PostgresTLSCluster()
        defer { cluster.stop() }

        let (plain, required) = try connect(cluster.url(query: "sslmode=require"))
        let state = try tls(of: required)
        plain.close(required)
        plain.shutdown()
        #expect(state.on, "sslmode=require: the server saw no TLS")
        #expect(state.version == "TLSv1.3", "\(state.version)")

        let verified = cluster.url(query: "sslmode=verify-full&sslrootcert=\(cluster.caFile)")
        let (connector, session) = try connect(verified)
        #expect(try tls(of: session).on)
        connector.close(session)
        connector.shutdown()

        // A whole store (writer, reader pool, listening connection) on the verified URL.
        let store = try NodeStore(location: .postgres(try PostgresLocation(url: verified)))
        defer { try? store.close() }
        try await store.write { tx in try tx.setSetting("tls", [1, 2, 3]) }
        #expect(try await store.read { r in try r.setting("tls") } == [1, 2, 3])
        let readerOnTLS = try await store.read { r in
            try r.db.int64("SELECT CAST(ssl AS INTEGER) FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        }
        #expect(readerOnTLS == 1)
    }

    @Test func aServerCertificateFromAnotherCAIsRefused() throws {
        let cluster = try PostgresTLSCluster()
        defer { cluster.stop() }
        do {
            _ = try connect(cluster.url(query: "sslmode=verify-ca&sslrootcert=\(cluster.otherCAFile)"))
            Issue.record("connected although the server's certificate is not signed by the CA named")
        } catch {
            #expect(error.code == .databaseUnavailable)
            #expect(error.reason.contains("certificate"), "\(error.reason)")
        }
    }

    @Test func withoutTLSTheServerRefusesAndTheReasonSaysSo() throws {
        let cluster = try PostgresTLSCluster()
        defer { cluster.stop() }
        do {
            _ = try connect(cluster.url(query: "sslmode=disable"))
            Issue.record("connected without TLS to a server that accepts TLS only")
        } catch {
            // pg_hba.conf's `hostnossl ... reject`: refused by the server, not unreachable.
            #expect(error.code == .authenticationFailed, "\(error)")
            #expect(error.reason.contains("no encryption") || error.reason.contains("pg_hba.conf"), "\(error.reason)")
        }
        #expect(throws: StorageError.self) {
            try PostgresLocation(url: cluster.url(query: "sslmode=require&sslrootcert="))
        }
    }
}
