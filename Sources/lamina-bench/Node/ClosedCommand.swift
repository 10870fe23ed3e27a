import ArgumentParser
import Foundation
import LaminaModel
import LaminaWire
import NIOCore

/// `lamina-bench closed`: N senders, each keeping W SEND_MESSAGE commands outstanding.
struct ClosedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "closed",
        abstract:
            "N senders each keeping W SEND_MESSAGE commands outstanding: durable (ACKed) messages/s, ACK latency, node CPU per message.",
        discussion: """
            Senders s<i> (each its own TLS + HTTP/2 connection and sync stream) each send into their own conversation \
            with an offline user r<i>, keeping --window commands outstanding, for --seconds or until --messages in \
            all were sent, whichever comes first. A transient ERROR (e.g. overloaded) is retried with the same id \
            after the delay it names; its latency counts from the first send. Node CPU: utime + stime of the \
            lamina-node process from the first send until the last ACK.
            """)

    @OptionGroup var load: WriteLoadOptions
    @Option(help: "Senders.") var senders = 50
    @Option(help: "SEND_MESSAGE commands outstanding per sender.") var window = 32
    @Option(help: "Seconds of sending.") var seconds: Double = 10
    @Option(help: "Stop after this many messages in all (0: no limit).") var messages = 0
    @Option(help: "Rounds (each on a fresh node).") var rounds = 1

    func validate() throws {
        guard senders >= 1, window >= 1, seconds > 0, rounds >= 1, messages >= 0 else {
            throw ValidationError("bad arguments")
        }
        guard load.size >= 20 else { throw ValidationError("--size must be at least 20") }
        try load.validateStore()
    }

    func run() async throws {
        BenchSupport.raiseFileLimit()
        let binary = try NodeProcess.binary(load.nodeBinary)
        var runs: [RunSummary] = []
        for round in 1...rounds {
            let s = try await laminaRound(binary: binary)
            emit("round \(round) \(s.line)")
            runs.append(s)
        }
        if rounds > 1 {
            emit(
                "summary lamina: \(spread("messages_per_s", runs, format: "%.0f")); \(spread("cpu_us_per_message", runs)); ack \(spread("p99", runs, format: "%.2f")) ms"
            )
        }
    }

    private func laminaRound(binary: String) async throws -> RunSummary {
        let roundNodes = try await RoundNodes.start(binary: binary, load: load, label: "closed")
        defer { roundNodes.stop() }
        let ackLatency = LoadLatencies()
        let acked = LoadCounter()
        let errors = LoadCounter()
        let started = LoadCounter()
        var all: [MessageSender] = []
        for i in 0..<senders {
            let peer = try await LoadPeer.connect(
                roundNodes.all[i % roundNodes.all.count], user: try UserID("s\(i)"), sync: load.senderSync)
            let conversation = try await peer.createConversation(with: [try UserID("r\(i)")])
            all.append(
                MessageSender(
                    peer: peer, conversation: conversation, size: load.size, ackLatency: ackLatency, acked: acked,
                    errors: errors, retry: true))
        }
        let peers = all.map(\.peer)
        try await Task.sleep(for: .milliseconds(500))

        let limit = messages > 0 ? messages : Int.max
        let nodes = roundNodes.measuring()
        let cpu0 = nodes.cpuSeconds()
        let loaderCPU0 = BenchSupport.cpuSeconds(getpid())
        let t0 = monotonicNanos()
        let stopAt = t0 + UInt64(seconds * 1e9)
        let window = self.window
        let fired = LoadCounter()
        let dog = watchdog(peers, deadline: stopAt + UInt64(load.drainTimeout * 1e9), fired: fired)
        defer { dog.cancel() }
        let pumps = all.map { WindowPump($0, window: window, stopAt: stopAt, started: started, limit: limit) }
        for pump in pumps { pump.start() }
        var stoppedBy: String?
        for pump in pumps {
            // Bounded: each message is answered, or fails with its stream (the watchdog resets stuck streams).
            let failure = try await pump.finished.get()
            stoppedBy = stoppedBy ?? failure
        }
        let cpu1 = nodes.cpuSeconds()
        let database = nodes.fields(per: acked.current, unit: "message")
        let loaderCPU = BenchSupport.cpuSeconds(getpid()) - loaderCPU0
        let t1 = monotonicNanos()
        dog.cancel()
        if fired.current > 0 {
            throw BenchFailure(
                "closed: ACKs still missing \(load.drainTimeout) s after the end; \(acked.current) acked")
        }
        if let stoppedBy { throw BenchFailure("closed: a stream failed: \(stoppedBy)") }
        let elapsed = Double(t1 - t0) / 1e9
        let cpu = cpu1 - cpu0
        let a = acked.current
        var line =
            "lamina closed: senders=\(senders) window=\(window) seconds=\(seconds) size=\(load.size) sender_sync=\(load.senderSync ? "on" : "off")"
        line += " acked=\(a) errors=\(errors.current)"
        line += String(format: " messages_per_s=%.0f", Double(a) / elapsed)
        line += " ack_latency_ms \(ackLatency.snapshot().fields)"
        line += String(format: " broker_cpu_s=%.3f cpu_us_per_message=%.1f", cpu, cpu / Double(max(a, 1)) * 1e6)
        line += database + " store=\(load.store == nil ? "sqlite" : "postgres")"
        // The load generator shares the machine: its own cost bounds what the node can be shown to do.
        line += String(
            format: " loader_cpu_us_per_message=%.1f window_s=%.2f loadavg=%@", loaderCPU / Double(max(a, 1)) * 1e6,
            elapsed, BenchSupport.loadAverage())
        for p in peers { await p.close() }
        return RunSummary.parse(side: "lamina", line: line)
    }
}
