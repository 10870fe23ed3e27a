import ArgumentParser
import Foundation
import LaminaModel
import NIOCore

/// `lamina-bench ws-rate`: the fixed-rate p2p load of `rate` over the Client API WebSocket
/// and over the sync protocol in one run, and the memory of idle WebSocket sessions.
struct WebSocketRateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ws-rate",
        abstract:
            "Fixed-rate p2p messages over the Client API WebSocket and over the sync protocol, alternating rounds: node CPU per delivered message (ratio WebSocket/sync), send→delivery; then memory per idle WebSocket session.",
        discussion: """
            Each round runs the load twice, each time on a fresh lamina-node process: first over the sync \
            protocol (exactly `lamina-bench rate`'s round: TLS + HTTP/2 sync streams), then over the Client API \
            WebSocket (TLS, HTTP/1.1 Upgrade, subprotocol layer-3.0): P senders s<i> each with one conversation \
            to K receivers r<i>-<k>, every user on its own socket and session (a session token from POST \
            /nonces + POST /sessions with a dev identity token). Senders send `Message.create` requests on the \
            same absolute schedule (R per second in total, S seconds, pipelined), a text of --size bytes \
            carrying its send time, with a time-ordered message id as the SDK's; receivers count the \
            message-created `change` packets. Latency: send → the receiver reading the packet (one monotonic \
            clock, one process); send → response. Node CPU: utime + stime of the node from /proc/PID/stat from \
            the first send until all are delivered and answered; the loader's CPU is never counted.

            Then (unless --idle-sessions 0) on a fresh node: N sessions signed in over REST, a warm-up of \
            sockets opened and closed, the node's resident set (/proc/PID/statm), N WebSockets opened and left \
            idle, --settle-seconds, the resident set again: the growth over N is the memory per idle WebSocket \
            session (TLS connection, WebSocket, node session).
            """)

    @OptionGroup var load: WriteLoadOptions
    @Option(help: "Sender/receiver pairs (senders; conversations).") var pairs = 10
    @Option(help: "Receivers per sender's conversation.") var fanout = 1
    @Option(help: "Messages per second in total.") var rate: Double = 2000
    @Option(help: "Seconds of sending.") var seconds: Double = 10
    @Option(help: "Rounds (each a sync run and a WebSocket run, each on a fresh node).") var rounds = 1
    @Option(help: "Idle WebSocket sessions for the memory figure (0: skip it).") var idleSessions = 1000
    @Option(help: "Seconds to let the node settle before each resident-set reading.") var settleSeconds = 3.0

    func validate() throws {
        guard pairs >= 1, fanout >= 1, rate > 0, seconds > 0, rounds >= 1, idleSessions >= 0 else {
            throw ValidationError("pairs, fanout, rate, seconds, rounds must be positive")
        }
        guard load.size >= 20 else { throw ValidationError("--size must be at least 20 (the send time)") }
        guard load.store == nil, load.nodeCount == 1 else {
            throw ValidationError("ws-rate runs on each node's SQLite store (no --store, no --second-node)")
        }
    }

    func run() async throws {
        BenchSupport.raiseFileLimit()
        let binary = try NodeProcess.binary(load.nodeBinary)
        var sync: [RunSummary] = []
        var webSocket: [RunSummary] = []
        for round in 1...rounds {
            let s = try await RateCommand.laminaRound(
                binary: binary, load: load, pairs: pairs, fanout: fanout, rate: rate, seconds: seconds,
                receipts: false)
            emit("round \(round) sync \(s.line)")
            sync.append(s)
            let w = try await Self.webSocketRound(
                binary: binary, load: load, pairs: pairs, fanout: fanout, rate: rate, seconds: seconds)
            emit("round \(round) websocket \(w.line)")
            webSocket.append(w)
        }
        emit(
            "summary sync: \(spread("cpu_us_per_delivered", sync)); latency \(spread("p50", sync, format: "%.2f")) ms, \(spread("p99", sync, format: "%.2f")) ms"
        )
        emit(
            "summary websocket: \(spread("cpu_us_per_delivered", webSocket)); latency \(spread("p50", webSocket, format: "%.2f")) ms, \(spread("p99", webSocket, format: "%.2f")) ms"
        )
        let ratios = zip(webSocket, sync).compactMap { w, s -> Double? in
            guard let a = w.values["cpu_us_per_delivered"], let b = s.values["cpu_us_per_delivered"], b > 0 else {
                return nil
            }
            return a / b
        }
        emit(
            "summary cpu ratio websocket/sync per round: "
                + ratios.map { String(format: "%.2f", $0) }.joined(separator: " ") + " (target ≤ 1.30)")
        if idleSessions > 0 {
            emit(try await Self.idleSessions(binary: binary, count: idleSessions, settle: settleSeconds))
        }
    }

    /// One WebSocket round on a fresh node: set up (not measured), the schedule, the drain.
    static func webSocketRound(
        binary: String, load: WriteLoadOptions, pairs: Int, fanout: Int, rate: Double, seconds: Double
    ) async throws -> RunSummary {
        let roundNodes = try await RoundNodes.start(binary: binary, load: load, label: "ws-rate")
        defer { roundNodes.stop() }
        let node = roundNodes.first
        let total = Int(rate * seconds)
        let delivery = LoadLatencies(capacity: total * fanout)
        let ackLatency = LoadLatencies(capacity: total)
        let delivered = LoadCounter()
        let acked = LoadCounter()
        let errors = LoadCounter()

        let login = try await ClientAPILogin.open(node)
        var receivers: [WebSocketPeer] = []
        for i in 0..<pairs {
            for k in 0..<fanout {
                receivers.append(
                    try await WebSocketPeer.connect(login, user: try UserID("r\(i)-\(k)")) { sentAt in
                        delivery.record(sentAt: sentAt)
                        delivered.add()
                    })
            }
        }
        var senders: [(peer: WebSocketPeer, conversation: ConversationID)] = []
        for i in 0..<pairs {
            let peer = try await WebSocketPeer.connect(login, user: try UserID("s\(i)"))
            let others = try (0..<fanout).map { try UserID("r\(i)-\($0)") }
            senders.append((peer, try await peer.createConversation(with: others)))
        }
        await login.close()
        let peers = receivers + senders.map(\.peer)
        try await Task.sleep(for: .seconds(1))  // conversation-created changes arrive; as `rate`

        let loadBefore = BenchSupport.loadAverage()
        let nodes = roundNodes.measuring()
        let cpu0 = nodes.cpuSeconds()
        let padding = String(repeating: "x", count: load.size - 20)
        let sending = senders
        let (t0, t1) = await sendOnSchedule(total: total, rate: rate) { j in
            let (peer, conversation) = sending[j % sending.count]
            let sentAt = monotonicNanos()
            peer.sendMessage(String(format: "%020llu", sentAt) + padding, in: conversation).whenComplete { result in
                if case .success(true) = result {
                    ackLatency.record(sentAt: sentAt)
                    acked.add()
                } else {
                    errors.add()
                }
            }
        }
        let failure = await waitUntil(
            deadline: t1 + UInt64(load.drainTimeout * 1e9),
            failure: {
                peers.lazy.compactMap { p in p.failure.withLockedValue { $0 }.map { "\(p.user): \($0)" } }.first
            }
        ) { delivered.current >= total * fanout && acked.current + errors.current >= total }
        let cpu1 = nodes.cpuSeconds()
        let database = nodes.fields(per: delivered.current, unit: "delivered")
        let t2 = monotonicNanos()
        if let failure { throw BenchFailure("ws-rate: a socket failed: \(failure)") }
        let cpu = cpu1 - cpu0
        let d = delivered.current
        var line =
            "lamina websocket rate: pairs=\(pairs) fanout=\(fanout) rate=\(Int(rate)) seconds=\(seconds) size=\(load.size)"
        line +=
            " published=\(total) delivered=\(d) expected=\(total * fanout) acked=\(acked.current) errors=\(errors.current)"
        line += String(format: " achieved_pub_rate=%.0f/s", Double(total) / (Double(t1 - t0) / 1e9))
        line += " latency_ms \(delivery.snapshot().fields) ack_latency_ms \(ackLatency.snapshot().shortFields)"
        line += String(
            format: " broker_cpu_s=%.3f cpu_us_per_delivered=%.1f cpu_us_per_published=%.1f window_s=%.2f",
            cpu, cpu / Double(max(d, 1)) * 1e6, cpu / Double(total) * 1e6, Double(t2 - t0) / 1e9)
        line += database + " store=sqlite"
        line += " loadavg_before=\(loadBefore) after=\(BenchSupport.loadAverage())"
        for p in peers { await p.close() }
        return RunSummary.parse(side: "websocket", line: line)
    }

    /// Memory per idle WebSocket session on a fresh node (everything from 127.0.0.1: its
    /// per-address connection bound is lifted above `count`).
    static func idleSessions(binary: String, count: Int, settle: Double) async throws -> String {
        let config = try BenchSupport.temporaryDirectory() + "/ws-idle-\(UUID().uuidString.prefix(8)).json"
        try Data(#"{"resources": {"maxConnectionsPerAddress": \#(count + 200)}}"#.utf8)
            .write(to: URL(fileURLWithPath: config))
        let node = try await NodeProcess.start(binary: binary, label: "ws-idle", extraArguments: ["--config", config])
        defer { node.stop() }
        // Sessions first (REST, store rows: not the sockets' memory), 8 logins at a time.
        let warmup = 50
        let tokens = try await withThrowingTaskGroup(of: [(UserID, String)].self) { group in
            let lanes = 8
            for lane in 0..<lanes {
                group.addTask {
                    let login = try await ClientAPILogin.open(node)
                    var out: [(UserID, String)] = []
                    for i in stride(from: lane, to: count + warmup, by: lanes) {
                        let user = try UserID("idle\(i)")
                        out.append((user, try await login.sessionToken(for: user)))
                    }
                    await login.close()
                    return out
                }
            }
            var all: [(UserID, String)] = []
            for try await part in group { all += part }
            return all
        }
        // Warm-up: sockets opened and closed (lazy state of OpenSSL, NIO, the engine).
        let warm = try await openSockets(node, Array(tokens.suffix(warmup)))
        for socket in warm { await socket.close() }
        try await Task.sleep(for: .seconds(settle))
        let baseline = BenchSupport.residentBytes(pid: node.pid)
        let sockets = try await openSockets(node, Array(tokens.prefix(count)))
        try await Task.sleep(for: .seconds(settle))
        let loaded = BenchSupport.residentBytes(pid: node.pid)
        let open = sockets.filter { $0.socket.isOpen }.count
        let per = Double(loaded - baseline) / Double(count)
        for socket in sockets { await socket.close() }
        guard open == count else { throw BenchFailure("ws idle: only \(open) of \(count) sockets stayed open") }
        return String(
            format:
                "websocket idle sessions=%d node_rss_baseline_mb=%.1f node_rss_loaded_mb=%.1f bytes_per_idle_session=%.0f kib_per_idle_session=%.1f (target ≤ 64)",
            count, Double(baseline) / 1e6, Double(loaded) / 1e6, per, per / 1024)
    }

    /// Opens one WebSocket per session token, 64 at a time (under the node's per-address
    /// handshake bound).
    private static func openSockets(_ node: NodeProcess, _ tokens: [(UserID, String)]) async throws -> [WebSocketPeer] {
        var out: [WebSocketPeer] = []
        out.reserveCapacity(tokens.count)
        var index = 0
        while index < tokens.count {
            let batch = tokens[index..<min(index + 64, tokens.count)]
            out += try await withThrowingTaskGroup(of: WebSocketPeer.self) { group in
                for (user, token) in batch {
                    group.addTask { try await WebSocketPeer.open(node, token: token, user: user) }
                }
                var opened: [WebSocketPeer] = []
                for try await peer in group { opened.append(peer) }
                return opened
            }
            index += batch.count
        }
        return out
    }
}
