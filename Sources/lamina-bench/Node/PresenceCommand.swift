import ArgumentParser
import Atomics
import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaTransport
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Presence at scale (SPEC §6.6, issue 36): N users online on a `lamina-node` child process,
/// each a real session over TLS + HTTP/2 from this process, each following F others, each
/// changing status every few seconds; then a storm (every user reconnects at once) while a
/// canary sends messages. The node's CPU is its own process's (never the loader's); its
/// counters (visible changes, updates addressed, storage transactions, last-seen writes) come
/// from its `/metrics`. Each phase ends on a condition (every follow list loaded, every update
/// addressed delivered), never after a fixed wait.
struct PresenceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "presence",
        abstract:
            "Presence fan-out over TLS: node CPU per change and per update, writes per change, memory per user, a storm."
    )

    @Option(help: "Users online.") var users = 10_000
    @Option(help: "Users each user follows (explicitly).") var follows = 50
    @Option(help: "Seconds between one user's status changes.") var interval = 5.0
    @Option(help: "Seconds the change phase runs.") var seconds = 20.0
    @Option(help: "Canary messages during the storm (one every 10 ms).") var canary = 300
    @Option(help: "Sync sessions per TLS connection (1: a connection per user, as devices have).")
    var sessionsPerConnection = 1
    @Option(help: "Logins in flight at once (connect and storm).") var concurrency = 200
    @Option(help: "Seconds a phase may take to reach its condition before the run fails.") var timeout = 600.0
    @Option(help: "The lamina-node binary (default: next to this one).") var nodeBinary: String?

    /// How often a phase's end condition reads the node's `/metrics`.
    static let scrapeInterval = Duration.milliseconds(250)

    func validate() throws {
        guard (2...100_000).contains(users) else { throw ValidationError("--users must be 2...100,000") }
        guard (0...1_000).contains(follows), follows < users else {
            throw ValidationError("--follows must be 0...1,000 and fewer than --users")
        }
        guard (1...100).contains(sessionsPerConnection) else {
            throw ValidationError("--sessions-per-connection must be 1...100")
        }
        guard (1...5_000).contains(concurrency) else { throw ValidationError("--concurrency must be 1...5,000") }
        guard interval > 0, seconds > 0, (1...100_000).contains(canary) else {
            throw ValidationError("--interval and --seconds must be positive, --canary 1...100,000")
        }
    }

    func run() async throws {
        BenchSupport.raiseFileLimit()
        let binary = try NodeProcess.binary(nodeBinary)
        let names = try (0..<users).map { try UserID("p\($0)") }
        let node = try await Self.startNode(binary: binary, users: users, follows: follows, names: names)
        defer { node.stop() }
        let tls = try TLSContext(.client(trust: .caFile(node.caFile)))
        let group = MultiThreadedEventLoopGroup.singleton
        let counter = PresenceFrameCounter()
        let clock = ContinuousClock()
        print(
            "presence: \(users) users, each following \(follows), real sessions over TLS + HTTP/2 "
                + "(\(sessionsPerConnection) per connection) to a lamina-node process; load average "
                + BenchSupport.loadAverage())

        // Everyone logs in; the phase ends once the node holds every follow list (its gauge of
        // follow edges reaches users x follows), not after a fixed wait.
        let rssBefore = BenchSupport.residentBytes(pid: node.pid)
        var started = clock.now
        var clients = try await connect(names, node: node, tls: tls, group: group, counter: counter)
        try await BenchCondition.until("every follow list loaded", timeout: timeout, every: Self.scrapeInterval) {
            node.metric("lamina_presence_follow_edges_count") == users * follows
                && node.metric("lamina_presence_online_users") == users
        }
        let connectTime = clock.now - started
        let perUser = Double(BenchSupport.residentBytes(pid: node.pid) - rssBefore) / Double(users)
        print(
            String(
                format: "  %d online in %.1f s; node memory per online user %.0f bytes (RSS, TLS connection included)",
                users, connectTime.seconds, perUser))

        // Change phase: every user picks a new status every `interval` seconds, spread evenly;
        // each choice differs from the user's previous one, so each is a visible change.
        let changes0 = node.metric("lamina_presence_visible_changes_total") ?? 0
        let addressed0 = node.metric("lamina_presence_follower_updates_total") ?? 0
        let writes0 = node.metric("lamina_storage_transactions_total") ?? 0
        let delivered0 = counter.updates.load(ordering: .relaxed)
        let cpu0 = node.cpuSeconds()
        let loaderCPU0 = BenchSupport.cpuSeconds(getpid())
        started = clock.now
        let statuses: [PresenceStatus] = [.away, .busy, .available]
        let acks = ManagedAtomic(0)
        let refusals = ManagedAtomic(0)
        var sent = 0
        let total = Int(Double(users) * seconds / interval)
        let gap = interval / Double(users)
        while sent < total {
            let due = Int((clock.now - started).seconds / gap)
            while sent < min(due, total) {
                let id = UUID()
                let status = statuses[(sent / users) % statuses.count]
                clients[sent % users].request(.setPresence(SetPresence(requestID: id, status: status)), id: id)
                    .whenComplete { result in
                        if case .success(.ack) = result {
                            acks.wrappingIncrement(ordering: .relaxed)
                        } else {
                            refusals.wrappingIncrement(ordering: .relaxed)
                        }
                    }
                sent += 1
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        let sendingTime = clock.now - started
        // Done when every choice is answered and every update the node addressed has arrived.
        var addressed = 0
        try await BenchCondition.until("every presence update delivered", timeout: timeout, every: Self.scrapeInterval)
        {
            // The node is asked only once every choice is answered (a scrape costs it CPU).
            guard acks.load(ordering: .relaxed) + refusals.load(ordering: .relaxed) == total else { return false }
            addressed = (node.metric("lamina_presence_follower_updates_total") ?? 0) - addressed0
            // Each applied choice also goes to the user's own session (their own view moved).
            return counter.updates.load(ordering: .relaxed) - delivered0 >= addressed + acks.load(ordering: .relaxed)
        }
        let elapsed = (clock.now - started).seconds
        let cpu = node.cpuSeconds() - cpu0
        let loaderCPU = BenchSupport.cpuSeconds(getpid()) - loaderCPU0
        let visible = (node.metric("lamina_presence_visible_changes_total") ?? 0) - changes0
        let delivered = counter.updates.load(ordering: .relaxed) - delivered0 - acks.load(ordering: .relaxed)
        let writes = (node.metric("lamina_storage_transactions_total") ?? 0) - writes0
        print(
            String(
                format:
                    "  %d status changes sent in %.1f s (%.0f/s), %d acknowledged, %d refused; all delivered %.1f s after the first",
                sent, sendingTime.seconds, Double(sent) / sendingTime.seconds, acks.load(ordering: .relaxed),
                refusals.load(ordering: .relaxed), elapsed))
        print(
            "  visible changes with followers online: \(visible); updates addressed to followers: \(addressed); "
                + "delivered to followers' sessions: \(delivered) (besides \(acks.load(ordering: .relaxed)) to the users' own)"
        )
        print(
            String(
                format:
                    "  node CPU: %.1f s = %.1f µs per visible change, %.2f µs per delivered update (loader: %.1f s)",
                cpu, cpu / Double(max(visible, 1)) * 1e6, cpu / Double(max(delivered, 1)) * 1e6, loaderCPU))
        print(
            "  storage transactions during the phase: \(writes) (\(String(format: "%.4f", Double(writes) / Double(max(sent, 1)))) per change)"
        )

        // Storm: every session drops and every user logs in again at once, while a canary sends.
        let canaryUser = try UserID("canary")
        let canaryClient = try await BenchSyncClient.connect(url: node.url, tls: tls, group: group)
        try await canaryClient.login(user: canaryUser, device: UUID(), dev: node.dev, cursor: 0)
        let conversation = ConversationID.random()
        _ = try await canaryClient.request(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: [canaryUser, names[0]],
                    options: ConversationOptions(isDistinct: false))), id: conversation.uuid
        ).get()
        // A first message brings the conversation to user 0 (SPEC §6.4), so the canary and user 0
        // follow each other through it: the storm ends when the gauges are back at these values.
        let first = MessageID.random()
        _ = try await canaryClient.request(
            .sendMessage(
                SendMessage(
                    messageID: first, conversationID: conversation,
                    parts: [MessagePart(id: UUID(), mimeType: .textPlain, content: .inline(Array("hello".utf8)))])),
            id: first.uuid
        ).get()
        let onlineTarget = users + 1
        let edgesTarget = users * follows + 2
        try await BenchCondition.until(
            "the canary's conversation seen by presence", timeout: timeout, every: Self.scrapeInterval
        ) {
            node.metric("lamina_presence_online_users") == onlineTarget
                && node.metric("lamina_presence_follow_edges_count") == edgesTarget
        }
        let lastSeen0 = node.metric("lamina_last_seen_transactions_total") ?? 0
        let lastSeenRows0 = node.metric("lamina_last_seen_rows_total") ?? 0
        let stormWrites0 = node.metric("lamina_storage_transactions_total") ?? 0
        let cpuStorm0 = node.cpuSeconds()
        started = clock.now
        let canaryMessages = canary
        let latencies = Task {
            var out: [Duration] = []
            for i in 0..<canaryMessages {
                let id = MessageID.random()
                let sentAt = clock.now
                let answer = try await canaryClient.request(
                    .sendMessage(
                        SendMessage(
                            messageID: id, conversationID: conversation,
                            parts: [
                                MessagePart(id: UUID(), mimeType: .textPlain, content: .inline(Array("m\(i)".utf8)))
                            ])),
                    id: id.uuid
                ).get()
                guard case .ack = answer else { throw BenchFailure("a canary send was answered \(answer)") }
                out.append(clock.now - sentAt)
                try await Task.sleep(for: .milliseconds(10))
            }
            return out
        }
        await withTaskGroup(of: Void.self) { group in
            for client in clients { group.addTask { await client.close() } }
        }
        clients = try await connect(names, node: node, tls: tls, group: group, counter: counter)
        try await BenchCondition.until("every follow list loaded again", timeout: timeout, every: Self.scrapeInterval) {
            node.metric("lamina_presence_follow_edges_count") == edgesTarget
                && node.metric("lamina_presence_online_users") == onlineTarget
        }
        let stormTime = clock.now - started
        let stormCPU = node.cpuSeconds() - cpuStorm0
        let sends = try await latencies.value.sorted()
        let lastSeenWrites = (node.metric("lamina_last_seen_transactions_total") ?? 0) - lastSeen0
        let lastSeenRows = (node.metric("lamina_last_seen_rows_total") ?? 0) - lastSeenRows0
        let stormWrites = (node.metric("lamina_storage_transactions_total") ?? 0) - stormWrites0
        print(
            String(
                format: "  storm: %d users reconnected in %.1f s (node CPU %.1f s)", users, stormTime.seconds, stormCPU)
        )
        print(
            "  storage during the storm: \(stormWrites) transactions, of them \(lastSeenWrites) last-seen batches "
                + "(\(lastSeenRows) rows); the rest are the logins' session records and the canary's \(canaryMessages) sends, "
                + "group-committed")
        print(
            String(
                format: "  canary sends meanwhile: %d, p50 %.1f ms, p99 %.1f ms, max %.1f ms", sends.count,
                sends[sends.count / 2].seconds * 1e3, sends[min(sends.count - 1, sends.count * 99 / 100)].seconds * 1e3,
                sends[sends.count - 1].seconds * 1e3))
        await withTaskGroup(of: Void.self) { group in
            for client in clients { group.addTask { await client.close() } }
        }
        await canaryClient.close()
    }

    /// Starts a node for `users` sessions, stops it, writes the follow graph (F random others
    /// per user, in a few transactions) into its store, and starts it again on it.
    static func startNode(binary: String, users: Int, follows: Int, names: [UserID]) async throws -> NodeProcess {
        let data = try BenchSupport.temporaryDirectory() + "/presence-\(UUID().uuidString.prefix(8))"
        // Every login holds a nonce for its lifetime, the storm logs everyone in a second time,
        // and every session comes from 127.0.0.1: the node's per-node and per-address bounds
        // are raised to fit (each still enforced).
        let arguments = [
            "--set", "resources.maxNonces=\(max(20_000, 3 * users))",
            "--set", "resources.maxConnections=\(users + 1_000)",
            "--set", "resources.maxConnectionsPerAddress=\(users + 1_000)",
            "--set", "resources.maxUnauthenticatedPerAddress=1000",
            "--set", "resources.maxHandshakesPerAddress=1000",
            "--set", "maxSessions=\(users + 1_000)",
        ]
        let first = try await NodeProcess.start(binary: binary, data: data, port: BenchSupport.freePort())
        first.stop(keepData: true)
        let store = try NodeStore(
            path: URL(fileURLWithPath: data).appendingPathComponent(LocalNode.Files.store).path,
            configuration: StorageConfiguration())
        var generator = SystemRandomNumberGenerator()
        for start in stride(from: 0, to: users, by: 2_000) {
            let slice = start..<min(users, start + 2_000)
            let edges = slice.map { i -> (UserID, [UserID]) in
                var chosen = Set<Int>()
                while chosen.count < follows {
                    let j = Int.random(in: 0..<users, using: &generator)
                    if j != i { chosen.insert(j) }
                }
                return (names[i], chosen.map { names[$0] })
            }
            try await store.write { tx in
                for (follower, followed) in edges {
                    for user in followed { try tx.follow(user, by: follower, at: .now()) }
                }
            }
        }
        try store.close()
        return try await NodeProcess.start(
            binary: binary, data: data, port: BenchSupport.freePort(), adminPort: BenchSupport.freePort(),
            extraArguments: arguments)
    }

    /// Logs every user in (presence feature), `concurrency` at a time, `sessionsPerConnection`
    /// sessions on each TLS connection; a login the node sheds (its nonce bounds) is retried.
    func connect(
        _ names: [UserID], node: NodeProcess, tls: TLSContext, group: EventLoopGroup, counter: PresenceFrameCounter
    ) async throws -> [BenchSyncClient] {
        var out: [BenchSyncClient?] = Array(repeating: nil, count: names.count)
        let perConnection = sessionsPerConnection
        let connections = stride(from: 0, to: names.count, by: perConnection).map {
            $0..<min(names.count, $0 + perConnection)
        }
        var next = 0
        try await withThrowingTaskGroup(of: [(Int, BenchSyncClient)].self) { tasks in
            func start(_ range: Range<Int>) {
                tasks.addTask {
                    var opened: [(Int, BenchSyncClient)] = []
                    var connection: TransportConnection?
                    for i in range {
                        let client = try await Self.login(
                            names[i], node: node, tls: tls, group: group, on: connection, counter: counter)
                        connection = client.connection
                        opened.append((i, client))
                    }
                    return opened
                }
            }
            while next < connections.count && next < concurrency {
                start(connections[next])
                next += 1
            }
            while let opened = try await tasks.next() {
                for (i, client) in opened { out[i] = client }
                if next < connections.count {
                    start(connections[next])
                    next += 1
                }
            }
        }
        return out.map { $0! }
    }

    /// One session of `user` (on `connection`, else a new TLS connection), counting the
    /// presence updates it receives; retried (with a new stream) when the node sheds the login.
    static func login(
        _ user: UserID, node: NodeProcess, tls: TLSContext, group: EventLoopGroup, on connection: TransportConnection?,
        counter: PresenceFrameCounter
    ) async throws -> BenchSyncClient {
        var lastError: Error?
        for attempt in 0..<50 {
            if attempt > 0 { try await Task.sleep(for: .milliseconds(100)) }
            let client: BenchSyncClient
            do {
                if let connection {
                    client = try await BenchSyncClient.open(on: connection)
                } else {
                    client = try await BenchSyncClient.connect(url: node.url, tls: tls, group: group)
                }
            } catch {
                lastError = error
                continue
            }
            try await client.observe { frame in counter.count(frame) }
            do {
                try await client.login(
                    user: user, device: UUID(), dev: node.dev, features: FeatureSet.all.union(.presence))
                return client
            } catch {
                lastError = error
                await client.close()
            }
        }
        throw BenchFailure("\(user) could not log in: \(String(describing: lastError))")
    }
}

/// Presence updates received over every session (counted on the sessions' event loops).
final class PresenceFrameCounter: Sendable {
    let updates = ManagedAtomic(0)

    func count(_ frame: Frame) {
        switch frame {
        case .change(let c):
            if case .presenceChanged = c.event { updates.wrappingIncrement(ordering: .relaxed) }
        case .changeBatch(let b):
            let n = b.changes.count { if case .presenceChanged = $0.event { true } else { false } }
            if n > 0 { updates.wrappingIncrement(by: n, ordering: .relaxed) }
        default: break
        }
    }
}

extension NodeProcess {
    /// An unlabelled metric of the node's `/metrics` (nil: no admin listener, or not there).
    func metric(_ name: String) -> Int? {
        guard let adminPort, let body = try? AdminGet.body(port: adminPort, path: "/metrics", timeoutSeconds: 30)
        else { return nil }
        // Counters print as integers, gauges as decimals.
        return body.split(separator: "\n").first { $0.hasPrefix(name + " ") }
            .flatMap { Double($0.split(separator: " ")[1]) }.map { Int($0) }
    }
}
