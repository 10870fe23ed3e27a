import ArgumentParser
import Foundation
import LaminaModel
import LaminaWire
import NIOCore

/// `lamina-bench grow`: one sender into one conversation; the cost per message for each block
/// as the conversation grows.
struct GrowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "grow",
        abstract:
            "One sender into one conversation: messages/s and node CPU per message for each block, as the conversation grows.",
        discussion: """
            User s0 sends --messages messages into one conversation with r0, keeping --window SEND_MESSAGE commands \
            outstanding. With --receiver online (default) r0 is SYNCed and receives them live (a block ends when all \
            its messages are ACKed and delivered); with --receiver none r0 never connects. For each block: messages/s, \
            node CPU µs per message (utime + stime of the lamina-node process over the block), ACK latency. Then a \
            summary line: the last block's cost over the first's.
            """)

    enum Receiver: String, ExpressibleByArgument, CaseIterable { case online, none }

    @OptionGroup var load: WriteLoadOptions
    @Option(help: "Messages in all.") var messages = 200_000
    @Option(help: "Messages per block (one line each).") var block = 20_000
    @Option(help: "SEND_MESSAGE commands outstanding.") var window = 32
    @Option(help: "online: r0 is SYNCed and receives live; none: r0 never connects.") var receiver: Receiver = .online
    @Option(help: "Give up after this many seconds in all (the blocks done so far are printed).") var timeLimit:
        Double = 3600

    func validate() throws {
        guard messages >= 1, block >= 1, window >= 1 else {
            throw ValidationError("messages, block, window must be positive")
        }
        guard load.size >= 20 else { throw ValidationError("--size must be at least 20") }
    }

    func run() async throws {
        BenchSupport.raiseFileLimit()
        let node = try await NodeProcess.start(binary: try NodeProcess.binary(load.nodeBinary), label: "grow")
        defer { node.stop() }
        let ackLatency = LoadLatencies(capacity: block)
        let delivered = LoadCounter()
        let acked = LoadCounter()
        let errors = LoadCounter()
        var peers: [LoadPeer] = []
        if receiver == .online {
            peers.append(
                try await LoadPeer.connect(node, user: "r0", sync: true) { messages, _ in delivered.add(messages.count)
                })
        }
        let senderPeer = try await LoadPeer.connect(node, user: "s0", sync: load.senderSync)
        peers.append(senderPeer)
        let conversation = try await senderPeer.createConversation(with: ["r0"])
        let sender = MessageSender(
            peer: senderPeer, conversation: conversation, size: load.size, ackLatency: ackLatency, acked: acked,
            errors: errors, retry: true)
        let alive = keepAlive(peers)
        defer { alive.cancel() }
        try await Task.sleep(for: .milliseconds(500))

        emit(
            "lamina grow: messages=\(messages) block=\(block) window=\(window) size=\(load.size) receiver=\(receiver.rawValue) sender_sync=\(load.senderSync ? "on" : "off")"
        )
        let start = monotonicNanos()
        let limit = start + UInt64(timeLimit * 1e9)
        let fired = LoadCounter()
        let dog = watchdog(peers, deadline: limit + UInt64(load.drainTimeout * 1e9), fired: fired)
        defer { dog.cancel() }
        var sent = 0
        var blocks: [(perMessage: Double, rate: Double)] = []
        var inFlight: [EventLoopFuture<Void>] = []
        var stopped: String?
        blockLoop: while sent < messages {
            let count = min(block, messages - sent)
            ackLatency.reset()
            let cpu0 = node.cpuSeconds()
            let t0 = monotonicNanos()
            let ackedBefore = acked.current + errors.current
            for _ in 0..<count {
                if inFlight.count >= window { try? await inFlight.removeFirst().get() }
                if let f = firstFailure(peers) {
                    stopped = f
                    break blockLoop
                }
                if monotonicNanos() > limit {
                    stopped = "time limit \(timeLimit) s"
                    break blockLoop
                }
                inFlight.append(sender.send())
            }
            sent += count
            let target = sent
            let failure = await waitUntil(deadline: limit + UInt64(load.drainTimeout * 1e9), peers: peers) {
                acked.current + errors.current >= target && (receiver == .none || delivered.current >= target)
            }
            let cpu1 = node.cpuSeconds()
            let t1 = monotonicNanos()
            if let failure {
                stopped = failure
                break
            }
            if fired.current > 0 || acked.current + errors.current < target {
                stopped = "time limit \(timeLimit) s"
                break
            }
            let seconds = Double(t1 - t0) / 1e9
            let done = acked.current + errors.current - ackedBefore
            let perMessage = (cpu1 - cpu0) / Double(max(done, 1)) * 1e6
            blocks.append((perMessage, Double(done) / seconds))
            var line =
                "lamina grow: block=\(blocks.count) messages_before=\(sent - count) messages_after=\(sent) acked=\(acked.current) errors=\(errors.current)"
            if receiver == .online { line += " delivered=\(delivered.current)" }
            line += String(
                format: " messages_per_s=%.0f broker_cpu_s=%.3f cpu_us_per_message=%.1f seconds=%.2f",
                Double(done) / seconds, cpu1 - cpu0, perMessage, seconds)
            line += " ack_latency_ms \(ackLatency.snapshot().fields) loadavg=\(BenchSupport.loadAverage())"
            emit(line)
        }
        if let first = blocks.first, let last = blocks.last {
            emit(
                String(
                    format:
                        "lamina grow summary: blocks=%d first_cpu_us_per_message=%.1f last_cpu_us_per_message=%.1f last_over_first=%.2f first_messages_per_s=%.0f last_messages_per_s=%.0f total_s=%.1f",
                    blocks.count, first.perMessage, last.perMessage, last.perMessage / first.perMessage, first.rate,
                    last.rate,
                    Double(monotonicNanos() - start) / 1e9))
        }
        for p in peers { await p.close() }
        if let stopped { throw BenchFailure("grow stopped early: \(stopped)") }
    }
}
