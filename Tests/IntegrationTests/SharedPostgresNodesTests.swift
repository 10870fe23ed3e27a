import Foundation
import LaminaClient
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaProcess
import LaminaTestPostgres
import LaminaWire
import NIOConcurrencyHelpers
import Testing

/// Several in-process nodes on one PostgreSQL database (issue 18, stage 2): any node serves
/// any user; a commit through one node reaches the live sessions on the others (NOTIFY of
/// feed positions); per-user feed seqs stay unique and in order; typing crosses nodes.
@Suite struct SharedPostgresNodesTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"
    static let carol: UserID = "carol"

    /// A node on `database` with its own data directory (so its own node id). With `first`,
    /// it trusts the first node's dev identity (a copy of it), so one token minter serves all.
    static func node(
        _ name: String, on database: String, trusting first: TestNode? = nil,
        configure: (inout NodeServerConfiguration) -> Void = { _ in }
    ) async throws -> TestNode {
        var copyFailure: (any Error)?
        let node = try await TestNode.start(name) { configuration in
            configuration.store = database
            configure(&configuration)
            guard let first else { return }
            do {
                let target = URL(fileURLWithPath: configuration.dataDirectory)
                try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
                try FileManager.default.copyItem(
                    at: first.server.prepared.devIdentityKeyDirectory,
                    to: target.appendingPathComponent(LocalNode.Files.devIdentity))
            } catch {
                copyFailure = error
            }
        }
        if let copyFailure { throw copyFailure }
        return node
    }

    /// The message ids of `changes`' `message-created` events, in order.
    static func messages(_ changes: [Change]) -> [MessageID] {
        changes.compactMap { change -> MessageID? in
            if case .messageCreated(let m) = change.event { return m.id }
            return nil
        }
    }

    @Test func usersOnTwoNodesChatThroughTheSDK() async throws {
        let database = try PostgresTestCluster.newDatabase()
        let first = try await Self.node("pg-shared-a", on: database)
        let second = try await Self.node("pg-shared-b", on: database, trusting: first)
        #expect(first.server.prepared.nodeID != second.server.prepared.nodeID)

        let alice = try ClientHarness.device(Self.alice, on: first)
        let bob = try ClientHarness.device(Self.bob, on: second)
        _ = try await ClientHarness.connectLive(alice, on: first)
        let bobEvents = try await ClientHarness.connectLive(bob, on: second)

        let conversation = try alice.newConversation(participants: [Self.bob]).id
        let sent = try (1...3).map { try ClientSDKMessagingTests.send(alice, "from a \($0)", in: conversation) }
        try await ClientHarness.waitUntil(bob, "alice's three messages at bob, on the other node") {
            try sent.allSatisfy { try bob.message($0) != nil }
        }
        #expect(try bob.messages(in: conversation).map(\.id) == sent)

        let reply = try ClientSDKMessagingTests.send(bob, "from b", in: conversation)
        try await ClientHarness.waitUntil(alice, "bob's reply at alice") { try alice.message(reply) != nil }
        #expect(try alice.messages(in: conversation).map(\.id) == sent + [reply])

        // Receipts flow back across the nodes.
        try bob.markAllMessagesAsRead(in: conversation)
        try await ClientHarness.waitUntil(alice, "bob's reads at alice") {
            try sent.allSatisfy { try alice.message($0)?.message.recipientStatus[Self.bob] == .read }
        }

        // Typing crosses the nodes too (an ephemeral notification, not stored).
        try await alice.typing(.started, in: conversation)
        try await bobEvents.wait("alice typing at bob, on the other node") {
            $0.contains(.typing(TypingChanged(conversationID: conversation, user: Self.alice, state: .started)))
        }

        let sentNotifications = first.server.store.postgresStatistics?.feedNotificationsSent ?? 0
        let received = second.server.store.postgresStatistics?.feedNotificationsReceived ?? 0
        #expect(sentNotifications > 0)
        #expect(received > 0)

        try await alice.close()
        try await bob.close()
        await first.stop()
        await second.stop()
    }

    /// Three nodes, three users in one conversation, all sending at once: every feed holds
    /// each message once, with seqs 1, 2, 3… without gaps, each sender's messages in the
    /// order of their ACKs, and what arrived live equals what a SYNC from 0 reads on any node.
    @Test func feedSeqsStayUniqueAndOrderedWithThreeNodesWriting() async throws {
        let database = try PostgresTestCluster.newDatabase()
        let a = try await Self.node("pg-three-a", on: database)
        let b = try await Self.node("pg-three-b", on: database, trusting: a)
        let c = try await Self.node("pg-three-c", on: database, trusting: a)
        let users = [Self.alice, Self.bob, Self.carol]
        let nodes = [a, b, c]
        var clients: [SyncTestClient] = []
        for (user, node) in zip(users, nodes) { clients.append(try await node.session(user, device: UUID())) }
        let conversation = try await MessagingTests.conversation(clients[0], with: Set(users))

        let perSender = 20
        let acked = try await withThrowingTaskGroup(of: (Int, [MessageID]).self) { group in
            for (i, client) in clients.enumerated() {
                group.addTask {
                    var ids: [MessageID] = []
                    for n in 0..<perSender {
                        // As the SDK does: `overloaded` (a write that collided with another
                        // node's and was undone) is sent again, with the same id.
                        let id = MessageID.random()
                        for attempt in 1... {
                            do {
                                _ = try await MessagingTests.send(client, conversation, "\(users[i]) \(n)", id: id)
                                break
                            } catch let failed as CommandFailed where failed.error.code == .overloaded && attempt < 20 {
                                try await Task.sleep(
                                    for: .milliseconds(Int(failed.error.retryAfterMilliseconds ?? 100)))
                            }
                        }
                        ids.append(id)
                    }
                    return (i, ids)
                }
            }
            var out = [[MessageID]](repeating: [], count: clients.count)
            for try await (i, ids) in group { out[i] = ids }
            return out
        }
        let all = Set(acked.joined())
        #expect(all.count == perSender * clients.count)

        for (i, client) in clients.enumerated() {
            // Everything arrives live, whichever node committed it.
            for ids in acked { _ = try await client.message(ids[ids.count - 1]) }
            let live = client.seenChanges.filter { $0.seq > 0 }
            let seqs = live.map(\.seq)
            #expect(seqs == Array(seqs.sorted()), "\(users[i])'s live changes in seq order")
            #expect(Set(seqs).count == seqs.count, "\(users[i]) got no seq twice")
            let received = Self.messages(live)
            #expect(Set(received) == all, "\(users[i]) got every message")
            #expect(received.count == all.count, "\(users[i]) got each message once")
            for ids in acked {
                #expect(received.filter(Set(ids).contains) == ids, "each sender's messages in ACK order")
            }

            // The stored feed: seqs 1...n without gaps, the same order on every node.
            for node in nodes {
                let reader = try await node.session(users[i], device: UUID())
                let backlog = reader.seenChanges.filter { $0.seq > 0 }
                #expect(backlog.map(\.seq) == Array(1...UInt64(backlog.count)))
                #expect(Self.messages(backlog) == received)
                await reader.close()
            }
        }
        for client in clients { await client.close() }
        for node in nodes { await node.stop() }
    }

    /// The listening connection is cut (PostgreSQL terminates it): the node listens again and
    /// every live session reads its feed, so nothing committed meanwhile is missed.
    @Test func aLostListeningConnectionIsReplacedAndSessionsCatchUp() async throws {
        let database = try PostgresTestCluster.newDatabase()
        let first = try await Self.node("pg-relisten-a", on: database)
        let second = try await Self.node("pg-relisten-b", on: database, trusting: first)
        let alice = try await first.session(Self.alice, device: UUID())
        let bob = try await second.session(Self.bob, device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: [Self.alice, Self.bob])
        let (before, _) = try await MessagingTests.send(alice, conversation, "before")
        _ = try await bob.message(before)
        let connects = second.server.store.postgresStatistics?.listenerConnects ?? 0
        #expect(connects >= 1)

        // Every connection of this database but the terminating one goes (the second node's
        // listener among them; the first node's writer and readers reconnect on next use).
        let admin = try PostgresAdmin(database)
        try admin.terminateOtherBackends()
        var sent: [MessageID] = []
        for n in 0..<10 {
            // The first node's writer may fail the group in flight when its connection went.
            if let (id, _) = try? await MessagingTests.send(alice, conversation, "after \(n)") { sent.append(id) }
        }
        #expect(!sent.isEmpty)
        for id in sent { _ = try await bob.message(id) }
        let deadline = ContinuousClock.now + .seconds(60)
        while (second.server.store.postgresStatistics?.listenerConnects ?? 0) <= connects {
            guard ContinuousClock.now < deadline else {
                throw SyncTestTimeout(waitingFor: "the listener to connect again")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(second.server.store.databaseUnavailableReason == nil)
        let received = Self.messages(bob.seenChanges)
        #expect(Set(received).count == received.count, "nothing twice")
        await alice.close()
        await bob.close()
        await first.stop()
        await second.stop()
    }
}

extension SharedPostgresNodesTests {
    /// `/health` has a `database` check that fails (503, with the reason) while PostgreSQL
    /// refuses the node and passes again once it takes it back; `/metrics` counts statements,
    /// pool use and the notifications between the nodes.
    @Test func healthReportsTheDatabaseAndMetricsCountTheNotifications() async throws {
        let database = try PostgresTestCluster.newDatabase()
        let first = try await Self.node("pg-health-a", on: database) { $0.adminPort = 0 }
        let second = try await Self.node("pg-health-b", on: database, trusting: first) { $0.adminPort = 0 }
        let firstAdmin = try #require(first.server.admin)
        let secondAdmin = try #require(second.server.admin)
        let ready = try await HTTPGet.fetch(port: secondAdmin.port, path: "/health/ready")
        #expect(ready.status == 200, "\(ready.body)")
        #expect(ready.body.contains("database ok PostgreSQL reachable, listening"))

        let alice = try await first.session(Self.alice, device: UUID())
        let bob = try await second.session(Self.bob, device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: [Self.alice, Self.bob])
        let (id, _) = try await MessagingTests.send(alice, conversation, "counted")
        _ = try await bob.message(id)
        let sent = try await HTTPGet.fetch(port: firstAdmin.port, path: "/metrics").body
        let received = try await HTTPGet.fetch(port: secondAdmin.port, path: "/metrics").body
        func value(_ name: String, in text: String) -> Double? {
            text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap {
                Double($0.split(separator: " ").last ?? "")
            }
        }
        #expect((value("lamina_postgres_feed_notifications_sent_total", in: sent) ?? 0) >= 1, "\(sent)")
        #expect((value("lamina_postgres_feed_notifications_received_total", in: received) ?? 0) >= 1)
        #expect((value("lamina_postgres_statements_total", in: sent) ?? 0) > 0)
        #expect(value("lamina_postgres_pool_in_use_connections", in: sent) != nil)
        #expect(value("lamina_postgres_pool_waits_total", in: sent) != nil)
        #expect(value("lamina_postgres_listening_connected", in: received) == 1)
        await alice.close()
        await bob.close()

        // PostgreSQL refuses the database's connections and drops those it had.
        let admin = try PostgresAdmin(try PostgresTestCluster.server().url())
        let name = String(try #require(URLComponents(string: database)).path.dropFirst())
        try admin.psql("ALTER DATABASE \(name) ALLOW_CONNECTIONS false")
        try admin.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '\(name)'")
        try await ResourceLimitTests.eventuallyAsync("the database check to fail", timeout: .seconds(60)) {
            let answer = try? await HTTPGet.fetch(port: secondAdmin.port, path: "/health/ready")
            return answer?.status == 503 && answer?.body.contains("database failing PostgreSQL unreachable") == true
        }
        #expect(try await HTTPGet.fetch(port: secondAdmin.port, path: "/health/live").status == 200)
        try admin.psql("ALTER DATABASE \(name) ALLOW_CONNECTIONS true")
        try await ResourceLimitTests.eventuallyAsync("the database check to pass again", timeout: .seconds(60)) {
            let answer = try? await HTTPGet.fetch(port: secondAdmin.port, path: "/health/ready")
            return answer?.body.contains("database ok") == true
        }
        await first.stop()
        await second.stop()
    }
}

/// Runs administrative SQL on a test database through `psql` (a child process).
struct PostgresAdmin {
    let url: String

    init(_ url: String) throws { self.url = url }

    /// Terminates every other backend connected to the database.
    func terminateOtherBackends() throws {
        try psql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    }

    func psql(_ sql: String) throws {
        guard let parts = URLComponents(string: url), let user = parts.user else {
            throw SyncTestTimeout(waitingFor: "a database URL")
        }
        let host = parts.queryItems?.first { $0.name == "host" }?.value ?? parts.host ?? "127.0.0.1"
        let database = String(parts.path.dropFirst())
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: try PostgresAdmin.psqlPath())
        process.arguments = [
            "-h", host, "-p", "\(parts.port ?? 5432)", "-U", user, "-d", database, "-X", "-q", "-c", sql,
        ]
        var environment = ProcessInfo.processInfo.environment
        if let password = parts.password { environment["PGPASSWORD"] = password }
        process.environment = environment
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw SyncTestTimeout(waitingFor: "psql to succeed (status \(process.terminationStatus))")
        }
    }

    static func psqlPath() throws -> String {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init)
            .sorted()
        for version in versions.reversed()
        where FileManager.default.isExecutableFile(atPath: "\(root)/\(version)/bin/psql") {
            return "\(root)/\(version)/bin/psql"
        }
        return "/usr/bin/psql"
    }
}
