import ArgumentParser
import Foundation
import GRDB
import LaminaLocalNode
import LaminaModel
import LaminaWire
import NIOCore
import NIOPosix

/// What a reaction costs the node against a message send, in one run (issue 38 item 1): one user
/// on one TLS + HTTP/2 sync stream to a `lamina-node` child process sends `--operations` messages
/// to a conversation of `--participants`, then one REACT adding a reaction to each of them, then
/// one removing it (every REACT changes a reaction), each phase with at most `--window`
/// unacknowledged. Per operation: the node's CPU (`/proc/<pid>/stat`) and the rows
/// the store gained (read through a read-only connection to the node's SQLite file), by table.
struct ReactionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reaction",
        abstract: "A reaction's cost (node CPU, rows written) against a message send's, in one run.")

    @Option(help: "Messages sent, and REACTs made (1...100000).") var operations = 5_000
    @Option(help: "Participants of the conversation, the sender included (2...25).") var participants = 5
    @Option(help: "Most commands unacknowledged (1...1000).") var window = 32
    @Option(help: "The lamina-node binary (default: next to this one).") var nodeBinary: String?

    /// Rows of the tables a send or a reaction writes.
    struct Rows {
        var messages = 0
        var reactions = 0
        var feed = 0
        var operations = 0
        var idempotency = 0

        static func read(_ path: String) throws -> Rows {
            var configuration = Configuration()
            configuration.readonly = true
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            return try queue.read { db in
                func count(_ sql: String) throws -> Int { try Int.fetchOne(db, sql: sql) ?? 0 }
                return Rows(
                    messages: try count("SELECT count(*) FROM messages"),
                    reactions: try count("SELECT count(*) FROM message_reactions"),
                    feed: try count("SELECT (SELECT count(*) FROM feed_entries) + (SELECT count(*) FROM feed_tail)"),
                    operations: try count("SELECT count(*) FROM replication_log"),
                    idempotency: try count("SELECT count(*) FROM idempotency_records"))
            }
        }

        static func - (a: Rows, b: Rows) -> Rows {
            Rows(
                messages: a.messages - b.messages, reactions: a.reactions - b.reactions, feed: a.feed - b.feed,
                operations: a.operations - b.operations, idempotency: a.idempotency - b.idempotency)
        }

        var total: Int { messages + reactions + feed + operations + idempotency }

        func perOperation(_ n: Int) -> String {
            let d = Double(n)
            return String(
                format:
                    "rows/op %.2f (messages %.2f, message_reactions %.2f, feed %.2f, replication_log %.2f, idempotency %.2f)",
                Double(total) / d, Double(messages) / d, Double(reactions) / d, Double(feed) / d,
                Double(operations) / d, Double(idempotency) / d)
        }
    }

    func run() async throws {
        guard (1...100_000).contains(operations) else { throw ValidationError("--operations must be 1...100000") }
        guard (2...25).contains(participants) else { throw ValidationError("--participants must be 2...25") }
        guard (1...1_000).contains(window) else { throw ValidationError("--window must be 1...1000") }
        let node = try await NodeProcess.start(binary: NodeProcess.binary(nodeBinary), label: "reaction")
        defer { node.stop() }
        let store = URL(fileURLWithPath: node.dataDirectory).appendingPathComponent(LocalNode.Files.store).path
        let client = try await BenchSyncClient.connect(
            url: node.url, caFile: node.caFile, group: MultiThreadedEventLoopGroup.singleton)
        try await client.login(user: "bench-alice", device: UUID(), dev: node.dev, cursor: 0)
        let conversation = ConversationID.random()
        let others = Set((1..<participants).map { try! UserID("bench-user-\($0)") })
        let create = Frame.createConversation(
            CreateConversation(
                conversationID: conversation, participants: others, options: ConversationOptions(isDistinct: false)))
        guard case .ack = try await client.request(create, id: conversation.uuid).get() else {
            throw BenchFailure("the conversation was not created")
        }
        var messages: [MessageID] = []
        let text = try MessagePart(text: String(repeating: "x", count: 100))
        let send = try await phase("send", node: node, store: store, client: client) { _ in
            let id = MessageID.random()
            messages.append(id)
            return (.sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: [text])), id.uuid)
        }
        // One REACT per message: an add (a reaction appears), then a remove (it goes away).
        let sent = messages
        func reacting(_ op: ReactionOp) -> (Int) -> (Frame, UUID) {
            { i in
                let id = UUID()
                return (
                    .react(
                        React(requestID: id, conversationID: conversation, messageID: sent[i], key: "+1", op: op)),
                    id
                )
            }
        }
        let add = try await phase("react add", node: node, store: store, client: client, reacting(.add))
        let remove = try await phase("react remove", node: node, store: store, client: client, reacting(.remove))
        print(
            String(
                format: "lamina reaction: operations=%d participants=%d window=%d load=%@",
                operations, participants, window, BenchSupport.loadAverage()))
        for (name, result) in [("send", send), ("react add", add), ("react remove", remove)] {
            print(
                String(
                    format: "  %@: %.0f ops/s, node CPU %.1f µs/op; ", name, Double(operations) / result.seconds,
                    result.cpu * 1e6 / Double(operations)) + result.rows.perOperation(operations))
        }
        print(
            String(
                format: "  node CPU of a reaction against a send: add %.2f, remove %.2f", add.cpu / max(send.cpu, 1e-9),
                remove.cpu / max(send.cpu, 1e-9)))
        await client.close()
    }

    struct PhaseResult {
        var seconds: Double
        var cpu: Double
        var rows: Rows
    }

    /// Runs `operations` commands made by `command`, at most `window` unanswered; every one must
    /// be acknowledged.
    func phase(
        _ name: String, node: NodeProcess, store: String, client: BenchSyncClient,
        _ command: (Int) throws -> (Frame, UUID)
    ) async throws -> PhaseResult {
        let rows0 = try Rows.read(store)
        let cpu0 = node.cpuSeconds()
        let clock = ContinuousClock()
        let start = clock.now
        var pending: [EventLoopFuture<Frame>] = []
        for i in 0..<operations {
            if pending.count >= window {
                let answer = try await pending.removeFirst().get()
                guard case .ack = answer else { throw BenchFailure("\(name) \(i) answered \(answer)") }
            }
            let (frame, id) = try command(i)
            pending.append(client.request(frame, id: id))
        }
        for future in pending {
            let answer = try await future.get()
            guard case .ack = answer else { throw BenchFailure("\(name) answered \(answer)") }
        }
        let elapsed = clock.now - start
        let cpu = node.cpuSeconds() - cpu0
        let rows = try Rows.read(store) - rows0
        return PhaseResult(
            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, cpu: cpu,
            rows: rows)
    }
}
