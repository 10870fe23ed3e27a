import Foundation
import LaminaProcess

#if canImport(Glibc)
    import Glibc
#endif

/// A PostgreSQL server for the tests: `LAMINA_TEST_POSTGRES` (a URL whose user may create
/// databases) when set; else one throwaway cluster per test process, made on first use with
/// `initdb` in a temporary directory (as the `postgres` user when running as root: initdb
/// refuses root), listening only on a unix socket there, and stopped when the process exits.
/// Each store gets a database of its own. When PostgreSQL is not installed, `newDatabase()`
/// throws with a message saying so: the tests that need it fail, they are not skipped.
/// Shared by the test targets (it needs nothing of the node: databases are made with `createdb`).
public enum PostgresTestCluster {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// A server: how to reach it and its maintenance database.
    public struct Server: Sendable {
        public var user: String
        public var password: String?
        public var host: String
        public var port: Int
        public var database: String
        /// The unix socket directory (the throwaway cluster listens only there).
        public var socketDirectory: String?

        /// `postgres://user[:password]@host:port/database[?host=socketDirectory]`.
        public func url(database name: String? = nil) -> String {
            let credentials = password.map { "\(user):\($0)" } ?? user
            let socket = socketDirectory.map { "?host=\($0)" } ?? ""
            return "postgres://\(credentials)@\(host):\(port)/\(name ?? database)\(socket)"
        }
    }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var started: Result<Server, Failure>?
    nonisolated(unsafe) private static var dataDirectory: String?
    nonisolated(unsafe) private static var pgCtl: String?
    nonisolated(unsafe) static var runAs: String?

    /// A new, empty database on the test server; returns its URL.
    public static func newDatabase() throws -> String {
        let server = try self.server()
        let name = "lamina_test_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16))"
        let createdb = (try? binDirectory()).map { $0 + "/createdb" } ?? "createdb"
        var environment = ProcessInfo.processInfo.environment
        if let password = server.password { environment["PGPASSWORD"] = password }
        try run(
            createdb, ["-h", server.socketDirectory ?? server.host, "-p", "\(server.port)", "-U", server.user, name],
            log: nil, asServerOwner: false, environment: environment)
        return server.url(database: name)
    }

    /// The server (its maintenance database), starting the cluster on first use.
    public static func server() throws -> Server {
        lock.lock()
        defer { lock.unlock() }
        if let started { return try started.get() }
        let result: Result<Server, Failure>
        if let url = ProcessInfo.processInfo.environment["LAMINA_TEST_POSTGRES"], !url.isEmpty {
            if let parts = URLComponents(string: url), let user = parts.user, parts.path.count > 1 {
                result = .success(
                    Server(
                        user: user, password: parts.password, host: parts.host ?? "127.0.0.1", port: parts.port ?? 5432,
                        database: String(parts.path.dropFirst()),
                        socketDirectory: parts.queryItems?.first { $0.name == "host" }?.value))
            } else {
                result = .failure(
                    Failure(description: "LAMINA_TEST_POSTGRES is not postgres://user@host:port/database: \(url)"))
            }
        } else {
            result = Result { () throws(Failure) in try startCluster() }
        }
        started = result
        return try result.get()
    }

    static func binDirectory() throws(Failure) -> String {
        let fm = FileManager.default
        let root = "/usr/lib/postgresql"
        let versions = ((try? fm.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        for version in versions.reversed() where fm.isExecutableFile(atPath: "\(root)/\(version)/bin/initdb") {
            return "\(root)/\(version)/bin"
        }
        for dir in ["/usr/local/pgsql/bin", "/usr/local/bin", "/usr/bin"]
        where fm.isExecutableFile(atPath: "\(dir)/initdb") {
            return dir
        }
        throw Failure(
            description: """
                PostgreSQL is not installed: no initdb under /usr/lib/postgresql/*/bin (install the Debian package \
                'postgresql', or set LAMINA_TEST_POSTGRES=postgres://user@host:port/db to use a running server)
                """)
    }

    private static func startCluster() throws(Failure) -> Server {
        let bin = try binDirectory()
        reapClusters(of: bin)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "lamina-pg-\(getpid())-\(UUID().uuidString.prefix(8))"
        ).path
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw Failure(description: "cannot create \(directory): \(error)")
        }
        let isRoot = geteuid() == 0
        if isRoot {
            // initdb and postgres refuse to run as root: the cluster belongs to `postgres`.
            guard let user = getpwnam("postgres") else {
                throw Failure(
                    description: "running as root, and there is no 'postgres' user to run the test cluster as")
            }
            _ = chown(directory, user.pointee.pw_uid, user.pointee.pw_gid)
            runAs = "postgres"
        }
        let data = "\(directory)/data"
        try run(
            bin + "/initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--locale=C", "-E", "UTF8", "--no-sync"],
            log: "\(directory)/initdb.log", asServerOwner: true)
        let port = 5432
        try run(
            bin + "/pg_ctl",
            [
                "-D", data, "-l", "\(directory)/server.log", "-w", "-t", "60",
                "-o", "-k \(directory) -p \(port) -c listen_addresses= -c fsync=off -c max_connections=200", "start",
            ], log: "\(directory)/pg_ctl.log", asServerOwner: true)
        dataDirectory = data
        pgCtl = bin + "/pg_ctl"
        atexit {
            PostgresTestCluster.stop()
        }
        return Server(
            user: "postgres", password: nil, host: "localhost", port: port, database: "postgres",
            socketDirectory: directory)
    }

    /// Stops the clusters that test processes no longer running left behind (a process that
    /// crashed, or ended without running its exit handlers).
    private static func reapClusters(of bin: String) {
        let temporary = FileManager.default.temporaryDirectory
        let names = (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? []
        for name in names where name.hasPrefix("lamina-pg-") {
            let parts = name.split(separator: "-")
            guard parts.count == 4, let pid = Int32(parts[2]), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else {
                continue
            }
            let directory = temporary.appendingPathComponent(name).path
            if geteuid() == 0 { runAs = "postgres" }
            try? run(
                bin + "/pg_ctl", ["-D", "\(directory)/data", "-m", "immediate", "-w", "stop"], log: nil,
                asServerOwner: true)
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// Stops the throwaway cluster (at exit).
    public static func stop() {
        guard let pgCtl, let dataDirectory else { return }
        try? run(pgCtl, ["-D", dataDirectory, "-m", "immediate", "-w", "stop"], log: nil, asServerOwner: true)
        try? FileManager.default.removeItem(atPath: (dataDirectory as NSString).deletingLastPathComponent)
        self.dataDirectory = nil
    }

    /// Runs a PostgreSQL tool to its end (as the cluster's owner `runAs` when asked and set);
    /// throws with its output on failure.
    static func run(
        _ tool: String, _ arguments: [String], log: String?, asServerOwner: Bool,
        environment: [String: String]? = nil
    ) throws(Failure) {
        let child = ChildProcess()
        child.environment = environment
        let log =
            log
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("lamina-pg-tool-\(UUID().uuidString).log")
            .path
        defer { if !log.contains("/lamina-pg-\(getpid())") { try? FileManager.default.removeItem(atPath: log) } }
        if asServerOwner, let runAs {
            child.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            child.arguments = ["-u", runAs, "--", tool] + arguments
        } else {
            child.executableURL = URL(fileURLWithPath: tool)
            child.arguments = arguments
        }
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = FileHandle(forWritingAtPath: log)
        child.standardOutput = handle ?? FileHandle.nullDevice
        child.standardError = handle ?? FileHandle.nullDevice
        do { try child.run() } catch {
            throw Failure(description: "cannot run \(tool): \(error)")
        }
        child.waitUntilExit()
        try? handle?.close()
        guard child.terminationStatus == 0 else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw Failure(
                description:
                    "\(tool) \(arguments.joined(separator: " ")) failed (\(child.terminationStatus)): \(text.suffix(2_000))"
            )
        }
    }
}
