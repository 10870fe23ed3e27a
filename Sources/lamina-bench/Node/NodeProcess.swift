import ArgumentParser
import Foundation
import LaminaLocalNode
import LaminaNode
import LaminaProcess
import LaminaStore
import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#endif

/// A `lamina-node` child process under load: its own process (so the loader's CPU is never
/// counted as the node's), a fresh data directory, a free port on 127.0.0.1, an admin
/// listener only when asked (its `/metrics`). Zero-config: the node creates its TLS
/// certificate and dev identity key in the data directory, which the loader reads to trust it
/// and mint tokens.
final class NodeProcess: @unchecked Sendable {
    let process: ChildProcess
    let dataDirectory: String
    let port: Int
    /// The admin listener's port, if the node has one.
    let adminPort: Int?
    var url: String { "https://127.0.0.1:\(port)" }
    var pid: Int32 { process.processIdentifier }
    /// The node's certificate: the loader's CA file.
    var caFile: String {
        URL(fileURLWithPath: dataDirectory).appendingPathComponent(NodeBootstrap.Files.certificate).path
    }
    let dev: DevIdentityProvider

    private init(process: ChildProcess, dataDirectory: String, port: Int, adminPort: Int?) throws {
        self.process = process
        self.dataDirectory = dataDirectory
        self.port = port
        self.adminPort = adminPort
        let devDirectory = URL(fileURLWithPath: dataDirectory).appendingPathComponent(NodeBootstrap.Files.devIdentity)
        self.dev = try DevIdentityProvider.loadOrCreate(in: devDirectory)
    }

    /// `--node-binary`, else `lamina-node` next to this executable (same build directory).
    static func binary(_ explicit: String?) throws -> String {
        let path =
            explicit
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("lamina-node").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw ValidationError(
                "no lamina-node at \(path): swift build -c release --product lamina-node, or --node-binary PATH")
        }
        return path
    }

    /// Starts a node on a fresh temp data directory and a free port (and with `admin`, an
    /// admin listener on another); returns once it serves.
    static func start(binary: String, label: String, admin: Bool = false, extraArguments: [String] = []) async throws
        -> NodeProcess
    {
        let data = try BenchSupport.temporaryDirectory() + "/\(label)-\(UUID().uuidString.prefix(8))"
        return try await start(
            binary: binary, data: data, port: BenchSupport.freePort(),
            adminPort: admin ? BenchSupport.freePort() : nil, extraArguments: extraArguments)
    }

    /// Starts a node on `data` (kept from an earlier run, or new) and `port`, with an admin
    /// listener on 127.0.0.1:`adminPort` if given. Returns once it serves.
    static func start(binary: String, data: String, port: Int, adminPort: Int? = nil, extraArguments: [String] = [])
        async throws -> NodeProcess
    {
        let admin = adminPort.map { "127.0.0.1:\($0)" } ?? "off"
        let process = try await launch(binary, data: data, port: port, admin: admin, extraArguments: extraArguments)
        do {
            return try NodeProcess(process: process, dataDirectory: data, port: port, adminPort: adminPort)
        } catch {
            BenchSupport.stop(process)
            throw error
        }
    }

    /// Launches `lamina-node` on `data` and `port` and waits (at most `timeout` seconds) for
    /// its "is serving" line.
    static func launch(
        _ binary: String, data: String, port: Int, admin: String = "off", timeout: Double = 60,
        extraArguments: [String] = []
    ) async throws -> ChildProcess {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments =
            ["--data-dir", data, "--listen", "127.0.0.1:\(port)", "--admin", admin, "--log-level", "warning"]
            + extraArguments
            + (ProcessInfo.processInfo.environment["LAMINA_BENCH_NODE_ARGS"] ?? "").split(separator: " ").map(
                String.init)
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        let (serving, continuation) = AsyncStream.makeStream(of: Bool.self)
        let text = NIOLockedValueBox("")
        try process.run()
        let reader = pipe.fileHandleForReading
        Thread.detachNewThread {  // a plain thread reading to EOF (no dispatch source)
            while true {
                let chunk = PipeReading.next(reader)
                if chunk.isEmpty { break }
                let all = text.withLockedValue {
                    $0 += String(decoding: chunk, as: UTF8.self)
                    return $0
                }
                if all.contains("is serving") { continuation.yield(true) }
            }
            continuation.yield(false)
        }
        let timer = Task {
            try await Task.sleep(for: .seconds(timeout))
            continuation.yield(false)
        }
        defer { timer.cancel() }
        for await ok in serving {
            guard ok else {
                BenchSupport.stop(process)
                throw BenchFailure("lamina-node did not report serving within \(Int(timeout)) s (or exited)")
            }
            break
        }
        return process
    }

    /// utime + stime of the node so far, seconds.
    func cpuSeconds() -> Double { BenchSupport.cpuSeconds(pid) }

    /// utime + stime so far of each of the node's threads alive now, seconds, with its role.
    func threadCPU() -> [Int32: (role: ThreadRole, seconds: Double)] {
        var out: [Int32: (role: ThreadRole, seconds: Double)] = [:]
        let tasks = "/proc/\(pid)/task"
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: tasks)) ?? [] {
            guard let tid = Int32(entry),
                let comm = try? String(contentsOfFile: "\(tasks)/\(entry)/comm", encoding: .utf8)
            else { continue }
            out[tid] = (
                ThreadRole(comm: comm.trimmingCharacters(in: .newlines)), BenchSupport.cpuSeconds(pid, thread: tid)
            )
        }
        return out
    }

    /// The store's group commits and the commands they carried so far, from the admin
    /// port's `/metrics` (nil without an admin listener, or if it cannot be read).
    func commits() -> StoreCommits? {
        guard let adminPort, let body = try? AdminGet.body(port: adminPort, path: "/metrics", timeoutSeconds: 10),
            let transactions = AdminGet.counter("lamina_storage_transactions_total", in: body),
            let commands = AdminGet.counter("lamina_storage_commands_committed_total", in: body)
        else { return nil }
        // A node from before inline commits has no such counter: none.
        let inline = AdminGet.counter("lamina_storage_inline_commits_total", in: body) ?? 0
        return StoreCommits(transactions: transactions, commands: commands, inline: inline)
    }

    /// The transport's output counters so far (`lamina_transport_*` on the admin port's
    /// `/metrics`: socket writes, TLS records, HTTP/2 frames, connection flushes); nil when
    /// the node has no admin listener or does not count them.
    func transportOutput() -> [Int]? {
        guard let adminPort, let body = try? AdminGet.body(port: adminPort, path: "/metrics", timeoutSeconds: 10)
        else { return nil }
        let names = ["socket_writes", "tls_records", "http2_frames", "connection_flushes"]
        let values = names.compactMap { AdminGet.counter("lamina_transport_\($0)_total", in: body) }
        return values.count == names.count ? values : nil
    }

    /// SIGTERM, then SIGKILL if it has not exited after `grace` seconds; removes the data
    /// directory unless `keepData`.
    func stop(grace: Double = 10, keepData: Bool = false) {
        BenchSupport.stop(process, signal: SIGTERM, grace: grace)
        if !keepData { try? FileManager.default.removeItem(atPath: dataDirectory) }
    }
}

/// A node's group-commit counters (`lamina_storage_transactions_total`,
/// `lamina_storage_commands_committed_total`, `lamina_storage_inline_commits_total`).
struct StoreCommits {
    var transactions: Int
    var commands: Int
    /// Of `transactions`, those an event loop committed itself.
    var inline: Int = 0

    static func - (a: StoreCommits, b: StoreCommits) -> StoreCommits {
        StoreCommits(
            transactions: a.transactions - b.transactions, commands: a.commands - b.commands,
            inline: a.inline - b.inline)
    }

    static func + (a: StoreCommits, b: StoreCommits) -> StoreCommits {
        StoreCommits(
            transactions: a.transactions + b.transactions, commands: a.commands + b.commands,
            inline: a.inline + b.inline)
    }
}

/// What a node's thread does, from its name: an event loop (`NIO-ELT-…`), the storage writer
/// or completion thread (``StorageThreadName``), or anything else.
enum ThreadRole {
    case eventLoop, writer, completions, other

    init(comm: String) {
        switch comm {
        case let name where name.hasPrefix("NIO-ELT-"): self = .eventLoop
        case StorageThreadName.writer: self = .writer
        case StorageThreadName.completions: self = .completions
        default: self = .other
        }
    }

    /// CPU seconds by role from `start` to `end` (two readings of one process): each thread
    /// alive at the end, from its first reading (or its start if it began in between).
    static func used(
        from start: [Int32: (role: ThreadRole, seconds: Double)],
        to end: [Int32: (role: ThreadRole, seconds: Double)]
    ) -> [ThreadRole: Double] {
        var out: [ThreadRole: Double] = [:]
        for (tid, now) in end { out[now.role, default: 0] += now.seconds - (start[tid]?.seconds ?? 0) }
        return out
    }
}
