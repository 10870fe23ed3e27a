import ArgumentParser
import Foundation
import LaminaModel
import LaminaWire
import NIOCore

/// `lamina-bench rate`: the fixed-rate write path against a `lamina-node` child process, in
/// the load shape of Mosquitto's `mqload rate` (../shared/bench/mosquitto), optionally
/// alternating rounds with it.
struct RateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rate",
        abstract:
            "Fixed-rate p2p (or fan-out) messages through a lamina-node process: send→delivery and send→ACK latency, node CPU per delivered message.",
        discussion: """
            P senders (user s<i>) each with one conversation to K receivers (users r<i>-<k>), every user on its own \
            TLS + HTTP/2 connection and sync stream. Messages go out round-robin over the senders on an absolute \
            schedule (R per second in total, S seconds; sends are pipelined, a slow ACK never delays the schedule), \
            each a text of --size bytes carrying its send time. Latency: send call → the receiver decoding the \
            message-created change (one monotonic clock, one process); send → ACK. Node CPU: utime + stime of the \
            node process from /proc/PID/stat, from the first send until all are delivered and ACKed (and, with \
            --receipts, the receipts ACKed); the loader's CPU is never counted.

            --receipts: receivers send DELIVERY_RECEIPT as the SDK does: per received CHANGE / CHANGE_BATCH frame, one \
            per conversation, up to the highest position received (ChangeDecoder.deliveryReceipts).

            --mosquitto DIR (the folder with run-mosquitto.sh and mqload.c, e.g. /work/shared/bench/mosquitto): \
            compiles mqload once, starts Mosquitto (TLS 1.3, QoS 1, persistence) and alternates a Lamina round with \
            a Mosquitto round of the same shape, --rounds times; then per side the median and min–max. Needs \
            `apt-get install -y mosquitto libmosquitto-dev` (and a C compiler). Mosquitto persists once a second \
            without fsync; Lamina ACKs and delivers after a synced commit; Mosquitto subscribers PUBACK each message.

            One summary line per round, mqload's fields: published= delivered= … latency_ms p50= p90= p99= max= … \
            broker_cpu_s= cpu_us_per_delivered= …
            """)

    @OptionGroup var load: WriteLoadOptions
    @Option(help: "Sender/receiver pairs (senders; conversations).") var pairs = 10
    @Option(help: "Receivers per sender's conversation.") var fanout = 1
    @Option(help: "Messages per second in total.") var rate: Double = 200
    @Option(help: "Seconds of sending.") var seconds: Double = 10
    @ArgumentParser.Flag(help: "Receivers send DELIVERY_RECEIPT as the SDK does.") var receipts = false
    @Option(help: "Rounds (each on a fresh node; alternating with Mosquitto when --mosquitto is given).") var rounds = 1
    @Option(help: "Folder with run-mosquitto.sh and mqload.c: run the Mosquitto anchor in alternating rounds.")
    var mosquitto: String?

    func validate() throws {
        guard pairs >= 1, fanout >= 1, rate > 0, seconds > 0, rounds >= 1 else {
            throw ValidationError("pairs, fanout, rate, seconds, rounds must be positive")
        }
        guard load.size >= 20 else { throw ValidationError("--size must be at least 20 (the send time)") }
        try load.validateStore()
    }

    func run() async throws {
        BenchSupport.raiseFileLimit()
        let binary = try NodeProcess.binary(load.nodeBinary)
        let anchor = try mosquitto.map { try MosquittoAnchor.start(folder: $0) }
        defer { anchor?.stop() }
        var lamina: [RunSummary] = []
        var mosq: [RunSummary] = []
        for round in 1...rounds {
            let summary = try await Self.laminaRound(
                binary: binary, load: load, pairs: pairs, fanout: fanout, rate: rate, seconds: seconds,
                receipts: receipts)
            emit("round \(round) \(summary.line)")
            lamina.append(summary)
            if let anchor {
                let m = try anchor.rate(pairs: pairs, fanout: fanout, rate: rate, seconds: seconds, size: load.size)
                emit("round \(round) \(m.line)")
                mosq.append(m)
            }
        }
        if rounds > 1 || anchor != nil {
            emit(
                "summary lamina: \(spread("cpu_us_per_delivered", lamina)); latency \(spread("p99", lamina, format: "%.2f")) ms"
            )
            if anchor != nil {
                emit(
                    "summary mosquitto: \(spread("cpu_us_per_delivered", mosq)); latency \(spread("p99", mosq, format: "%.2f")) ms"
                )
            }
        }
    }

    /// One round on a fresh node: set up (not measured), the schedule, the drain.
    static func laminaRound(
        binary: String, load: WriteLoadOptions, pairs: Int, fanout: Int, rate: Double, seconds: Double, receipts: Bool
    ) async throws -> RunSummary {
        let roundNodes = try await RoundNodes.start(binary: binary, load: load, label: "rate")
        defer { roundNodes.stop() }
        let node = roundNodes.first
        let total = Int(rate * seconds)
        let delivery = LoadLatencies(capacity: total * fanout)
        let ackLatency = LoadLatencies(capacity: total)
        let delivered = LoadCounter()
        let acked = LoadCounter()
        let errors = LoadCounter()
        let receiptsSent = LoadCounter()
        let receiptsAcked = LoadCounter()
        let receiptErrors = LoadCounter()

        // Set-up: receivers first (SYNCed, live), then senders and their conversations.
        var receivers: [LoadPeer] = []
        for i in 0..<pairs {
            for k in 0..<fanout {
                let box = PeerBox()
                let peer = try await LoadPeer.connect(
                    roundNodes.receiving(i * fanout + k), user: try UserID("r\(i)-\(k)"), sync: true
                ) { messages, _ in
                    guard !messages.isEmpty else { return }
                    let now = monotonicNanos()
                    if receipts, let peer = box.peer {
                        for r in LoadPeer.receipts(for: messages) {
                            receiptsSent.add()
                            peer.sendReceipt(r, acked: receiptsAcked, errors: receiptErrors)
                        }
                    }
                    for m in messages { if let t = TimedText.sentAt(m) { delivery.record(sentAt: t, now: now) } }
                    delivered.add(messages.count)
                }
                box.peer = peer
                receivers.append(peer)
            }
        }
        var senders: [MessageSender] = []
        for i in 0..<pairs {
            let peer = try await LoadPeer.connect(node, user: try UserID("s\(i)"), sync: load.senderSync)
            let others = try (0..<fanout).map { try UserID("r\(i)-\($0)") }
            let conversation = try await peer.createConversation(with: others)
            senders.append(
                MessageSender(
                    peer: peer, conversation: conversation, size: load.size, ackLatency: ackLatency, acked: acked,
                    errors: errors, retry: false))
        }
        let peers = receivers + senders.map(\.peer)
        try await Task.sleep(for: .seconds(1))  // conversation-created changes arrive; as mqload's sleep(1)

        let loadBefore = BenchSupport.loadAverage()
        let nodes = roundNodes.measuring()
        let cpu0 = nodes.cpuSeconds()
        let (t0, t1) = await sendOnSchedule(senders, total: total, rate: rate)
        let failure = await waitUntil(deadline: t1 + UInt64(load.drainTimeout * 1e9), peers: peers) {
            delivered.current >= total * fanout && acked.current + errors.current >= total
                && (!receipts || receiptsAcked.current + receiptErrors.current >= receiptsSent.current)
        }
        let cpu1 = nodes.cpuSeconds()
        let database = nodes.fields(per: delivered.current, unit: "delivered")
        let t2 = monotonicNanos()
        if let failure { throw BenchFailure("rate: a stream failed: \(failure)") }
        let cpu = cpu1 - cpu0
        let d = delivered.current
        var line = "lamina rate: pairs=\(pairs) fanout=\(fanout) rate=\(Int(rate)) seconds=\(seconds) size=\(load.size)"
        line += " receipts=\(receipts ? "on" : "off") sender_sync=\(load.senderSync ? "on" : "off")"
        line +=
            " published=\(total) delivered=\(d) expected=\(total * fanout) acked=\(acked.current) errors=\(errors.current)"
        if receipts {
            line +=
                " receipts_sent=\(receiptsSent.current) receipts_acked=\(receiptsAcked.current) receipt_errors=\(receiptErrors.current)"
        }
        line += String(format: " achieved_pub_rate=%.0f/s", Double(total) / (Double(t1 - t0) / 1e9))
        line += " latency_ms \(delivery.snapshot().fields) ack_latency_ms \(ackLatency.snapshot().shortFields)"
        line += String(
            format: " broker_cpu_s=%.3f cpu_us_per_delivered=%.1f cpu_us_per_published=%.1f window_s=%.2f",
            cpu, cpu / Double(max(d, 1)) * 1e6, cpu / Double(total) * 1e6, Double(t2 - t0) / 1e9)
        line += database + " store=\(load.store == nil ? "sqlite" : "postgres")"
        line += " loadavg_before=\(loadBefore) after=\(BenchSupport.loadAverage())"
        for p in peers { await p.close() }
        return RunSummary.parse(side: "lamina", line: line)
    }
}

/// Lets a handler created before its peer reach the peer (set once, before any message).
final class PeerBox: @unchecked Sendable {
    var peer: LoadPeer?
}
