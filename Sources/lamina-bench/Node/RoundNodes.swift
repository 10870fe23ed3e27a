import Foundation
import LaminaLocalNode
import LaminaNode

#if canImport(Glibc)
    import Glibc
    import LaminaStore
#endif

/// The `lamina-node` processes of one write-path round: one node (SQLite in its data
/// directory, or the PostgreSQL database of `--store`, emptied first), or with `--nodes N`
/// (`--second-node`: 2) N nodes on that one database, each trusting the first's dev identity
/// (one token minter for all).
struct RoundNodes {
    let first: NodeProcess
    /// The nodes after the first (`--nodes` − 1 of them).
    let others: [NodeProcess]
    /// The PostgreSQL server's processes (`--database-pid` and its children) at the start.
    private let databaseStart: [Int32: Double]?
    private let databasePid: Int32?
    /// The nodes' group-commit counters at the start (SQLite nodes, which have an admin listener).
    private var commitsStart: StoreCommits?
    /// Each node's threads' CPU at the start.
    private var threadsStart: [[Int32: (role: ThreadRole, seconds: Double)]]?
    /// The PostgreSQL store's URL (`--store`), and its server counters at the start.
    private var store: String?
    private var serverStart: (statements: Int64?, deadlocks: Int64)?

    /// The second node, if there is one: where `rate`'s receivers connect first, and whose
    /// cross-node counters the summary reports.
    var second: NodeProcess? { others.first }
    /// Where the `k`-th receiver connects: the nodes after the first in turn (the first alone
    /// when it is the only one).
    func receiving(_ k: Int) -> NodeProcess { others.isEmpty ? first : others[k % others.count] }
    var all: [NodeProcess] { [first] + others }

    static func start(binary: String, load: WriteLoadOptions, label: String) async throws -> RoundNodes {
        var extra = load.nodeArguments
        if let store = load.store {
            try PostgresMaintenance.emptyDatabase(store)
            extra += ["--store", store]
        }
        let first = try await NodeProcess.start(binary: binary, label: label, admin: true, extraArguments: extra)
        var others: [NodeProcess] = []
        do {
            for n in 1..<load.nodeCount {
                let data = try BenchSupport.temporaryDirectory() + "/\(label)-\(n)-\(UUID().uuidString.prefix(8))"
                try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
                try FileManager.default.copyItem(
                    atPath: URL(fileURLWithPath: first.dataDirectory).appendingPathComponent(
                        NodeBootstrap.Files.devIdentity
                    ).path,
                    toPath: URL(fileURLWithPath: data).appendingPathComponent(NodeBootstrap.Files.devIdentity).path)
                others.append(
                    try await NodeProcess.start(
                        binary: binary, data: data, port: BenchSupport.freePort(),
                        adminPort: BenchSupport.freePort(), extraArguments: extra))
            }
        } catch {
            for node in [first] + others { node.stop() }
            throw error
        }
        var nodes = RoundNodes(first: first, others: others, databaseStart: nil, databasePid: load.databasePid)
        nodes.store = load.store
        return nodes
    }

    /// The round's nodes with the database's CPU counted from now.
    func measuring() -> RoundNodes {
        var nodes = RoundNodes(
            first: first, others: others, databaseStart: databasePid.map(Self.treeCPU), databasePid: databasePid)
        nodes.commitsStart = nodes.commits()
        nodes.threadsStart = nodes.all.map { $0.threadCPU() }
        nodes.store = store
        nodes.serverStart = store.flatMap { try? PostgresMaintenance.counters($0) }
        nodes.crossStart = nodes.crossNodeCounters()
        nodes.outputStart = nodes.transportOutput()
        return nodes
    }

    /// The receiving nodes' `lamina_feed` counters (every node after the first, summed):
    /// notifications, entries and heads received, the announce→receipt lag summed and the
    /// notifications it covers.
    private static let crossNodeMetrics = [
        "lamina_postgres_feed_notifications_received_total", "lamina_postgres_feed_entries_received_total",
        "lamina_postgres_feed_heads_received_total", "lamina_postgres_feed_notification_lag_microseconds_total",
        "lamina_postgres_feed_notifications_timed_total",
    ]
    private var crossStart: [Int]?
    /// Every node's transport output counters at the start (`NodeProcess.transportOutput`).
    private var outputStart: [Int]?

    /// Every node's transport output counters summed (nil if one cannot be read).
    func transportOutput() -> [Int]? {
        var sum = [0, 0, 0, 0]
        for node in all {
            guard let counts = node.transportOutput() else { return nil }
            sum = zip(sum, counts).map { $0 + $1 }
        }
        return sum
    }

    func crossNodeCounters() -> [Int]? {
        guard !others.isEmpty else { return nil }
        var sum = Self.crossNodeMetrics.map { _ in 0 }
        for node in others {
            guard let port = node.adminPort,
                let body = try? AdminGet.body(port: port, path: "/metrics", timeoutSeconds: 10)
            else { return nil }
            sum = zip(sum, Self.crossNodeMetrics).map { $0 + (AdminGet.counter($1, in: body) ?? 0) }
        }
        return sum
    }

    /// Every node's group-commit counters summed (nil if one cannot be read).
    func commits() -> StoreCommits? {
        var sum = StoreCommits(transactions: 0, commands: 0)
        for node in all {
            guard let c = node.commits() else { return nil }
            sum = sum + c
        }
        return sum
    }

    /// utime + stime of every node so far, seconds.
    func cpuSeconds() -> Double { all.map { $0.cpuSeconds() }.reduce(0, +) }

    /// The database server's CPU since `measuring()` (nil without `--database-pid`): its
    /// processes then and now (a backend that ended meanwhile is not counted).
    func databaseCPUSeconds() -> Double? {
        guard let databasePid, let databaseStart else { return nil }
        return Self.treeCPU(databasePid).reduce(0) { $0 + $1.value - (databaseStart[$1.key] ?? 0) }
    }

    func stop() { for node in all { node.stop() } }

    /// CPU seconds of `pid` and each of its children (PostgreSQL's backends are the postmaster's children).
    static func treeCPU(_ pid: Int32) -> [Int32: Double] {
        var out: [Int32: Double] = [pid: BenchSupport.cpuSeconds(pid)]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let child = Int32(entry),
                let text = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = text.lastIndex(of: ")")
            else { continue }
            let fields = text[text.index(after: close)...].split(separator: " ")
            // After the command: state, then the parent's pid.
            guard fields.count > 1, Int32(fields[1]) == pid else { continue }
            out[child] = BenchSupport.cpuSeconds(child)
        }
        return out
    }

    /// The fields the summary lines add: the node count; the node CPU per `unit` by thread role
    /// since `measuring()` (`cpu_us_per_<unit>_by_thread event_loops=… writer=… completions=…
    /// other=…`: each thread alive at the end, from its first reading or its start); the group
    /// commits and the commands per commit (`commits`, `commands_per_commit`: every group commit
    /// is one synced transaction; `inline_commits`: those an event loop ran itself); and, with
    /// `--database-pid`, the database's CPU.
    func fields(per count: Int, unit: String) -> String {
        var line = " nodes=\(all.count)"
        if let start = threadsStart {
            var used: [ThreadRole: Double] = [:]
            for (node, first) in zip(all, start) {
                used.merge(ThreadRole.used(from: first, to: node.threadCPU()), uniquingKeysWith: +)
            }
            let per = 1e6 / Double(max(count, 1))
            line += String(
                format: " cpu_us_per_%@_by_thread event_loops=%.1f writer=%.1f completions=%.1f other=%.1f", unit,
                (used[.eventLoop] ?? 0) * per, (used[.writer] ?? 0) * per, (used[.completions] ?? 0) * per,
                (used[.other] ?? 0) * per)
        }
        if let start = commitsStart, let now = commits() {
            let window = now - start
            line += String(
                format: " commits=%d commands_per_commit=%.2f inline_commits=%d", window.transactions,
                Double(window.commands) / Double(max(window.transactions, 1)), window.inline)
        }
        // What the event loops wrote per unit: socket writes, TLS records, HTTP/2 frames, flushes.
        if let start = outputStart, let now = transportOutput() {
            let d = zip(now, start).map { Double($0 - $1) / Double(max(count, 1)) }
            line += String(
                format: " per_%@ socket_writes=%.3f tls_records=%.3f http2_frames=%.3f connection_flushes=%.3f", unit,
                d[0], d[1], d[2], d[3])
        }
        // Several nodes: what reached the nodes after the first through lamina_feed over the window.
        if let start = crossStart, let now = crossNodeCounters() {
            let d = zip(now, start).map { $0 - $1 }
            line += String(
                format: " cross_notifications=%d cross_entries=%d cross_heads=%d cross_notify_lag_ms_mean=%.2f", d[0],
                d[1], d[2], Double(d[3]) / Double(max(d[4], 1)) / 1000)
        }
        if let db = databaseCPUSeconds() {
            line += String(format: " db_cpu_s=%.3f db_cpu_us_per_%@=%.1f", db, unit, db / Double(max(count, 1)) * 1e6)
        }
        // PostgreSQL: statements per unit (pg_stat_statements, when the server preloads it) and
        // the deadlocks it detected meanwhile.
        if let store, let start = serverStart, let now = try? PostgresMaintenance.counters(store) {
            if let s0 = start.statements, let s1 = now.statements {
                line += String(
                    format: " db_statements=%lld db_statements_per_%@=%.3f", s1 - s0, unit,
                    Double(s1 - s0) / Double(max(count, 1)))
            }
            line += " db_deadlocks=\(now.deadlocks - start.deadlocks)"
        }
        return line
    }
}
