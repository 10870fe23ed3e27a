import ArgumentParser
import Atomics
import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaTransport
import LaminaWire
import NIOCore
import NIOPosix

/// Channels at scale (SPEC §6.8, issue 36): a channel of M members (10,000) with O of them
/// online (500) takes R messages a second (100), on a `lamina-node` child process with every
/// session a real one over TLS + HTTP/2 from this process. Reports storage rows written per
/// message at 1,000 and at M members (constant: one message row, no feed entry), the node's
/// CPU per delivered message against a conversation's fan-out at the same rate in the same
/// run, and a member catching up 10,000 channel messages with FETCH_CHANNEL. Rows are counted
/// through a read-only connection to the node's store; every phase ends on a condition (every
/// send answered, every delivery arrived), never after a fixed wait.
struct ChannelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channel",
        abstract:
            "Channels over TLS: rows per message at two member counts, CPU per delivery vs a conversation, a catch-up.")

    @Option(help: "Members of the large channel.") var members = 10_000
    @Option(help: "Members of the small channel (rows per message compared).") var smallMembers = 1_000
    @Option(help: "Members online (sessions), each on its own TLS connection.") var online = 500
    @Option(help: "Messages a second.") var rate = 100
    @Option(help: "Seconds each send phase runs.") var seconds = 20.0
    @Option(help: "Participants of the conversation compared (at most 250, all online).") var participants = 250
    @Option(help: "Messages a member catches up.") var catchUp = 10_000
    @ArgumentParser.Flag(
        help: "The compared conversation has delivery receipts off too (each recipient then sees only its own status).")
    var bothReceiptsOff = false
    @Option(help: "Seconds a phase may take to reach its condition before the run fails.") var timeout = 300.0
    @Option(help: "The lamina-node binary (default: next to this one).") var nodeBinary: String?

    func validate() throws {
        guard smallMembers >= 2, members >= smallMembers, members <= 1_000_000 else {
            throw ValidationError("--small-members must be at least 2 and at most --members (at most 1,000,000)")
        }
        guard (1..<smallMembers).contains(online) else {
            throw ValidationError("--online must be 1...small-members - 1")
        }
        guard (2...250).contains(participants), participants <= online + 1 else {
            throw ValidationError("--participants must be 2...250 and at most --online + 1")
        }
        guard rate > 0, seconds > 0, catchUp >= 0 else {
            throw ValidationError("--rate and --seconds must be positive, --catch-up not negative")
        }
    }

    func run() async throws {
        BenchSupport.raiseFileLimit()
        let binary = try NodeProcess.binary(nodeBinary)
        let names = try (0..<members).map { try UserID("m\($0)") }
        let sender = names[0]
        let (node, channels) = try await Self.prepareNode(
            binary: binary, names: names, smallMembers: smallMembers, catchUp: catchUp, online: online)
        defer { node.stop() }
        let store = URL(fileURLWithPath: node.dataDirectory).appendingPathComponent(LocalNode.Files.store).path
        let tls = try TLSContext(.client(trust: .caFile(node.caFile)))
        let group = MultiThreadedEventLoopGroup.singleton
        let senderClient = try await BenchSyncClient.connect(url: node.url, tls: tls, group: group)
        try await senderClient.login(user: sender, device: UUID(), dev: node.dev, cursor: 0)
        let counter = DeliveryCounter()
        let devices = try await Self.connect(
            Array(names[1...online]), node: node, tls: tls, group: group, counter: counter)
        print(
            "channel: \(members) members (\(online) online, each a TLS connection) to a lamina-node process, "
                + "\(rate) msg/s for \(Int(seconds)) s per phase; load average \(BenchSupport.loadAverage())")

        // Phases 1 and 2: the same load to channels of `smallMembers` and `members` members;
        // every online member is a member of both.
        for (channel, count) in [(channels.small, smallMembers), (channels.large, members)] {
            let result = try await phase(
                node: node, store: store, counter: counter, expectedPerMessage: online, members: devices,
                by: senderClient
            ) { i in
                let id = MessageID.random()
                return (
                    .sendChannelMessage(SendChannelMessage(messageID: id, channelID: channel, parts: Self.parts(i))),
                    id.uuid
                )
            }
            print(
                String(
                    format:
                        "  channel of %d members (%d online): %d messages; rows per message: %.2f channel-message rows, %.2f feed entries, %.2f conversation-message rows, %.2f replication-log operations",
                    count, online, result.sent, Double(result.rows.channelMessages) / Double(result.sent),
                    Double(result.rows.feedEntries) / Double(result.sent),
                    Double(result.rows.messages) / Double(result.sent),
                    Double(result.rows.operations) / Double(result.sent)))
            result.printCost()
        }

        // Phase 3: a conversation of `participants` users (all online), the same rate; read
        // receipts off (up to 250 participants, SPEC §3.16) and no receipt sent, as a channel has
        // none. (With both switches off every recipient gets an encoding of their own: that
        // path costs O(participants) per delivery, see WRITE-PATH.md.)
        let conversation = ConversationID.random()
        let others = Set(names[1..<participants])
        let created = try await senderClient.request(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: others,
                    options: ConversationOptions(
                        isDistinct: false, deliveryReceiptsEnabled: !bothReceiptsOff, readReceiptsEnabled: false))),
            id: conversation.uuid
        ).get()
        guard case .ack = created else { throw BenchFailure("the conversation was not created: \(created)") }
        let result = try await phase(
            node: node, store: store, counter: counter, expectedPerMessage: others.count, members: devices,
            by: senderClient
        ) { i in
            let id = MessageID.random()
            return (
                .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: Self.parts(i))), id.uuid
            )
        }
        let switches = bothReceiptsOff ? "both receipt switches off" : "read receipts off"
        print(
            "  conversation of \(participants) participants (all online, \(switches)): \(result.sent) messages; "
                + String(
                    format: "rows per message: %.2f message rows, %.2f feed entries, %.2f replication-log operations",
                    Double(result.rows.messages) / Double(result.sent),
                    Double(result.rows.feedEntries) / Double(result.sent),
                    Double(result.rows.operations) / Double(result.sent)))
        result.printCost()

        // Phase 4: a member joins the backlog channel and reads its log with FETCH_CHANNEL.
        if catchUp > 0 { try await catchUpPhase(node: node, reader: devices[0], channel: channels.backlog) }
        await senderClient.close()
        for device in devices { await device.client.close() }
    }

    /// The backlog channel read by one member from logSeq 0 in pages of up to 10,000.
    func catchUpPhase(node: NodeProcess, reader: BenchChannelMember, channel: ChannelID) async throws {
        let join = UUID()
        guard
            case .ack = try await reader.client.request(
                .joinChannel(ChannelRequest(requestID: join, channelID: channel)), id: join
            ).get()
        else { throw BenchFailure("the reader could not join the backlog channel") }
        let clock = ContinuousClock()
        let cpu0 = node.cpuSeconds()
        let started = clock.now
        var cursor: UInt64 = 0
        var fetched = 0
        var requests = 0
        while true {
            let before = reader.channelMessages.load(ordering: .relaxed)
            let id = UUID()
            let answer = try await reader.client.request(
                .fetchChannel(FetchChannel(requestID: id, channelID: channel, after: cursor, count: 10_000)), id: id
            ).get()
            requests += 1
            guard case .ack(let ack) = answer, let next = ack.cursor else {
                throw BenchFailure("catch-up refused: \(answer)")
            }
            // The ACK follows the page's changes on the stream (SPEC §6.8).
            let got = reader.channelMessages.load(ordering: .relaxed) - before
            fetched += got
            if got < 10_000 || next == cursor { break }
            cursor = next
        }
        let elapsed = (clock.now - started).seconds
        guard fetched == catchUp else { throw BenchFailure("caught up \(fetched) of \(catchUp) channel messages") }
        print(
            String(
                format:
                    "  catch-up: %d channel messages in %d FETCH_CHANNEL in %.0f ms (%.0f messages/s; node CPU %.2f s = %.1f µs per message)",
                fetched, requests, elapsed * 1e3, Double(fetched) / elapsed, node.cpuSeconds() - cpu0,
                (node.cpuSeconds() - cpu0) / Double(max(fetched, 1)) * 1e6))
    }

    static func parts(_ i: Int) -> [MessagePart] {
        [MessagePart(id: UUID(), mimeType: .textPlain, content: .inline(Array("message \(i) to the room".utf8)))]
    }

    struct Channels {
        var large: ChannelID
        var small: ChannelID
        var backlog: ChannelID
    }

    /// Starts a node, creates the three channels through m0's session, stops it, adds the
    /// members and the backlog straight into its store (set-up, not measured), and starts it
    /// again on that store with an admin listener and bounds raised for `online` sessions
    /// from one address.
    static func prepareNode(binary: String, names: [UserID], smallMembers: Int, catchUp: Int, online: Int)
        async throws -> (NodeProcess, Channels)
    {
        let data = try BenchSupport.temporaryDirectory() + "/channel-\(UUID().uuidString.prefix(8))"
        let first = try await NodeProcess.start(binary: binary, data: data, port: BenchSupport.freePort())
        let client = try await BenchSyncClient.connect(
            url: first.url, caFile: first.caFile, group: MultiThreadedEventLoopGroup.singleton)
        try await client.login(user: names[0], device: UUID(), dev: first.dev)
        func create(_ name: String) async throws -> ChannelID {
            let id = ChannelID.random()
            let answer = try await client.request(
                .createChannel(CreateChannel(channelID: id, name: try ChannelName(name))), id: id.uuid
            ).get()
            guard case .ack = answer else { throw BenchFailure("channel \(name) not created: \(answer)") }
            return id
        }
        let channels = Channels(
            large: try await create("large"), small: try await create("small"), backlog: try await create("backlog"))
        await client.close()
        first.stop(keepData: true)

        let store = try NodeStore(
            path: URL(fileURLWithPath: data).appendingPathComponent(LocalNode.Files.store).path,
            configuration: StorageConfiguration())
        for (channel, count) in [(channels.large, names.count), (channels.small, smallMembers)] {
            for start in stride(from: 1, to: count, by: 2_000) {
                let slice = names[start..<min(count, start + 2_000)]
                try await store.write { tx in
                    for user in slice { try tx.addChannelMember(user, to: channel, at: .now()) }
                }
            }
        }
        for start in stride(from: 0, to: catchUp, by: 1_000) {
            try await store.write { tx in
                for i in start..<min(catchUp, start + 1_000) {
                    _ = try tx.appendChannelMessage(
                        ChannelMessage(
                            id: .random(), channelID: channels.backlog, sender: names[0], sentAt: .now(),
                            position: HLCTimestamp(
                                physical: UInt64(1_767_225_600_000 + i), logical: 0, node: NodeID(1)),
                            logSeq: 0, parts: Self.parts(i)))
                }
            }
        }
        try store.close()
        let arguments = [
            "--set", "resources.maxChannelMembers=\(names.count + 1)",
            "--set", "resources.maxConnections=\(online + 1_000)",
            "--set", "resources.maxConnectionsPerAddress=\(online + 1_000)",
            "--set", "maxSessions=\(online + 1_000)",
        ]
        let node = try await NodeProcess.start(
            binary: binary, data: data, port: BenchSupport.freePort(), adminPort: BenchSupport.freePort(),
            extraArguments: arguments)
        return (node, channels)
    }

    struct PhaseResult {
        var sent: Int
        var delivered: Int
        var cpu: Double
        var rows: StoredRowCounts

        func printCost() {
            print(
                String(
                    format:
                        "    delivered %d (%.1f per message); node CPU %.2f s = %.2f µs per delivery, %.0f µs per message",
                    delivered, Double(delivered) / Double(sent), cpu, cpu / Double(max(delivered, 1)) * 1e6,
                    cpu / Double(sent) * 1e6))
        }
    }

    /// Sends `rate` commands a second for `seconds`, each answered by its ACK, and ends once the
    /// online sessions hold `expectedPerMessage` deliveries per message: the node's CPU, the
    /// deliveries and the store's rows over that span.
    func phase(
        node: NodeProcess, store: String, counter: DeliveryCounter, expectedPerMessage: Int,
        members: [BenchChannelMember], by sender: BenchSyncClient, _ command: (Int) -> (Frame, UUID)
    ) async throws -> PhaseResult {
        let rows0 = try StoredRowCounts.read(sqliteStoreAt: store)
        let delivered0 = counter.messages.load(ordering: .relaxed)
        let cpu0 = node.cpuSeconds()
        let clock = ContinuousClock()
        let started = clock.now
        let total = Int(Double(rate) * seconds)
        let refused = ManagedAtomic(0)
        let answered = ManagedAtomic(0)
        for i in 0..<total {
            let due = started + .seconds(Double(i) / Double(rate))
            if due > clock.now { try await Task.sleep(until: due, clock: clock) }
            let (frame, id) = command(i)
            sender.request(frame, id: id).whenComplete { result in
                if case .success(.ack) = result {} else { refused.wrappingIncrement(ordering: .relaxed) }
                answered.wrappingIncrement(ordering: .relaxed)
            }
        }
        let expected = total * expectedPerMessage
        try await BenchCondition.until(
            "every send answered and delivered", timeout: timeout,
            progress: {
                "(\(answered.load(ordering: .relaxed)) of \(total) answered, "
                    + "\(counter.messages.load(ordering: .relaxed) - delivered0) of \(expected) delivered)"
            }
        ) {
            // A session the node ended (e.g. cut as a slow reader) gets nothing more: stop.
            if let failed = members.lazy.compactMap({ $0.client.failure.withLockedValue { $0 } }).first {
                throw BenchFailure("a member's session failed: \(failed)")
            }
            return answered.load(ordering: .relaxed) == total
                && (refused.load(ordering: .relaxed) > 0
                    || counter.messages.load(ordering: .relaxed) - delivered0 >= expected)
        }
        guard refused.load(ordering: .relaxed) == 0 else {
            throw BenchFailure("\(refused.load(ordering: .relaxed)) of \(total) sends were refused")
        }
        let cpu = node.cpuSeconds() - cpu0
        let rows1 = try StoredRowCounts.read(sqliteStoreAt: store)
        return PhaseResult(
            sent: total, delivered: counter.messages.load(ordering: .relaxed) - delivered0, cpu: cpu,
            rows: rows1.since(rows0))
    }

    /// Logs the online members in, 100 at a time, each on a TLS connection of its own.
    static func connect(
        _ users: [UserID], node: NodeProcess, tls: TLSContext, group: EventLoopGroup, counter: DeliveryCounter
    ) async throws -> [BenchChannelMember] {
        var out: [BenchChannelMember] = []
        for start in stride(from: 0, to: users.count, by: 100) {
            try await withThrowingTaskGroup(of: BenchChannelMember.self) { tasks in
                for user in users[start..<min(users.count, start + 100)] {
                    tasks.addTask {
                        let client = try await BenchSyncClient.connect(url: node.url, tls: tls, group: group)
                        let member = BenchChannelMember(client: client)
                        try await client.observe { frame in member.count(frame, into: counter) }
                        try await client.login(user: user, device: UUID(), dev: node.dev, cursor: 0)
                        return member
                    }
                }
                for try await member in tasks { out.append(member) }
            }
        }
        return out
    }
}

/// Messages (channel and conversation) delivered to every online member's session.
final class DeliveryCounter: Sendable {
    let messages = ManagedAtomic(0)
}

/// One online member: its session, and the channel messages it received (live or fetched).
final class BenchChannelMember: Sendable {
    let client: BenchSyncClient
    let channelMessages = ManagedAtomic(0)

    init(client: BenchSyncClient) { self.client = client }

    /// Counts the messages in `frame` (on the stream's event loop).
    func count(_ frame: Frame, into counter: DeliveryCounter) {
        let changes: [Change]
        switch frame {
        case .change(let change): changes = [change]
        case .changeBatch(let batch): changes = batch.changes
        default: return
        }
        var messages = 0
        var channel = 0
        for change in changes {
            switch change.event {
            case .channelMessage:
                messages += 1
                channel += 1
            case .messageCreated: messages += 1
            default: break
            }
        }
        if messages > 0 { counter.messages.wrappingIncrement(by: messages, ordering: .relaxed) }
        if channel > 0 { channelMessages.wrappingIncrement(by: channel, ordering: .relaxed) }
    }
}
