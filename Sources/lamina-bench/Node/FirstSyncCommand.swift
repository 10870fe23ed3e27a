import ArgumentParser
import Foundation
import LaminaClient
import LaminaModel
import LaminaWire

/// `lamina-bench first-sync` (issue 16): a new SDK device of a user with many conversations
/// syncs under each synchronization policy; time to the end of its first sync, the node's CPU
/// and the device's, beside the whole feed's replay.
struct FirstSyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "first-sync",
        abstract:
            "A new SDK device's first sync under each synchronization policy: seconds, node CPU, device CPU, messages held.",
        discussion: """
            Set-up (not measured): --conversations senders (users s<i>) each create a conversation with user r0 and send \
            half of --messages; r0 marks each conversation read (MARK_ALL_READ); the senders send the other half. So \
            every conversation has --messages messages, half of them unread by r0. Measured, per policy in --policies \
            (replay = the whole feed from cursor 0, as before snapshots; complete; unread; last:N), on the same node: a \
            new LaminaClient device of r0 (fresh store) connects; the clock and the node's CPU (utime + stime of the \
            lamina-node process) run from connect until the first sync ends (replay: the session is live, the backlog \
            applied; the others: `snapshotSynced`, every conversation filled by its policy). The device's CPU is this \
            process's. Each line also checks the SDK's counts: the sum of totalNumberOfMessages and the user's unread \
            total must be what the node holds whatever the policy kept.
            """)

    @OptionGroup var load: WriteLoadOptions
    @Option(help: "Conversations of the user (one sender each).") var conversations = 100
    @Option(help: "Messages per conversation.") var messages = 1_000
    @Option(help: "Comma-separated policies: replay, complete, unread, last:N.") var policies =
        "replay,complete,unread,last:20"
    @Option(help: "Seconds the fill may take before the run gives up.") var fillTimeout: Double = 3600
    @Option(help: "Seconds one first sync may take before the run gives up.") var syncTimeout: Double = 1800

    func validate() throws {
        guard conversations >= 1, messages >= 2 else {
            throw ValidationError("--conversations >= 1 and --messages >= 2")
        }
        guard load.size >= 20 else { throw ValidationError("--size must be at least 20") }
        _ = try parsedPolicies()
    }

    func parsedPolicies() throws -> [(String, SynchronizationPolicy)] {
        try policies.split(separator: ",").map { raw in
            let name = raw.trimmingCharacters(in: .whitespaces)
            switch name {
            case "replay": return (name, .feedReplay)
            case "complete": return (name, .completeHistory)
            case "unread": return (name, .unreadOnly)
            default:
                guard name.hasPrefix("last:"), let n = Int(name.dropFirst(5)), n >= 1 else {
                    throw ValidationError("unknown policy '\(name)' (replay, complete, unread, last:N)")
                }
                return (name, .lastMessages(n))
            }
        }
    }

    func run() async throws {
        BenchSupport.raiseFileLimit()
        let binary = try NodeProcess.binary(load.nodeBinary)
        let node = try await NodeProcess.start(binary: binary, label: "first-sync")
        defer { node.stop() }
        let fillSeconds = try await fill(node)
        progress(
            "first-sync",
            String(
                format: "filled %d conversations × %d messages in %.1f s (not measured)", conversations, messages,
                fillSeconds))
        for (name, policy) in try parsedPolicies() {
            emit(try await firstSync(node, name: name, policy: policy))
        }
    }

    /// Every conversation gets `messages` messages, r0 reads the first half of each.
    private func fill(_ node: NodeProcess) async throws -> Double {
        let start = monotonicNanos()
        let acked = LoadCounter()
        let errors = LoadCounter()
        let ackLatency = LoadLatencies()
        var senders: [MessageSender] = []
        var ids: [ConversationID] = []
        for i in 0..<conversations {
            let peer = try await LoadPeer.connect(node, user: try UserID("s\(i)"), sync: false)
            let conversation = try await peer.createConversation(with: ["r0"])
            ids.append(conversation)
            senders.append(
                MessageSender(
                    peer: peer, conversation: conversation, size: load.size, ackLatency: ackLatency, acked: acked,
                    errors: errors, retry: true))
        }
        let peers = senders.map(\.peer)
        let alive = keepAlive(peers)
        defer { alive.cancel() }
        let fired = LoadCounter()
        let dog = watchdog(peers, deadline: start + UInt64(fillTimeout * 1e9), fired: fired)
        defer { dog.cancel() }
        let half = messages / 2
        try await MessageSender.sendAll(senders, counts: Array(repeating: half, count: conversations), what: "fill")
        // r0 reads everything so far (a read marker is capped at the conversation's latest message).
        let reader = try await LoadPeer.connect(node, user: "r0", sync: false)
        let now = UInt64(max(0, Timestamp.now().millisecondsSince1970))
        for conversation in ids {
            let id = UUID()
            let answer = try await reader.client.request(
                .markAllRead(
                    MarkAllRead(
                        requestID: id, conversationID: conversation,
                        upTo: MessagePosition(physical: now + 86_400_000, logical: 0, node: NodeID(0)))),
                id: id
            ).get()
            guard case .ack = answer else { throw BenchFailure("mark-all-read: \(answer)") }
        }
        await reader.close()
        try await MessageSender.sendAll(
            senders, counts: Array(repeating: messages - half, count: conversations), what: "fill")
        if fired.current > 0 { throw BenchFailure("fill did not finish within \(fillTimeout) s") }
        guard errors.current == 0, acked.current == messages * conversations else {
            throw BenchFailure(
                "fill: \(acked.current) of \(messages * conversations) acknowledged, \(errors.current) errors")
        }
        for p in peers { await p.close() }
        return Double(monotonicNanos() - start) / 1e9
    }

    /// One new device of r0 under `policy`: the result line.
    private func firstSync(_ node: NodeProcess, name: String, policy: SynchronizationPolicy) async throws -> String {
        let directory = try BenchSupport.temporaryDirectory() + "/first-sync-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = LaminaConfiguration(
            nodeURL: URL(string: node.url)!, trust: .certificateAuthorities(URL(fileURLWithPath: node.caFile)),
            dataDirectory: URL(fileURLWithPath: directory))
        configuration.synchronizationPolicy = policy
        let client = try LaminaClient(configuration: configuration, user: "r0")
        let done = LoadCounter()
        let failedFetches = LoadCounter()
        let watcher = Task { [events = client.syncEvents] in
            for await event in events {
                switch event {
                case .state(.live) where policy == .feedReplay: done.add()
                case .snapshotSynced(_, let failed):
                    failedFetches.add(failed)
                    done.add()
                default: break
                }
                if done.current > 0 { return }
            }
        }
        defer { watcher.cancel() }
        let dev = node.dev
        let cpu0 = node.cpuSeconds()
        let device0 = BenchSupport.cpuSeconds(getpid())
        let t0 = monotonicNanos()
        try await client.connect { nonce in try dev.mintToken(user: "r0", nonce: nonce) }
        let deadline = t0 + UInt64(syncTimeout * 1e9)
        while done.current == 0 {
            guard monotonicNanos() < deadline else {
                throw BenchFailure("\(name): the first sync did not end within \(syncTimeout) s")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        let t1 = monotonicNanos()
        let cpu = node.cpuSeconds() - cpu0
        let device = BenchSupport.cpuSeconds(getpid()) - device0
        let counts = try FirstSyncCounts.of(client)
        let expectedUnread = conversations * (messages - messages / 2)
        let countsRight =
            counts.conversations == conversations && counts.total == conversations * messages
            && counts.unread == expectedUnread
        try await client.close()
        var line =
            "lamina first-sync: policy=\(name) conversations=\(conversations) messages_per_conversation=\(messages)"
        line += String(format: " seconds=%.3f node_cpu_s=%.3f device_cpu_s=%.3f", Double(t1 - t0) / 1e9, cpu, device)
        line +=
            " messages_held=\(counts.held) counted_total=\(counts.total) counted_unread=\(counts.unread) counts_right=\(countsRight ? "yes" : "NO")"
        line += " failed_fetches=\(failedFetches.current) loadavg=\(BenchSupport.loadAverage())"
        return line
    }
}
