import ArgumentParser
import Foundation
import LaminaModel
import LaminaNode
import LaminaWire
import Logging
import NIOCore
import NIOPosix

/// Messages durably accepted per second and ACK latency against a real node (in-process,
/// temp data directory), for a given number of concurrent senders.
struct NodeLoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "node-load",
        abstract: "Send messages to a node; report messages/s acknowledged and p50/p99 ACK latency.")

    @Option(help: "Concurrent senders (one user, one connection each).") var senders = 1
    @Option(help: "Messages per sender.") var messages = 2_000
    @Option(help: "Commands in flight per sender (1: wait for each ACK).") var window = 1
    @Option(help: "Message text size in bytes.") var size = 64

    func run() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        var configuration = NodeServerConfiguration()
        configuration.port = 0
        configuration.adminPort = -1
        configuration.dataDirectory =
            try BenchSupport.temporaryDirectory() + "/node-load-\(UUID().uuidString.prefix(8))"
        var logger = Logger(label: "lamina.bench.node")
        logger.logLevel = .warning
        let node = try await NodeServer.start(configuration: configuration, group: group, logger: logger)
        let dev = node.prepared.devIdentityProvider!
        let receiver: UserID = "bench-receiver"
        let text = String(repeating: "x", count: max(1, size))

        // Set-up (not measured): each sender logs in and creates its conversation.
        var clients: [(BenchSyncClient, ConversationID)] = []
        for i in 0..<senders {
            let client = try await BenchSyncClient.connect(
                url: node.url, caFile: node.prepared.certificatePath, group: group)
            try await client.login(user: try UserID("sender-\(i)"), device: UUID(), dev: dev)
            let conversation = ConversationID.random()
            let answer = try await client.request(
                .createConversation(
                    CreateConversation(
                        conversationID: conversation, participants: [try UserID("sender-\(i)"), receiver],
                        options: ConversationOptions(isDistinct: false))), id: conversation.uuid
            ).get()
            guard case .ack = answer else { throw BenchFailure("create conversation: \(answer)") }
            clients.append((client, conversation))
        }

        let clock = ContinuousClock()
        let started = clock.now
        let latencies = try await withThrowingTaskGroup(of: [Duration].self) { group in
            for (client, conversation) in clients {
                group.addTask {
                    try await Self.send(
                        client: client, conversation: conversation, count: messages, window: window, text: text)
                }
            }
            var all: [Duration] = []
            for try await part in group { all.append(contentsOf: part) }
            return all
        }
        let elapsed = clock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let sorted = latencies.sorted()
        func ms(_ d: Duration) -> String {
            String(format: "%.2f ms", Double(d.components.seconds) * 1e3 + Double(d.components.attoseconds) / 1e15)
        }
        let total = latencies.count
        print("node-load: \(senders) sender(s) x \(messages) messages, window \(window), \(size)-byte text")
        print(String(format: "  acknowledged: %d in %.2f s = %.0f messages/s", total, seconds, Double(total) / seconds))
        print(
            "  ACK latency: p50 \(ms(sorted[total / 2]))  p99 \(ms(sorted[min(total - 1, total * 99 / 100)]))  max \(ms(sorted[total - 1]))"
        )
        print("  store: \(node.store.writerStatistics)")
        for (client, _) in clients { await client.close() }
        await node.shutdown()
    }

    /// Sends `count` messages keeping `window` in flight; the ACK latency of each.
    static func send(client: BenchSyncClient, conversation: ConversationID, count: Int, window: Int, text: String)
        async throws
        -> [Duration]
    {
        let clock = ContinuousClock()
        var inFlight: [EventLoopFuture<Duration>] = []
        var latencies: [Duration] = []
        latencies.reserveCapacity(count)
        let parts = [try MessagePart(text: text)]
        for _ in 0..<count {
            if inFlight.count >= window { latencies.append(try await inFlight.removeFirst().get()) }
            let id = MessageID.random()
            let start = clock.now
            let future = client.request(
                .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: parts)), id: id.uuid
            )
            .flatMapThrowing { frame -> Duration in
                guard case .ack = frame else { throw BenchFailure("not acknowledged: \(frame)") }
                return clock.now - start
            }
            inFlight.append(future)
        }
        for future in inFlight { latencies.append(try await future.get()) }
        return latencies
    }
}
