import Foundation
import LaminaProcess

#if canImport(Glibc)
    import Glibc
#endif

/// A throwaway PostgreSQL cluster that accepts TLS connections only, for the tests of the store's
/// `sslmode`: its own CA and a server certificate for `localhost` and `127.0.0.1` (made with the
/// `openssl` tool), `ssl = on`, listening on a free loopback TCP port, and a `pg_hba.conf` that
/// rejects connections without encryption. Each call makes a new cluster; `stop()` removes it.
public final class PostgresTLSCluster: @unchecked Sendable {
    /// The cluster's directory (data, certificates, logs).
    public let directory: String
    /// The loopback port it listens on.
    public let port: Int
    /// The CA that signed the server's certificate (PEM).
    public let caFile: String
    /// Another CA, which signed nothing the server holds (PEM): verification against it fails.
    public let otherCAFile: String
    private let pgCtl: String
    private var stopped = false

    /// Makes and starts the cluster.
    public init() throws(PostgresTestCluster.Failure) {
        let bin = try PostgresTestCluster.binDirectory()
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "lamina-pgtls-\(getpid())-\(UUID().uuidString.prefix(8))"
            ).path
        pgCtl = bin + "/pg_ctl"
        caFile = directory + "/ca.pem"
        otherCAFile = directory + "/other-ca.pem"
        port = Self.freePort()
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw PostgresTestCluster.Failure(description: "cannot create \(directory): \(error)")
        }
        if geteuid() == 0 {
            guard let user = getpwnam("postgres") else {
                throw PostgresTestCluster.Failure(
                    description: "running as root, and there is no 'postgres' user to run the test cluster as")
            }
            _ = chown(directory, user.pointee.pw_uid, user.pointee.pw_gid)
            PostgresTestCluster.runAs = "postgres"
        }
        try makeCertificates()
        let data = directory + "/data"
        try PostgresTestCluster.run(
            bin + "/initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--locale=C", "-E", "UTF8", "--no-sync"],
            log: directory + "/initdb.log", asServerOwner: true)
        // TLS connections from loopback only; anything unencrypted is refused by name.
        let hba = """
            local all all trust
            hostssl all all 127.0.0.1/32 trust
            hostnossl all all 127.0.0.1/32 reject

            """
        do {
            try hba.write(toFile: data + "/pg_hba.conf", atomically: false, encoding: .utf8)
        } catch {
            throw PostgresTestCluster.Failure(description: "cannot write pg_hba.conf: \(error)")
        }
        let options = [
            "-k \(directory) -p \(port) -c listen_addresses=127.0.0.1 -c fsync=off",
            "-c ssl=on -c ssl_cert_file=\(directory)/server.pem -c ssl_key_file=\(directory)/server.key",
        ].joined(separator: " ")
        try PostgresTestCluster.run(
            pgCtl, ["-D", data, "-l", directory + "/server.log", "-w", "-t", "60", "-o", options, "start"],
            log: directory + "/pg_ctl.log", asServerOwner: true)
    }

    deinit { stop() }

    /// `postgres://postgres@127.0.0.1:<port>/postgres` with the given query (e.g. `sslmode=require`).
    public func url(query: String) -> String {
        "postgres://postgres@127.0.0.1:\(port)/postgres" + (query.isEmpty ? "" : "?" + query)
    }

    /// Stops the server and removes its directory (once).
    public func stop() {
        guard !stopped else { return }
        stopped = true
        try? PostgresTestCluster.run(
            pgCtl, ["-D", directory + "/data", "-m", "immediate", "-w", "stop"], log: nil, asServerOwner: true)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Two CAs and a server certificate signed by the first, for `localhost` and `127.0.0.1`.
    /// The server's key belongs to the server's user and is readable by it only (PostgreSQL refuses
    /// a key others can read).
    private func makeCertificates() throws(PostgresTestCluster.Failure) {
        let d = directory
        let steps: [[String]] = [
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                "-subj", "/CN=lamina test CA", "-keyout", "\(d)/ca.key", "-out", "\(d)/ca.pem",
            ],
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                "-subj", "/CN=another CA", "-keyout", "\(d)/other-ca.key", "-out", "\(d)/other-ca.pem",
            ],
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=localhost",
                "-keyout", "\(d)/server.key", "-out", "\(d)/server.csr",
            ],
            [
                "x509", "-req", "-in", "\(d)/server.csr", "-CA", "\(d)/ca.pem", "-CAkey", "\(d)/ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", "\(d)/san.ext", "-out", "\(d)/server.pem",
            ],
        ]
        do {
            try "subjectAltName = DNS:localhost, IP:127.0.0.1\n".write(
                toFile: "\(d)/san.ext", atomically: false, encoding: .utf8)
        } catch {
            throw PostgresTestCluster.Failure(description: "cannot write \(d)/san.ext: \(error)")
        }
        let openssl =
            ["/usr/bin/openssl", "/usr/local/bin/openssl"].first { FileManager.default.isExecutableFile(atPath: $0) }
            ?? "openssl"
        for step in steps {
            try PostgresTestCluster.run(openssl, step, log: nil, asServerOwner: false)
        }
        if geteuid() == 0, let user = getpwnam("postgres") {
            for file in ["server.key", "server.pem", "ca.pem", "other-ca.pem"] {
                _ = chown("\(d)/\(file)", user.pointee.pw_uid, user.pointee.pw_gid)
            }
        }
        _ = chmod("\(d)/server.key", 0o600)
        for file in ["server.pem", "ca.pem", "other-ca.pem"] { _ = chmod("\(d)/\(file)", 0o644) }
    }

    /// A loopback TCP port free now (bound to port 0, read back, closed).
    private static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        return bound ? Int(UInt16(bigEndian: address.sin_port)) : 55_433
    }
}
