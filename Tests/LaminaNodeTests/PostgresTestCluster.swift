import Foundation
import LaminaProcess
@testable import LaminaNode

#if canImport(Glibc)
import Glibc
#endif

/// A PostgreSQL server for the tests: `LAMINA_TEST_POSTGRES` (a URL whose user may create
/// databases) when set; else one throwaway cluster per test process, made on first use with
/// `initdb` in a temporary directory (as the `postgres` user when running as root: initdb
/// refuses root), listening only on a unix socket there, and stopped when the process exits.
/// Each store gets a database of its own. When PostgreSQL is not installed, `newDatabase()`
/// throws with a message saying so: the tests that need it fail, they are not skipped.
enum PostgresTestCluster {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var started: Result<PostgresLocation, Failure>?
    nonisolated(unsafe) private static var dataDirectory: String?
    nonisolated(unsafe) private static var pgCtl: String?
    nonisolated(unsafe) private static var runAs: String?

    /// A new, empty database on the test server.
    static func newDatabase() throws -> PostgresLocation {
        let server = try self.server()
        let name = "lamina_test_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16))"
        var admin = server
        admin.database = server.database
        let connector = PostgresConnector(location: admin, syncsCommits: false, reconnectWindow: .seconds(5))
        defer { connector.shutdown() }
        let session = try connector.connectWithBackoff()
        defer { connector.close(session) }
        try session.run("CREATE DATABASE \(name)")
        var location = server
        location.database = name
        return location
    }

    /// The server's location (its maintenance database), starting the cluster on first use.
    static func server() throws -> PostgresLocation {
        lock.lock()
        defer { lock.unlock() }
        if let started { return try started.get() }
        let result: Result<PostgresLocation, Failure>
        if let url = ProcessInfo.processInfo.environment["LAMINA_TEST_POSTGRES"], !url.isEmpty {
            do { result = .success(try PostgresLocation(url: url)) } catch {
                result = .failure(Failure(description: "LAMINA_TEST_POSTGRES is not a PostgreSQL URL: \(error.reason)"))
            }
        } else {
            result = Result { () throws(Failure) in try startCluster() }
        }
        started = result
        return try result.get()
    }

    private static func binDirectory() throws(Failure) -> String {
        let fm = FileManager.default
        let root = "/usr/lib/postgresql"
        let versions = ((try? fm.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        for version in versions.reversed() where fm.isExecutableFile(atPath: "\(root)/\(version)/bin/initdb") {
            return "\(root)/\(version)/bin"
        }
        for dir in ["/usr/local/pgsql/bin", "/usr/local/bin", "/usr/bin"] where fm.isExecutableFile(atPath: "\(dir)/initdb") {
            return dir
        }
        throw Failure(description: """
            PostgreSQL is not installed: no initdb under /usr/lib/postgresql/*/bin (install the Debian package \
            'postgresql', or set LAMINA_TEST_POSTGRES=postgres://user@host:port/db to use a running server)
            """)
    }

    private static func startCluster() throws(Failure) -> PostgresLocation {
        let bin = try binDirectory()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lamina-pg-\(getpid())-\(UUID().uuidString.prefix(8))").path
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw Failure(description: "cannot create \(directory): \(error)")
        }
        let isRoot = geteuid() == 0
        if isRoot {
            // initdb and postgres refuse to run as root: the cluster belongs to `postgres`.
            guard let user = getpwnam("postgres") else {
                throw Failure(description: "running as root, and there is no 'postgres' user to run the test cluster as")
            }
            _ = chown(directory, user.pointee.pw_uid, user.pointee.pw_gid)
            runAs = "postgres"
        }
        let data = "\(directory)/data"
        try run(bin + "/initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--locale=C", "-E", "UTF8", "--no-sync"], log: "\(directory)/initdb.log")
        let port = 5432
        try run(bin + "/pg_ctl", [
            "-D", data, "-l", "\(directory)/server.log", "-w", "-t", "60",
            "-o", "-k \(directory) -p \(port) -c listen_addresses= -c fsync=off -c max_connections=200", "start",
        ], log: "\(directory)/pg_ctl.log")
        dataDirectory = data
        pgCtl = bin + "/pg_ctl"
        atexit {
            PostgresTestCluster.stop()
        }
        return PostgresLocation(user: "postgres", host: "localhost", port: port, database: "postgres", socketDirectory: directory)
    }

    /// Stops the throwaway cluster (at exit).
    static func stop() {
        guard let pgCtl, let dataDirectory else { return }
        try? run(pgCtl, ["-D", dataDirectory, "-m", "immediate", "-w", "stop"], log: nil)
        try? FileManager.default.removeItem(atPath: (dataDirectory as NSString).deletingLastPathComponent)
        self.dataDirectory = nil
    }

    /// Runs a PostgreSQL tool to its end (as `runAs` when set); throws with its log on failure.
    private static func run(_ tool: String, _ arguments: [String], log: String?) throws(Failure) {
        let child = ChildProcess()
        if let runAs {
            child.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            child.arguments = ["-u", runAs, "--", tool] + arguments
        } else {
            child.executableURL = URL(fileURLWithPath: tool)
            child.arguments = arguments
        }
        var handle: FileHandle?
        if let log {
            FileManager.default.createFile(atPath: log, contents: nil)
            handle = FileHandle(forWritingAtPath: log)
        }
        child.standardOutput = handle ?? FileHandle.nullDevice
        child.standardError = handle ?? FileHandle.nullDevice
        do { try child.run() } catch {
            throw Failure(description: "cannot run \(tool): \(error)")
        }
        child.waitUntilExit()
        try? handle?.close()
        guard child.terminationStatus == 0 else {
            let text = log.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } ?? ""
            throw Failure(description: "\(tool) \(arguments.joined(separator: " ")) failed (\(child.terminationStatus)): \(text.suffix(2_000))")
        }
    }
}
