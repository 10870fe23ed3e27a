import ArgumentParser
import Foundation
import LaminaModel
import LaminaWire
import NIOCore

/// `lamina-bench replication`: two peered `lamina-node` processes; the lag from a send on one
/// to the receiver on the other, and the catch-up of a node that was down.
struct ReplicationCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replication",
        abstract:
            "Two peered lamina-node processes: replication lag at fixed rates, or the catch-up of a node that was down.",
        discussion: """
            Node A and node B are lamina-node child processes peered over mutual TLS (B dials A; certificates from a \
            development cluster CA). Users s<i> send on A, users r<i> receive on B, each on its own TLS + HTTP/2 \
            connection.

            Lag (default): for each --rate (repeatable; default 1000 and 5000), a fresh pair of nodes: P senders on \
            A each with a conversation to one receiver on B; one warm-up message per conversation is delivered on B \
            first (links up, not measured); then R messages/s in total for S seconds on an absolute schedule. Lag: the \
            send call on A → the receiver on B decoding the message-created change (one monotonic clock, one process). \
            One summary line per run: lag_ms p50= p90= p99= max=, the ACK latency on A, both nodes' CPU.

            --catchup N: B is stopped (SIGTERM, data kept) once it holds the set-up; N messages are sent on A (window \
            32 per sender, all ACKed); B is started again. Measured from B serving: the time until B's version vector \
            (its /metrics) equals A's, then B's /replication digest is compared with A's. operations_per_s: the \
            operations B applied (A's counter then minus before) over that time.
            """)

    @OptionGroup var load: WriteLoadOptions
    @Option(help: "Senders on A (each with one receiver on B).") var pairs = 10
    @Option(help: "Messages per second in total (repeatable: one run each).") var rate: [Double] = []
    @Option(help: "Seconds of sending per run.") var seconds: Double = 10
    @Option(help: "Catch-up mode: messages sent on A while B is down.") var catchup: Int?
    @Option(help: "Seconds the catch-up may take before the run gives up.") var catchupTimeout: Double = 900

    func validate() throws {
        guard pairs >= 1, seconds > 0, rate.allSatisfy({ $0 > 0 }), catchupTimeout > 0 else {
            throw ValidationError("pairs, seconds, rates and --catchup-timeout must be positive")
        }
        if let catchup, catchup < 1 { throw ValidationError("--catchup must be positive") }
        guard load.size >= 20 else { throw ValidationError("--size must be at least 20 (the send time)") }
    }

    func run() async throws {
        BenchSupport.raiseFileLimit()
        let binary = try NodeProcess.binary(load.nodeBinary)
        if let catchup {
            emit(try await catchupRun(binary: binary, messages: catchup))
            return
        }
        for r in rate.isEmpty ? [1000, 5000] : rate {
            emit(try await lagRun(binary: binary, rate: r))
        }
    }

    /// One lag run on a fresh pair of nodes.
    private func lagRun(binary: String, rate: Double) async throws -> String {
        let nodes = try await PeeredNodes.start(binary: binary)
        defer { nodes.stop() }
        let total = Int(rate * seconds)
        let lag = LoadLatencies(capacity: total)
        let ackLatency = LoadLatencies(capacity: total)
        let delivered = LoadCounter()
        let acked = LoadCounter()
        let errors = LoadCounter()

        var receivers: [LoadPeer] = []
        for i in 0..<pairs {
            receivers.append(
                try await LoadPeer.connect(nodes.b, user: try UserID("r\(i)"), sync: true) { messages, _ in
                    guard !messages.isEmpty else { return }
                    let now = monotonicNanos()
                    for m in messages { if let t = TimedText.sentAt(m) { lag.record(sentAt: t, now: now) } }
                    delivered.add(messages.count)
                })
        }
        var senders: [MessageSender] = []
        for i in 0..<pairs {
            let peer = try await LoadPeer.connect(nodes.a, user: try UserID("s\(i)"), sync: load.senderSync)
            let conversation = try await peer.createConversation(with: [try UserID("r\(i)")])
            senders.append(
                MessageSender(
                    peer: peer, conversation: conversation, size: load.size, ackLatency: ackLatency, acked: acked,
                    errors: errors, retry: false))
        }
        let peers = receivers + senders.map(\.peer)

        // Warm-up (not measured): one message per conversation reaches B.
        for sender in senders { sender.send() }
        let warmed = await waitUntil(deadline: monotonicNanos() + 60_000_000_000, peers: peers) {
            delivered.current >= pairs
        }
        if let warmed { throw BenchFailure("replication: a stream failed during the warm-up: \(warmed)") }
        guard delivered.current >= pairs else {
            throw BenchFailure("replication: the warm-up messages did not reach node B within 60 s")
        }
        let warmAcked = acked.current
        let warmErrors = errors.current
        lag.reset()
        ackLatency.reset()

        let loadBefore = BenchSupport.loadAverage()
        let cpuA0 = nodes.a.cpuSeconds()
        let cpuB0 = nodes.b.cpuSeconds()
        let (t0, t1) = await sendOnSchedule(senders, total: total, rate: rate)
        let failure = await waitUntil(deadline: t1 + UInt64(load.drainTimeout * 1e9), peers: peers) {
            delivered.current - pairs >= total && acked.current - warmAcked + errors.current - warmErrors >= total
        }
        let cpuA = nodes.a.cpuSeconds() - cpuA0
        let cpuB = nodes.b.cpuSeconds() - cpuB0
        let t2 = monotonicNanos()
        if let failure { throw BenchFailure("replication: a stream failed: \(failure)") }
        let received = delivered.current - pairs
        var line = "lamina replication lag: pairs=\(pairs) rate=\(Int(rate)) seconds=\(seconds) size=\(load.size)"
        line +=
            " published=\(total) acked=\(acked.current - warmAcked) errors=\(errors.current - warmErrors) delivered_on_b=\(received)"
        line += received < total ? " INCOMPLETE" : ""
        line += String(format: " achieved_pub_rate=%.0f/s", Double(total) / (Double(t1 - t0) / 1e9))
        line += " lag_ms \(lag.snapshot().fields) ack_latency_ms \(ackLatency.snapshot().shortFields)"
        line += String(format: " node_a_cpu_s=%.3f node_b_cpu_s=%.3f window_s=%.2f", cpuA, cpuB, Double(t2 - t0) / 1e9)
        line += " loadavg_before=\(loadBefore) after=\(BenchSupport.loadAverage())"
        for p in peers { await p.close() }
        return line
    }

    /// The catch-up run: B down while `messages` are sent on A, then B started again.
    private func catchupRun(binary: String, messages: Int) async throws -> String {
        let nodes = try await PeeredNodes.start(binary: binary)
        defer { nodes.stop() }
        let acked = LoadCounter()
        let errors = LoadCounter()
        let ackLatency = LoadLatencies()
        var senders: [MessageSender] = []
        for i in 0..<pairs {
            let peer = try await LoadPeer.connect(nodes.a, user: try UserID("s\(i)"), sync: false)
            let conversation = try await peer.createConversation(with: [try UserID("r\(i)")])
            senders.append(
                MessageSender(
                    peer: peer, conversation: conversation, size: load.size, ackLatency: ackLatency, acked: acked,
                    errors: errors, retry: true))
        }
        // B holds the set-up before it goes down.
        let before = try await Self.vectorsEqual(nodes, timeout: 60)
        guard let before else { throw BenchFailure("replication: node B did not receive the set-up within 60 s") }
        nodes.stopB()

        let fillStart = monotonicNanos()
        let share = (0..<pairs).map { messages / pairs + ($0 < messages % pairs ? 1 : 0) }
        try await MessageSender.sendAll(senders, counts: share, what: "replication fill")
        guard errors.current == 0, acked.current == messages else {
            throw BenchFailure(
                "replication fill: \(acked.current) of \(messages) acknowledged, \(errors.current) errors")
        }
        let fillSeconds = Double(monotonicNanos() - fillStart) / 1e9
        for s in senders { await s.peer.close() }
        let target = try PeeredNodes.vector(admin: nodes.adminA)
        let digestA = try PeeredNodes.replication(admin: nodes.adminA).digest
        let operations = (target[hex(PeeredNodes.idA)] ?? 0) - (before[hex(PeeredNodes.idA)] ?? 0)
        progress(
            "replication",
            String(
                format: "sent %d messages on A while B was down in %.1f s (not measured); starting B", messages,
                fillSeconds))

        let launched = monotonicNanos()
        try await nodes.restartB()
        let serving = monotonicNanos()
        let cpuB0 = nodes.b.cpuSeconds()
        var caughtUp: UInt64?
        while monotonicNanos() < serving + UInt64(catchupTimeout * 1e9) {
            if try PeeredNodes.vector(admin: nodes.adminB) == target {
                caughtUp = monotonicNanos()
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let cpuB = nodes.b.cpuSeconds() - cpuB0
        guard let caughtUp else {
            throw BenchFailure("replication: node B did not catch up within \(catchupTimeout) s")
        }
        let digestB = try PeeredNodes.replication(admin: nodes.adminB).digest
        let seconds = Double(caughtUp - serving) / 1e9
        var line =
            "lamina replication catchup: messages=\(messages) conversations=\(pairs) size=\(load.size) operations=\(operations)"
        line += String(
            format: " startup_s=%.3f catchup_s=%.3f operations_per_s=%.0f messages_per_s=%.0f",
            Double(serving - launched) / 1e9, seconds,
            Double(operations) / seconds, Double(messages) / seconds)
        line += " digest_equal=\(digestA == digestB ? "yes" : "NO")"
        line += String(
            format: " node_b_cpu_s=%.3f cpu_us_per_operation=%.1f fill_s=%.1f", cpuB,
            cpuB / Double(max(operations, 1)) * 1e6, fillSeconds)
        line += " loadavg=\(BenchSupport.loadAverage())"
        return line
    }

    /// Waits until B's version vector equals A's (and is not empty); returns it.
    private static func vectorsEqual(_ nodes: PeeredNodes, timeout: Double) async throws -> [String: UInt64]? {
        let deadline = monotonicNanos() + UInt64(timeout * 1e9)
        while monotonicNanos() < deadline {
            let a = try PeeredNodes.vector(admin: nodes.adminA)
            if !a.isEmpty, try PeeredNodes.vector(admin: nodes.adminB) == a { return a }
            try await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    private func hex(_ node: NodeID) -> String { String(node.rawValue, radix: 16) }
}

extension MessageSender {
    /// Sends `counts[i]` messages through `senders[i]`, all senders at once, each with at most
    /// `window` in flight; returns when every one is answered. Throws when a stream fails.
    static func sendAll(_ senders: [MessageSender], counts: [Int], window: Int = 32, what: String) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (i, sender) in senders.enumerated() {
                group.addTask {
                    var inFlight: [EventLoopFuture<Void>] = []
                    for _ in 0..<counts[i] {
                        if inFlight.count >= window { try? await inFlight.removeFirst().get() }
                        if let f = sender.peer.failure { throw BenchFailure("\(what): \(f)") }
                        inFlight.append(sender.send())
                    }
                    for f in inFlight { try? await f.get() }
                }
            }
            try await group.waitForAll()
        }
    }
}
