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

/// Presence at scale (SPEC §6.6, issue 36): N users online on one in-process node, each
/// following F others, each changing status every few seconds; then a storm (every user
/// reconnects at once) while a canary sends messages. Sessions run on the node's engine
/// through an in-memory outbound (no TLS: the cost measured is the engine's presence path,
/// not the transport's), so the node's CPU per change and per delivered update is the
/// process's CPU over the phase.
struct PresenceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "presence",
        abstract: "Presence fan-out: CPU per change and per update, writes per change, memory per user, a storm.")

    @Option(help: "Users online.") var users = 10_000
    @Option(help: "Users each user follows (explicitly).") var follows = 50
    @Option(help: "Seconds between one user's status changes.") var interval = 5.0
    @Option(help: "Seconds the change phase runs.") var seconds = 20.0
    @Option(help: "Canary messages during the storm (one every 10 ms).") var canary = 300

    func run() async throws {
        var configuration = NodeServerConfiguration()
        configuration.port = 0
        configuration.adminPort = -1
        // Every login holds a nonce for its lifetime (replay protection): the storm logs everyone
        // in a second time, past the node's default bound of 20,000.
        configuration.resources.nonces.perNode = max(20_000, 3 * users)
        configuration.dataDirectory = try BenchSupport.temporaryDirectory() + "/presence-\(UUID().uuidString.prefix(8))"
        var logger = Logger(label: "lamina.bench.presence")
        logger.logLevel = .warning
        let node = try await NodeServer.start(
            configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
        let dev = node.prepared.devIdentityProvider!
        let names = try (0..<users).map { try UserID("p\($0)") }

        // Set-up (not measured): the follow graph, F random others per user, in a few transactions.
        var generator = SystemRandomNumberGenerator()
        for start in stride(from: 0, to: users, by: 2_000) {
            let slice = start..<min(users, start + 2_000)
            let edges = slice.map { i -> (UserID, [UserID]) in
                var chosen = Set<Int>()
                while chosen.count < min(follows, users - 1) {
                    let j = Int.random(in: 0..<users, using: &generator)
                    if j != i { chosen.insert(j) }
                }
                return (names[i], chosen.map { names[$0] })
            }
            try await node.store.write { tx in
                for (follower, followed) in edges {
                    for user in followed { try tx.follow(user, by: follower, at: .now()) }
                }
            }
        }

        let rssBefore = BenchSupport.residentBytes()
        let clock = ContinuousClock()
        var started = clock.now
        var devices = try await Self.connect(names, node: node, dev: dev)
        let connectTime = clock.now - started
        try await Self.settle()
        let perUser = Double(BenchSupport.residentBytes() - rssBefore) / Double(users)
        print("presence: \(users) users online (in-process sessions), each following \(follows)")
        print(
            String(
                format: "  connected in %.1f s; memory per online user %.0f bytes (RSS)", connectTime.seconds, perUser))

        // Change phase: every user picks a new status every `interval` seconds, spread evenly.
        let counts = node.engine.presenceCounts
        let changes0 = counts.visibleChanges.load(ordering: .relaxed)
        let updates0 = counts.followerUpdates.load(ordering: .relaxed)
        let frames0 = devices.reduce(0) { $0 + $1.presenceFrames }
        let writes0 = node.store.writerStatistics.transactions
        let cpu0 = BenchCPU.processSeconds()
        started = clock.now
        let statuses: [PresenceStatus] = [.available, .away, .busy]
        var sent = 0
        let total = Int(Double(users) * seconds / interval)
        let gap = interval / Double(users)
        while sent < total {
            let due = Int((clock.now - started).seconds / gap)
            while sent < min(due, total) {
                let device = devices[sent % users]
                device.session.receive(
                    .setPresence(SetPresence(requestID: UUID(), status: statuses[(sent / users + 1) % statuses.count])))
                sent += 1
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        try await Self.settle()
        let elapsed = (clock.now - started).seconds
        let cpu = BenchCPU.processSeconds() - cpu0
        let visible = counts.visibleChanges.load(ordering: .relaxed) - changes0
        let addressed = counts.followerUpdates.load(ordering: .relaxed) - updates0
        let delivered = devices.reduce(0) { $0 + $1.presenceFrames } - frames0
        let writes = node.store.writerStatistics.transactions - writes0
        print(
            String(
                format: "  %d status changes in %.1f s (%.0f/s); %d visible changes with followers online", sent,
                elapsed, Double(sent) / elapsed, visible))
        print("  updates addressed to followers: \(addressed); presence frames delivered to sessions: \(delivered)")
        print(
            String(
                format: "  node CPU: %.1f s = %.1f µs per visible change, %.2f µs per delivered update", cpu,
                cpu / Double(max(visible, 1)) * 1e6, cpu / Double(max(delivered, 1)) * 1e6))
        print(
            "  storage transactions during the phase: \(writes) (\(String(format: "%.4f", Double(writes) / Double(max(sent, 1)))) per change)"
        )

        // Storm: every device drops and reconnects at once while a canary sends messages.
        let canaryUser = try UserID("canary")
        let canaryDevice = try await Self.connect([canaryUser], node: node, dev: dev)[0]
        let canaryMessages = canary
        let conversation = ConversationID.random()
        _ = try await canaryDevice.command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: [canaryUser, names[0]],
                    options: ConversationOptions(isDistinct: false))), id: conversation.uuid)
        let cpuStorm0 = BenchCPU.processSeconds()
        started = clock.now
        let latencies = Task {
            var out: [Duration] = []
            for i in 0..<canaryMessages {
                let id = MessageID.random()
                let sentAt = clock.now
                _ = try await canaryDevice.command(
                    .sendMessage(
                        SendMessage(
                            messageID: id, conversationID: conversation,
                            parts: [
                                MessagePart(id: UUID(), mimeType: .textPlain, content: .inline(Array("m\(i)".utf8)))
                            ])),
                    id: id.uuid)
                out.append(clock.now - sentAt)
                try await Task.sleep(for: .milliseconds(10))
            }
            return out
        }
        for device in devices { device.session.closed() }
        devices = try await Self.connect(names, node: node, dev: dev)
        let stormTime = clock.now - started
        let sends = try await latencies.value.sorted()
        let stormCPU = BenchCPU.processSeconds() - cpuStorm0
        print(
            String(format: "  storm: %d users reconnected in %.1f s (%.1f s CPU)", users, stormTime.seconds, stormCPU))
        print(
            String(
                format: "  canary sends meanwhile: %d, p50 %.1f ms, p99 %.1f ms, max %.1f ms", sends.count,
                sends[sends.count / 2].seconds * 1e3, sends[min(sends.count - 1, sends.count * 99 / 100)].seconds * 1e3,
                sends[sends.count - 1].seconds * 1e3))
        for device in devices { device.session.closed() }
        canaryDevice.session.closed()
        await node.shutdown()
    }

    /// Opens an authenticated session (presence feature) for each user, 200 at a time.
    static func connect(_ users: [UserID], node: NodeServer, dev: DevIdentityProvider) async throws -> [BenchDevice] {
        var out: [BenchDevice] = []
        for start in stride(from: 0, to: users.count, by: 200) {
            try await withThrowingTaskGroup(of: BenchDevice.self) { group in
                for user in users[start..<min(users.count, start + 200)] {
                    group.addTask { try await BenchDevice.open(user, engine: node.engine, dev: dev) }
                }
                for try await device in group { out.append(device) }
            }
        }
        return out
    }

    /// Lets queued relays drain (the engine's inboxes run on the cooperative pool).
    static func settle() async throws { try await Task.sleep(for: .seconds(2)) }
}

/// One in-process session: an outbound that counts presence frames and answers awaited ids.
final class BenchDevice: SessionOutbound, @unchecked Sendable {
    private let lock = NIOLock()
    private var waiters: [UUID: CheckedContinuation<Frame, Error>] = [:]
    private var answers: [UUID: Frame] = [:]
    private var presence = 0
    private(set) var session: NodeSession!

    var presenceFrames: Int { lock.withLock { presence } }

    static func open(_ user: UserID, engine: NodeEngine, dev: DevIdentityProvider) async throws -> BenchDevice {
        let device = BenchDevice()
        device.session = engine.openSession(outbound: device)
        device.session.receive(.hello(Hello(features: FeatureSet.all.union(.presence), agent: "lamina-bench")))
        // A storm meets the node's nonce limits (`overloaded`): retried after a short wait.
        var answer: Frame?
        for _ in 0..<100 {
            let nonceID = UUID()
            let frame = try await device.awaitAnswer(nonceID) {
                $0.receive(.nonceRequest(NonceRequest(requestID: nonceID)))
            }
            if case .nonce = frame {
                answer = frame
                break
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        guard case .nonce(let nonce)? = answer else { throw BenchFailure("no nonce for \(user)") }
        let token = try dev.mintToken(user: user, nonce: nonce.nonce)
        let authID = UUID()
        guard
            case .authenticated = try await device.awaitAnswer(
                authID,
                {
                    $0.receive(.authenticate(Authenticate(requestID: authID, identityToken: token, deviceID: UUID())))
                })
        else { throw BenchFailure("\(user) was not authenticated") }
        return device
    }

    /// Sends a command and waits for its ACK or ERROR.
    @discardableResult
    func command(_ frame: Frame, id: UUID) async throws -> Frame {
        try await awaitAnswer(id) { $0.receive(frame) }
    }

    private func awaitAnswer(_ id: UUID, _ send: (NodeSession) -> Void) async throws -> Frame {
        try await withCheckedThrowingContinuation { continuation in
            lock.withLock { waiters[id] = continuation }
            send(session)
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
                if case .presenceChanged = c.event { lock.withLock { presence += 1 } }
                id = nil
            case .changeBatch(let b):
                let n = b.changes.count { if case .presenceChanged = $0.event { true } else { false } }
                lock.withLock { presence += n }
                id = nil
            default: id = nil
            }
            if let id, let waiter = lock.withLock({ waiters.removeValue(forKey: id) }) {
                waiter.resume(returning: frame)
            }
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
