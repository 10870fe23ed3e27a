import ArgumentParser
import Foundation
import LaminaModel
import LaminaWire
import NIOCore

/// `lamina-bench catchup`: a new device of a user who was offline syncs N waiting messages.
struct CatchupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "catchup",
        abstract: "A new device syncs N messages that waited for its offline user: time to all, messages/s, node CPU.",
        discussion: """
            Set-up (not measured): --conversations senders (users s<i>) each create a conversation with user r0 (never \
            online) and send their share of --messages (window 32 each, transient errors retried). Measured: a new \
            device of r0 connects and authenticates, then sends SYNC from cursor 0; the clock and the node's CPU \
            (utime + stime of the lamina-node process) run from that SYNC until all N message-created changes are \
            received (and, with --receipts, every receipt ACKed).

            --receipts: DELIVERY_RECEIPT as the SDK sends them while catching up: one per conversation per received \
            CHANGE / CHANGE_BATCH (up to the highest position in it), queued during catch-up and all sent, pipelined, \
            once the node ACKs the SYNC (the SDK's outbox flushes when the session goes live); receipts for frames \
            received after that go out at once.

            --mosquitto DIR alternates rounds with Mosquitto: mqload fill (N messages over 100 topics for an offline \
            persistent subscriber), then mqload catchup (it reconnects: time to all).
            """)

    @OptionGroup var load: WriteLoadOptions
    @Option(help: "Messages waiting for the offline user.") var messages = 100_000
    @Option(help: "Conversations (one sender each) the messages are spread over.") var conversations = 10
    @ArgumentParser.Flag(help: "The new device sends DELIVERY_RECEIPT as the SDK does.") var receipts = false
    @Option(help: "Rounds (each on a fresh node; alternating with Mosquitto when --mosquitto is given).") var rounds = 1
    @Option(help: "Folder with run-mosquitto.sh and mqload.c: run the Mosquitto anchor in alternating rounds.")
    var mosquitto: String?
    @Option(help: "Seconds the fill may take before the run gives up.") var fillTimeout: Double = 1800
    @Option(help: "Seconds the catch-up may take before the run gives up.") var catchupTimeout: Double = 900

    func validate() throws {
        guard messages >= 1, conversations >= 1, rounds >= 1 else {
            throw ValidationError("messages, conversations, rounds must be positive")
        }
        guard load.size >= 20 else { throw ValidationError("--size must be at least 20") }
    }

    func run() async throws {
        BenchSupport.raiseFileLimit()
        let binary = try NodeProcess.binary(load.nodeBinary)
        let anchor = try mosquitto.map { try MosquittoAnchor.start(folder: $0) }
        defer { anchor?.stop() }
        var lamina: [RunSummary] = []
        var mosq: [RunSummary] = []
        for round in 1...rounds {
            let s = try await laminaRound(binary: binary)
            emit("round \(round) \(s.line)")
            lamina.append(s)
            if let anchor {
                let m = try anchor.catchup(messages: messages, size: load.size)
                emit("round \(round) \(m.line)")
                mosq.append(m)
            }
        }
        if rounds > 1 || anchor != nil {
            emit(
                "summary lamina: \(spread("messages_per_s", lamina, format: "%.0f")); \(spread("cpu_us_per_message", lamina))"
            )
            if anchor != nil {
                emit(
                    "summary mosquitto: \(spread("messages_per_s", mosq, format: "%.0f")); \(spread("cpu_us_per_message", mosq))"
                )
            }
        }
    }

    private func laminaRound(binary: String) async throws -> RunSummary {
        let node = try await NodeProcess.start(binary: binary, label: "catchup")
        defer { node.stop() }

        // Fill (not measured).
        let fillStart = monotonicNanos()
        let acked = LoadCounter()
        let errors = LoadCounter()
        let ackLatency = LoadLatencies()
        var senders: [MessageSender] = []
        for i in 0..<conversations {
            let peer = try await LoadPeer.connect(node, user: try UserID("s\(i)"), sync: false)
            let conversation = try await peer.createConversation(with: ["r0"])
            senders.append(
                MessageSender(
                    peer: peer, conversation: conversation, size: load.size, ackLatency: ackLatency, acked: acked,
                    errors: errors, retry: true))
        }
        let fillPeers = senders.map(\.peer)
        let alive = keepAlive(fillPeers)
        let fired = LoadCounter()
        let dog = watchdog(fillPeers, deadline: fillStart + UInt64(fillTimeout * 1e9), fired: fired)
        let share = (0..<conversations).map { messages / conversations + ($0 < messages % conversations ? 1 : 0) }
        try await MessageSender.sendAll(senders, counts: share, what: "fill")
        alive.cancel()
        dog.cancel()
        if fired.current > 0 { throw BenchFailure("fill did not finish within \(fillTimeout) s") }
        guard errors.current == 0, acked.current == messages else {
            throw BenchFailure("fill: \(acked.current) of \(messages) acknowledged, \(errors.current) errors")
        }
        let fillSeconds = Double(monotonicNanos() - fillStart) / 1e9
        progress(
            "catchup",
            String(
                format: "filled %d messages in %d conversations in %.1f s (%.0f/s, not measured)", messages,
                conversations, fillSeconds, Double(messages) / fillSeconds))
        for p in fillPeers { await p.close() }
        try await Task.sleep(for: .milliseconds(500))

        // The new device.
        let received = LoadCounter()
        let frames = LoadCounter()
        let changes = LoadCounter()
        let receiptsSent = LoadCounter()
        let receiptsAcked = LoadCounter()
        let receiptErrors = LoadCounter()
        let state = CatchupState()
        let box = PeerBox()
        let firstAt = LoadCounter()
        let allAt = LoadCounter()
        let device = try await LoadPeer.connect(node, user: "r0", sync: false) { msgs, count in
            frames.add()
            changes.add(count)
            if firstAt.current == 0 { firstAt.add(Int(monotonicNanos() &- state.syncSentAt)) }
            if received.addAndGet(msgs.count) >= messages, allAt.current == 0 {
                allAt.add(Int(monotonicNanos() &- state.syncSentAt))
            }
            guard receipts, !msgs.isEmpty, let peer = box.peer else { return }
            let rs = LoadPeer.receipts(for: msgs)
            if state.live {
                receiptsSent.add(rs.count)
                for r in rs { peer.sendReceipt(r, acked: receiptsAcked, errors: receiptErrors) }
            } else {
                // The SDK's outbox until the session is live: one receipt per conversation
                // waits there, the latest replacing the earlier ones (`replacesPending`).
                for r in rs {
                    if let i = state.queued.firstIndex(where: { $0.conversationID == r.conversationID }) {
                        var latest = r
                        latest.upTo = max(r.upTo, state.queued[i].upTo)
                        state.queued.remove(at: i)
                        state.queued.append(latest)
                    } else {
                        state.queued.append(r)
                    }
                }
            }
        }
        box.peer = device
        let syncID = UUID()
        let cpu0 = node.cpuSeconds()
        let t0 = monotonicNanos()
        state.syncSentAt = t0
        let syncAcked = LoadCounter()
        device.client.request(Frame.sync(SyncRequest(requestID: syncID, cursor: 0)), id: syncID).whenComplete {
            result in
            // On the stream's event loop, as the frame handler: flush what was queued (counted
            // before the SYNC counts as answered, so the wait below includes them).
            if receipts { receiptsSent.add(state.queued.count) }
            syncAcked.add(Int(monotonicNanos() - t0))
            state.live = true
            if receipts {
                for r in state.queued { device.sendReceipt(r, acked: receiptsAcked, errors: receiptErrors) }
                state.queued = []
            }
            if case .success(.ack) = result {} else { state.syncFailed = "\(result)" }
        }
        let failure = await waitUntil(deadline: t0 + UInt64(catchupTimeout * 1e9), peers: [device]) {
            received.current >= messages && syncAcked.current > 0
                && (!receipts || receiptsAcked.current + receiptErrors.current >= receiptsSent.current)
        }
        let cpu1 = node.cpuSeconds()
        let t1 = monotonicNanos()
        let allReceivedNote = received.current >= messages ? "" : " INCOMPLETE"
        if let failure { throw BenchFailure("catchup: the device's stream failed: \(failure)") }
        if let f = state.syncFailed { throw BenchFailure("catchup: SYNC not acknowledged: \(f)") }
        let seconds = Double(t1 - t0) / 1e9
        let cpu = cpu1 - cpu0
        var line =
            "lamina catchup: messages=\(messages) conversations=\(conversations) size=\(load.size) receipts=\(receipts ? "on" : "off")"
        line += " received=\(received.current)\(allReceivedNote) frames=\(frames.current) changes=\(changes.current)"
        if receipts {
            line +=
                " receipts_sent=\(receiptsSent.current) receipts_acked=\(receiptsAcked.current) receipt_errors=\(receiptErrors.current)"
        }
        line += String(
            format:
                " seconds=%.3f first_after_s=%.3f all_received_after_s=%.3f sync_acked_after_s=%.3f messages_per_s=%.0f broker_cpu_s=%.3f cpu_us_per_message=%.1f",
            seconds, Double(firstAt.current) / 1e9, Double(allAt.current) / 1e9, Double(syncAcked.current) / 1e9,
            Double(received.current) / seconds, cpu,
            cpu / Double(max(received.current, 1)) * 1e6)
        line += String(format: " fill_s=%.1f", fillSeconds) + " loadavg=\(BenchSupport.loadAverage())"
        await device.close()
        return RunSummary.parse(side: "lamina", line: line)
    }
}

/// The catching-up device's state, touched on its stream's event loop only (and `syncSentAt`
/// written before SYNC goes out).
final class CatchupState: @unchecked Sendable {
    var syncSentAt: UInt64 = 0
    var live = false
    var queued: [DeliveryReceipt] = []
    var syncFailed: String?
}
