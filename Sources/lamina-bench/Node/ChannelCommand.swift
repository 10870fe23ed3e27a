import ArgumentParser
import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Channels at scale (SPEC §6.8, issue 36): a channel of M members (10,000) with O of them
/// online (500) takes R messages a second (100). Reports storage rows written per message at
/// 1,000 and at M members (constant: one message row, no feed entry), node CPU per delivered
/// message against a conversation's fan-out in the same run, and a member catching up 10,000
/// channel messages with FETCH_CHANNEL. Sessions run on the node's engine through in-memory
/// outbounds (no TLS), as `lamina-bench presence` does: the cost measured is the engine's and
/// the store's.
struct ChannelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channel",
        abstract: "Channels: rows per message at two member counts, CPU per delivery vs a conversation, a catch-up.")

    @Option(help: "Members of the large channel.") var members = 10_000
    @Option(help: "Members of the small channel (rows per message compared).") var smallMembers = 1_000
    @Option(help: "Members online (sessions).") var online = 500
    @Option(help: "Messages a second.") var rate = 100
    @Option(help: "Seconds each send phase runs.") var seconds = 20.0
    @Option(help: "Participants of the conversation compared (at most 250, all online).") var participants = 250
    @Option(help: "Messages a member catches up.") var catchUp = 10_000

    func run() async throws {
        var configuration = NodeServerConfiguration()
        configuration.port = 0
        configuration.adminPort = -1
        configuration.resources.maxChannelMembers = max(members, smallMembers) + 1
        configuration.dataDirectory = try BenchSupport.temporaryDirectory() + "/channel-\(UUID().uuidString.prefix(8))"
        var logger = Logger(label: "lamina.bench.channel")
        logger.logLevel = .warning
        let node = try await NodeServer.start(
            configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
        let dev = node.prepared.devIdentityProvider!
        let names = try (0..<max(members, smallMembers)).map { try UserID("m\($0)") }
        let sender = names[0]

        // Set-up (not measured): two channels created by m0 through the engine, their other
        // members added straight in the store, a catch-up channel holding `catchUp` messages.
        let senderDevice = try await ChannelBenchDevice.open(sender, engine: node.engine, dev: dev)
        let large = try await Self.create("large", by: senderDevice)
        let small = try await Self.create("small", by: senderDevice)
        let backlog = try await Self.create("backlog", by: senderDevice)
        try await Self.addMembers(names[1..<members], to: large, node: node)
        try await Self.addMembers(names[1..<smallMembers], to: small, node: node)
        try await Self.fill(backlog, messages: catchUp, sender: sender, node: node)
        let devices = try await Self.connect(Array(names[1...online]), node: node, dev: dev)
        print(
            "channel: \(members) members (\(online) online, in-process sessions), \(rate) msg/s for \(Int(seconds)) s per phase"
        )

        // Phase 1 and 2: the same load to channels of `smallMembers` and `members` members.
        for (channel, count) in [(small, smallMembers), (large, members)] {
            let result = try await Self.phase(
                node: node, devices: devices, rate: rate, seconds: seconds,
                send: { i in
                    let id = MessageID.random()
                    return (
                        .sendChannelMessage(
                            SendChannelMessage(messageID: id, channelID: channel, parts: Self.parts(i))), id.uuid
                    )
                }, by: senderDevice)
            let online = devices.count { $0.isMember(of: channel, count: count) }
            print(
                String(
                    format:
                        "  channel of %d members (%d of them online): %d messages, rows per message: %.2f channel-message rows, %.2f feed entries, %.2f conversation-message rows",
                    count, online, result.sent, Double(result.rows.channelMessages) / Double(result.sent),
                    Double(result.rows.feedEntries) / Double(result.sent),
                    Double(result.rows.messages) / Double(result.sent)))
            print(
                String(
                    format:
                        "    delivered %d (%.1f per message); node CPU %.2f s = %.2f µs per delivery, %.0f µs per message",
                    result.delivered, Double(result.delivered) / Double(result.sent), result.cpu,
                    result.cpu / Double(max(result.delivered, 1)) * 1e6, result.cpu / Double(result.sent) * 1e6))
        }

        // Phase 3: a conversation of `participants` users (all online), the same rate.
        let conversation = ConversationID.random()
        let others = Set(names[1..<min(participants, online + 1)])
        // Without receipts: up to 250 participants (SPEC §3.16), as a channel has none.
        let createdConversation = try await senderDevice.command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: others,
                    options: ConversationOptions(isDistinct: false, deliveryReceiptsEnabled: false))),
            id: conversation.uuid)
        guard case .ack = createdConversation else {
            throw BenchFailure("the conversation was not created: \(createdConversation)")
        }
        let result = try await Self.phase(
            node: node, devices: devices, rate: rate, seconds: seconds,
            send: { i in
                let id = MessageID.random()
                return (
                    .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: Self.parts(i))),
                    id.uuid
                )
            }, by: senderDevice)
        print(
            String(
                format:
                    "  conversation of %d participants (all online): %d messages, rows per message: %.2f message rows, %.2f feed entries",
                others.count + 1, result.sent, Double(result.rows.messages) / Double(result.sent),
                Double(result.rows.feedEntries) / Double(result.sent)))
        print(
            String(
                format:
                    "    delivered %d (%.1f per message); node CPU %.2f s = %.2f µs per delivery, %.0f µs per message",
                result.delivered, Double(result.delivered) / Double(result.sent), result.cpu,
                result.cpu / Double(max(result.delivered, 1)) * 1e6, result.cpu / Double(result.sent) * 1e6))

        // Phase 4: a new member catches up the backlog channel's log with FETCH_CHANNEL.
        let reader = devices[0]
        _ = try await reader.command(.joinChannel(ChannelRequest(requestID: UUID(), channelID: backlog)))
        let clock = ContinuousClock()
        let cpu0 = BenchCPU.processSeconds()
        let started = clock.now
        var cursor: UInt64 = 0
        var fetched = 0
        var requests = 0
        while true {
            let before = reader.channelMessages
            let ack = try await reader.command(
                .fetchChannel(FetchChannel(requestID: UUID(), channelID: backlog, after: cursor, count: 10_000)))
            requests += 1
            guard case .ack(let a) = ack, let next = a.cursor else { throw BenchFailure("catch-up refused: \(ack)") }
            let got = reader.channelMessages - before
            fetched += got
            if got < 10_000 || next == cursor { break }
            cursor = next
        }
        let elapsed = (clock.now - started).seconds
        print(
            String(
                format:
                    "  catch-up: %d channel messages in %d FETCH_CHANNEL in %.0f ms (%.1f µs each, %.2f s node CPU)",
                fetched, requests, elapsed * 1e3, elapsed / Double(max(fetched, 1)) * 1e6,
                BenchCPU.processSeconds() - cpu0))
        for device in devices { device.session.closed() }
        senderDevice.session.closed()
        await node.shutdown()
    }

    static func parts(_ i: Int) -> [MessagePart] {
        [MessagePart(id: UUID(), mimeType: .textPlain, content: .inline(Array("message \(i) to the room".utf8)))]
    }

    static func create(_ name: String, by device: ChannelBenchDevice) async throws -> ChannelID {
        let id = ChannelID.random()
        let answer = try await device.command(
            .createChannel(CreateChannel(channelID: id, name: try ChannelName(name))), id: id.uuid)
        guard case .ack = answer else { throw BenchFailure("channel \(name) not created: \(answer)") }
        return id
    }

    static func addMembers(_ users: ArraySlice<UserID>, to channel: ChannelID, node: NodeServer) async throws {
        for start in stride(from: users.startIndex, to: users.endIndex, by: 2_000) {
            let slice = Array(users[start..<min(users.endIndex, start + 2_000)])
            try await node.store.write { tx in
                for user in slice { try tx.addChannelMember(user, to: channel, at: .now()) }
            }
        }
    }

    static func fill(_ channel: ChannelID, messages: Int, sender: UserID, node: NodeServer) async throws {
        for start in stride(from: 0, to: messages, by: 1_000) {
            let count = min(1_000, messages - start)
            try await node.store.write { tx in
                for i in start..<(start + count) {
                    _ = try tx.appendChannelMessage(
                        ChannelMessage(
                            id: .random(), channelID: channel, sender: sender, sentAt: .now(),
                            position: HLCTimestamp(
                                physical: UInt64(1_767_225_600_000 + i), logical: 0, node: NodeID(1)),
                            logSeq: 0, parts: Self.parts(i)))
                }
            }
        }
    }

    struct PhaseResult {
        var sent: Int
        var delivered: Int
        var cpu: Double
        var rows: StoredRowCounts
    }

    /// Sends `rate` commands a second for `seconds` (each awaited by a task of its own), lets
    /// deliveries drain, and measures CPU, deliveries and rows written.
    static func phase(
        node: NodeServer, devices: [ChannelBenchDevice], rate: Int, seconds: Double,
        send: @escaping @Sendable (Int) -> (Frame, UUID), by sender: ChannelBenchDevice
    ) async throws -> PhaseResult {
        let rows0 = try await node.store.read { r in try r.storedRowCounts() }
        let delivered0 = devices.reduce(0) { $0 + $1.deliveries }
        let cpu0 = BenchCPU.processSeconds()
        let clock = ContinuousClock()
        let started = clock.now
        let total = Int(Double(rate) * seconds)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<total {
                let due = started + .seconds(Double(i) / Double(rate))
                if due > clock.now { try await Task.sleep(until: due, clock: clock) }
                let (frame, id) = send(i)
                group.addTask {
                    let answer = try await sender.command(frame, id: id)
                    guard case .ack = answer else { throw BenchFailure("send refused: \(answer)") }
                }
            }
            try await group.waitForAll()
        }
        try await Task.sleep(for: .seconds(2))  // deliveries drain (the sessions' inboxes)
        let rows1 = try await node.store.read { r in try r.storedRowCounts() }
        return PhaseResult(
            sent: total, delivered: devices.reduce(0) { $0 + $1.deliveries } - delivered0,
            cpu: BenchCPU.processSeconds() - cpu0,
            rows: StoredRowCounts(
                channelMessages: rows1.channelMessages - rows0.channelMessages,
                feedEntries: rows1.feedEntries - rows0.feedEntries, messages: rows1.messages - rows0.messages))
    }

    static func connect(_ users: [UserID], node: NodeServer, dev: DevIdentityProvider) async throws
        -> [ChannelBenchDevice]
    {
        var out: [ChannelBenchDevice] = []
        for start in stride(from: 0, to: users.count, by: 200) {
            try await withThrowingTaskGroup(of: ChannelBenchDevice.self) { group in
                for user in users[start..<min(users.count, start + 200)] {
                    group.addTask { try await ChannelBenchDevice.open(user, engine: node.engine, dev: dev) }
                }
                for try await device in group { out.append(device) }
            }
        }
        return out
    }
}

/// One in-process session (channels feature): counts the messages delivered to it (channel
/// messages and conversation messages) and answers awaited command ids.
final class ChannelBenchDevice: SessionOutbound, @unchecked Sendable {
    private let lock = NIOLock()
    private var waiters: [UUID: CheckedContinuation<Frame, Error>] = [:]
    private var delivered = 0
    private var channel = 0
    private var user: UserID = "x"
    private(set) var session: NodeSession!

    /// Channel and conversation messages delivered (live or fetched).
    var deliveries: Int { lock.withLock { delivered } }
    /// Channel messages delivered (live or fetched).
    var channelMessages: Int { lock.withLock { channel } }

    /// Whether this device's user is among the first `count` members (`m0` … `m<count-1>`).
    func isMember(of _: ChannelID, count: Int) -> Bool {
        guard let n = Int(user.rawValue.dropFirst()) else { return false }
        return n < count
    }

    static func open(_ user: UserID, engine: NodeEngine, dev: DevIdentityProvider) async throws -> ChannelBenchDevice {
        let device = ChannelBenchDevice()
        device.user = user
        device.session = engine.openSession(outbound: device)
        device.session.receive(.hello(Hello(features: .all, agent: "lamina-bench")))
        let nonceID = UUID()
        guard
            case .nonce(let nonce) = try await device.command(
                .nonceRequest(NonceRequest(requestID: nonceID)), id: nonceID)
        else { throw BenchFailure("no nonce for \(user)") }
        let token = try dev.mintToken(user: user, nonce: nonce.nonce)
        let authID = UUID()
        guard
            case .authenticated = try await device.command(
                .authenticate(Authenticate(requestID: authID, identityToken: token, deviceID: UUID())), id: authID)
        else { throw BenchFailure("\(user) was not authenticated") }
        return device
    }

    /// Sends a command and waits for its answer (ACK, ERROR, NONCE, AUTHENTICATED).
    @discardableResult
    func command(_ frame: Frame, id: UUID? = nil) async throws -> Frame {
        guard let id = id ?? frame.commandID else { throw BenchFailure("\(frame.type.name) has no id") }
        return try await withCheckedThrowingContinuation { continuation in
            lock.withLock { waiters[id] = continuation }
            session.receive(frame)
        }
    }

    func send(_ frames: [Frame]) {
        for frame in frames {
            let id: UUID?
            switch frame {
            case .nonce(let n): id = n.requestID
            case .authenticated(let a): id = a.requestID
            case .ack(let a): id = a.requestID
            case .error(let e): id = e.requestID
            case .change(let c):
                count([c])
                id = nil
            case .changeBatch(let b):
                count(b.changes)
                id = nil
            default: id = nil
            }
            if let id, let waiter = lock.withLock({ waiters.removeValue(forKey: id) }) {
                waiter.resume(returning: frame)
            }
        }
    }

    private func count(_ changes: [Change]) {
        var messages = 0
        var channelMessages = 0
        for change in changes {
            switch change.event {
            case .channelMessage:
                messages += 1
                channelMessages += 1
            case .messageCreated: messages += 1
            default: break
            }
        }
        lock.withLock {
            delivered += messages
            channel += channelMessages
        }
    }

    func close(with error: ErrorFrame?) {
        let pending = lock.withLock { () -> [CheckedContinuation<Frame, Error>] in
            defer { waiters = [:] }
            return Array(waiters.values)
        }
        for waiter in pending { waiter.resume(throwing: BenchFailure("session closed: \(String(describing: error))")) }
    }
}

/// The process's CPU time (user + system), from getrusage.
enum BenchCPU {
    static func processSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}
