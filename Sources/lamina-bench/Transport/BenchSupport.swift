import ArgumentParser
import Foundation
import LaminaProcess
import LaminaTransport

#if canImport(Glibc)
    import Glibc
#endif

/// Helpers shared by the transport benchmarks: temp certificates, child processes, heap figures.
enum BenchSupport {
    /// This run's scratch directory (node stores, certificates, configurations), removed
    /// when the benchmark exits.
    static func temporaryDirectory() throws -> String { scratch }

    private static let scratch = ScratchDirectory.make("lamina-bench").path

    /// A fresh self-signed ECDSA P-256 certificate for localhost/127.0.0.1 in `directory`.
    static func certificate(in directory: String) throws -> (cert: String, key: String) {
        let cert = directory + "/cert.pem"
        let key = directory + "/key.pem"
        try DevelopmentCertificate.generate(certificatePath: cert, privateKeyPath: key)
        return (cert, key)
    }

    /// Resident set size from /proc/<pid>/statm (this process by default).
    static func residentBytes(pid: Int32? = nil) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid.map(String.init) ?? "self")/statm", encoding: .utf8)
        else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Of ``residentBytes(pid:)``, the pages backed by files (statm's `shared`: the mapped
    /// store's pages, which the kernel may reclaim) rather than the heap.
    static func residentFileBytes(pid: Int32? = nil) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid.map(String.init) ?? "self")/statm", encoding: .utf8)
        else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 2, let pages = Int(fields[2]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    static func executable(_ name: String) -> String? {
        for dir in ["/usr/bin", "/usr/sbin", "/usr/local/bin"]
        where FileManager.default.isExecutableFile(atPath: dir + "/" + name) {
            return dir + "/" + name
        }
        return nil
    }

    /// Runs a program to completion and returns its standard output.
    static func run(_ program: String, _ arguments: [String]) throws -> String {
        guard let path = executable(program) else { throw ValidationError("\(program) is not installed") }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = PipeReading.toEnd(pipe.fileHandleForReading)
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// Starts a program in the background (output discarded).
    static func start(_ path: String, _ arguments: [String]) throws -> ChildProcess {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Whether `pid` has exited (gone, or a zombie not yet reaped). Foundation's `isRunning`
    /// only changes once Foundation's own monitor has seen the exit.
    static func exited(_ pid: Int32) -> Bool {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return true }
        let rest = text[text.index(after: close)...]
        return rest.hasPrefix(" Z") || rest.hasPrefix(" X")
    }

    /// Sends `signal`, waits up to `grace` seconds for the exit, then SIGKILL (a server that
    /// blocks the signal, as nghttpd blocks SIGTERM, cannot hang the run).
    static func stop(_ process: ChildProcess, signal: Int32 = SIGTERM, grace: Double = 5) {
        guard process.isRunning else { return }
        let pid = process.processIdentifier
        kill(pid, signal)
        let deadline = Date().addingTimeInterval(grace)
        while !exited(pid), Date() < deadline { usleep(20_000) }
        if !exited(pid) { kill(pid, SIGKILL) }
        process.waitUntilExit()
    }

    /// utime + stime of `pid` in seconds, from /proc/<pid>/stat (clock ticks / _SC_CLK_TCK).
    static func cpuSeconds(_ pid: Int32, thread: Int32? = nil) -> Double {
        let path = thread.map { "/proc/\(pid)/task/\($0)/stat" } ?? "/proc/\(pid)/stat"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the command: state is field 3; utime and stime are fields 14 and 15.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The first three fields of /proc/loadavg.
    static func loadAverage() -> String {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "?" }
        return text.split(separator: " ").prefix(3).joined(separator: "/")
    }

    /// Polls by connecting until 127.0.0.1:`port` accepts.
    static func waitForPort(_ port: Int, timeout: Double = 20) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = UInt16(port).bigEndian
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            close(fd)
            if result == 0 { return }
            usleep(20_000)
        }
        throw ValidationError("nothing listens on \(port)")
    }

    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Raises the open-file soft limit to the hard limit.
    static func raiseFileLimit() {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}
