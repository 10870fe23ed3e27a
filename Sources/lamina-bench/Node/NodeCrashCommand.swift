import ArgumentParser
import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaProcess
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

/// The kill -9 scenario: a client sends messages to a `lamina-node` child process, which is
/// killed with SIGKILL partway and restarted on the same data directory; the client retries
/// what was not acknowledged (same ids). Then every acknowledged message must be present, once.
struct NodeCrashCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "node-crash",
        abstract: "Send messages while the node is killed with SIGKILL and restarted; count losses and duplicates.")

    @Option(help: "Messages to send.") var messages = 10_000
    @Option(help: "Kill the node after this many messages were sent.") var killAfter = 5_000
    @Option(help: "Commands in flight.") var window = 32
    @Option(help: "The lamina-node binary (default: next to lamina-bench).") var node: String?

    func run() async throws {
        let binary =
            node
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("lamina-node").path
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw ValidationError("no lamina-node at \(binary)")
        }
        let data = try BenchSupport.temporaryDirectory() + "/node-crash-\(UUID().uuidString.prefix(8))"
        let group = MultiThreadedEventLoopGroup.singleton
        let port = try Self.freePort(group)
        let url = "https://127.0.0.1:\(port)"

        var process = try await Self.launch(binary, data: data, port: port)
        let devDirectory = URL(fileURLWithPath: data).appendingPathComponent(NodeBootstrap.Files.devIdentity)
        let dev = try DevIdentityProvider.loadOrCreate(in: devDirectory)
        let ca = URL(fileURLWithPath: data).appendingPathComponent(NodeBootstrap.Files.certificate).path
        let alice: UserID = "alice"
        let device = UUID()
        let conversation = ConversationID.random()
        let ids = (0..<messages).map { _ in MessageID.random() }
        // A retry is the same command: same message id and same part ids (a new part id makes
        // it a different message under a used id, which the node rightly refuses as id-in-use).
        let partIDs = (0..<messages).map { _ in UUID() }
        let acknowledged = NIOLockedValueBox(Set<MessageID>())

        var client = try await BenchSyncClient.connect(url: url, caFile: ca, group: group)
        try await client.login(user: alice, device: device, dev: dev)
        guard
            case .ack = try await client.request(
                .createConversation(
                    CreateConversation(
                        conversationID: conversation, participants: [alice, "bob"],
                        options: ConversationOptions(isDistinct: false))),
                id: conversation.uuid
            ).get()
        else { throw BenchFailure("create conversation failed") }

        func send(_ index: Int, on client: BenchSyncClient) -> EventLoopFuture<Void> {
            let id = ids[index]
            let parts = [try! MessagePart(id: partIDs[index], text: "message \(index)")]
            return client.request(
                .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: parts)), id: id.uuid
            )
            .map { frame in if case .ack = frame { _ = acknowledged.withLockedValue { $0.insert(id) } } }
        }

        // Phase 1: send until `killAfter`, then SIGKILL with up to `window` commands in flight.
        var inFlight: [EventLoopFuture<Void>] = []
        for index in 0..<min(killAfter, messages) {
            if inFlight.count >= window { try? await inFlight.removeFirst().get() }
            inFlight.append(send(index, on: client))
        }
        Self.progress("sent \(min(killAfter, messages)); SIGKILL")
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        Self.progress("node killed")
        for future in inFlight { try? await future.get() }
        let ackedBeforeKill = acknowledged.withLockedValue { $0.count }
        await client.close()

        // Phase 2: restart, retry everything unacknowledged (same ids, in order), send the rest.
        process = try await Self.launch(binary, data: data, port: port)
        Self.progress("node restarted")
        client = try await BenchSyncClient.connect(url: url, caFile: ca, group: group)
        try await client.login(user: alice, device: device, dev: dev)
        var retried = 0
        inFlight = []
        for index in 0..<messages where !acknowledged.withLockedValue({ $0.contains(ids[index]) }) {
            if index < killAfter { retried += 1 }
            if inFlight.count >= window { try await inFlight.removeFirst().get() }
            inFlight.append(send(index, on: client))
        }
        for future in inFlight { try await future.get() }
        await client.close()

        // Count: a fresh device of Bob syncs the whole feed.
        let counts = NIOLockedValueBox([MessageID: Int]())
        let bob = try await BenchSyncClient.connect(url: url, caFile: ca, group: group)
        try await bob.observe { frame in
            let changes: [Change]
            switch frame {
            case .change(let c): changes = [c]
            case .changeBatch(let b): changes = b.changes
            default: changes = []
            }
            for change in changes {
                if case .messageCreated(let m) = change.event { counts.withLockedValue { $0[m.id, default: 0] += 1 } }
            }
        }
        try await bob.login(user: "bob", device: UUID(), dev: dev, cursor: 0)
        await bob.close()
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()

        let finalCounts = counts.withLockedValue { $0 }
        let acked = acknowledged.withLockedValue { $0 }
        let missing = acked.filter { (finalCounts[$0] ?? 0) == 0 }.count
        let duplicates = finalCounts.values.filter { $0 > 1 }.count
        print("node-crash: \(messages) messages, SIGKILL after \(killAfter) sent, window \(window)")
        print("  acknowledged before the kill: \(ackedBeforeKill)")
        print("  retried after restart (unacknowledged at the kill): \(retried)")
        print("  acknowledged in total: \(acked.count)")
        print("  present after restart: \(finalCounts.count) distinct, \(finalCounts.values.reduce(0, +)) copies")
        print("  acknowledged but missing: \(missing)")
        print("  duplicates: \(duplicates)")
        print("  exit code of the final SIGTERM: \(process.terminationStatus)")
        if missing > 0 || duplicates > 0 { throw ExitCode(1) }
    }

    static func launch(_ binary: String, data: String, port: Int) async throws -> ChildProcess {
        try await NodeProcess.launch(binary, data: data, port: port)
    }

    static func progress(_ text: String) {
        FileHandle.standardError.write(Data("node-crash: \(text)\n".utf8))
    }

    static func freePort(_ group: EventLoopGroup) throws -> Int {
        let channel = try ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).wait()
        let port = channel.localAddress!.port!
        try channel.close().wait()
        return port
    }
}
