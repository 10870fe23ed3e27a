import ArgumentParser
import Foundation
import LaminaClient
import LaminaModel
import LaminaWire

/// `lamina-bench one-thread-sync` (issue 16 item 4): new SDK devices (one per thread of the
/// cooperative pool, `--devices`) each replay a conversation's messages while their databases
/// are slow (`StoreConfiguration.writeLatency` on every write transaction), and a task on Swift's
/// cooperative pool ticks every 10 ms meanwhile. Run under `LIBDISPATCH_COOPERATIVE_POOL_STRICT=1`
/// (a pool of one thread where libdispatch honours it; Linux's keeps one thread per CPU, hence
/// one device per CPU), the ticks show whether the SDK's sync holds pool threads while SQLite
/// works: the result line gives the share of the expected ticks that happened, and the run
/// fails below `--min-progress`. With `--policy content` each message carries a rich text/plain
/// part (3 KB) that the devices download by themselves: the content manager's store writes
/// (marking a download begun, recording it finished) go through GRDB's async API too.
struct OneThreadSyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "one-thread-sync",
        abstract:
            "A device's sync with a slow database while a cooperative-pool task ticks: the share of ticks that ran.")

    @OptionGroup var load: WriteLoadOptions
    @Option(help: "Messages of the conversation each device replays.") var messages = 2_000
    @Option(help: "Devices syncing at once (default: one per CPU, the cooperative pool's width on Linux).")
    var devices = ProcessInfo.processInfo.activeProcessorCount
    @Option(help: "Milliseconds added to every write transaction of the device's store.") var writeLatencyMs = 200
    @Option(help: "The least share of expected ticks (0...1) for the run to pass.") var minProgress = 0.5
    @Option(help: "Seconds the sync may take before the run gives up.") var syncTimeout: Double = 600
    @Option(
        help:
            "How the new device syncs: replay (the whole feed), complete (a snapshot, then each conversation's history fetched: the handshake, the snapshot's bookkeeping and the history answers all write), or content (replay of messages with a rich part each, auto-downloaded)."
    )
    var policy = "replay"

    func validate() throws {
        guard ["replay", "complete", "content"].contains(policy) else {
            throw ValidationError("--policy is replay, complete or content")
        }
        guard messages >= 1, (1...64).contains(devices), (0...10_000).contains(writeLatencyMs),
            (0...1).contains(minProgress)
        else {
            throw ValidationError(
                "--messages >= 1, --devices 1...64, --write-latency-ms 0...10000, --min-progress 0...1")
        }
    }

    func run() async throws {
        let binary = try NodeProcess.binary(load.nodeBinary)
        let node = try await NodeProcess.start(binary: binary, label: "one-thread-sync")
        defer { node.stop() }
        // Set-up: s<i> sends the messages to r<i> (not measured).
        let directory = try BenchSupport.temporaryDirectory() + "/one-thread-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let conversations =
            policy == "content"
            ? try await Self.fillWithContent(node, devices: devices, messages: messages, directory: directory)
            : try await fill(node)

        var configuration = LaminaConfiguration(
            nodeURL: URL(string: node.url)!, trust: .certificateAuthorities(URL(fileURLWithPath: node.caFile)),
            dataDirectory: URL(fileURLWithPath: directory))
        configuration.synchronizationPolicy = policy == "complete" ? .completeHistory : .feedReplay
        configuration.store.writeLatency = .milliseconds(writeLatencyMs)
        let clients = try (0..<devices).map { i in
            try LaminaClient(configuration: configuration, user: try UserID("r\(i)"))
        }
        let downloads = clients.map { _ in LoadCounter() }
        var watchers: [Task<Void, Never>] = []
        for (client, downloaded) in zip(clients, downloads) {
            watchers.append(
                Task { [events = client.contentTransferEvents()] in
                    for await event in events {
                        if case .completed(_, .download) = event { downloaded.add() }
                    }
                })
        }
        let live = LoadCounter()
        for client in clients {
            watchers.append(
                Task { [events = client.syncEvents] in
                    for await event in events where event == .state(.live) {
                        live.add()
                        return
                    }
                })
        }
        defer { for w in watchers { w.cancel() } }
        let ticks = LoadCounter()
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(10))
                ticks.add()
            }
        }
        defer { ticker.cancel() }
        let dev = node.dev
        let t0 = monotonicNanos()
        let ticks0 = ticks.current
        for (i, client) in clients.enumerated() {
            let user = try UserID("r\(i)")
            try await client.connect { nonce in try dev.mintToken(user: user, nonce: nonce) }
        }
        let deadline = t0 + UInt64(syncTimeout * 1e9)
        // A count query every 20 ms: this task shares the pool with the ticker.
        func done() throws -> Bool {
            guard live.current == devices else { return false }
            for (client, conversation) in zip(clients, conversations) {
                let held = Query<StoredMessage>(
                    predicate: .property(MessageProperty.conversation, .equalTo, .conversation(conversation)))
                if try client.count(held) < messages { return false }
            }
            return policy != "content" || downloads.allSatisfy { $0.current >= messages }
        }
        while try !done() {
            guard monotonicNanos() < deadline else {
                throw BenchFailure("the sync did not end within \(syncTimeout) s")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let seconds = Double(monotonicNanos() - t0) / 1e9
        let ran = ticks.current - ticks0
        ticker.cancel()
        for client in clients { try await client.close() }
        let expected = max(1, Int(seconds * 100))
        let progress = Double(ran) / Double(expected)
        let strict = ProcessInfo.processInfo.environment["LIBDISPATCH_COOPERATIVE_POOL_STRICT"] ?? "unset"
        emit(
            "lamina one-thread-sync: policy=\(policy) devices=\(devices) messages=\(messages) write_latency_ms=\(writeLatencyMs)"
                + String(
                    format: " seconds=%.3f ticks=%d expected_ticks=%d progress=%.2f", seconds, ran, expected, progress)
                + " downloads=\(downloads.map(\.current).reduce(0, +)) pool_strict=\(strict)")
        if progress < minProgress {
            throw BenchFailure(
                String(
                    format: "the cooperative pool starved: %.0f%% of the expected ticks ran (at least %.0f%% wanted)",
                    progress * 100, minProgress * 100))
        }
    }

    /// s<i> sends the messages to r<i> over the raw protocol; returns the conversations.
    private func fill(_ node: NodeProcess) async throws -> [ConversationID] {
        let acked = LoadCounter()
        let errors = LoadCounter()
        let latency = LoadLatencies()
        var senders: [MessageSender] = []
        var conversations: [ConversationID] = []
        for i in 0..<devices {
            let peer = try await LoadPeer.connect(node, user: try UserID("s\(i)"), sync: false)
            let conversation = try await peer.createConversation(with: [try UserID("r\(i)")])
            conversations.append(conversation)
            senders.append(
                MessageSender(
                    peer: peer, conversation: conversation, size: load.size, ackLatency: latency, acked: acked,
                    errors: errors, retry: true))
        }
        try await MessageSender.sendAll(senders, counts: Array(repeating: messages, count: devices), what: "fill")
        guard errors.current == 0, acked.current == messages * devices else {
            throw BenchFailure("fill: \(acked.current) of \(messages * devices) acknowledged")
        }
        for s in senders { await s.peer.close() }
        return conversations
    }
}

extension OneThreadSyncCommand {
    /// s<i> (an SDK client with a normal store) sends `messages` messages to r<i>, each with a
    /// 3 KB text/plain part (rich content: r<i>'s default rules download it by itself), and
    /// waits until every one is sent; returns the conversations.
    static func fillWithContent(_ node: NodeProcess, devices: Int, messages: Int, directory: String) async throws
        -> [ConversationID]
    {
        let dev = node.dev
        var conversations: [ConversationID] = []
        for i in 0..<devices {
            let user = try UserID("s\(i)")
            let sender = try LaminaClient(
                configuration: LaminaConfiguration(
                    nodeURL: URL(string: node.url)!, trust: .certificateAuthorities(URL(fileURLWithPath: node.caFile)),
                    dataDirectory: URL(fileURLWithPath: directory + "/s\(i)")), user: user)
            try await sender.connect { nonce in try dev.mintToken(user: user, nonce: nonce) }
            let conversation = try sender.newConversation(
                participants: [try UserID("r\(i)")], options: ConversationOptions(isDistinct: false)
            ).id
            conversations.append(conversation)
            var ids: [MessageID] = []
            for m in 0..<messages {
                let text = Data(String(repeating: "message \(m) of s\(i); ", count: 3_072 / 20).utf8)
                let part = try MessagePart.with(mimeType: "text/plain", data: text, staging: sender.staging)
                guard case .external = part.content else {
                    throw BenchFailure("a \(text.count)-byte part did not become rich content")
                }
                ids.append(try sender.send(sender.newMessage(parts: [part]), in: conversation).id)
            }
            let deadline = monotonicNanos() + 300_000_000_000
            while try !ids.allSatisfy({ id in try sender.isSent(id) }) {
                guard monotonicNanos() < deadline else {
                    throw BenchFailure("s\(i)'s messages were not all sent within 300 s")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            try await sender.close()
        }
        return conversations
    }
}
