import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaTestPostgres
import LaminaTransport
import LaminaWire
import NIOConcurrencyHelpers
import Testing

@testable import LaminaNode
@testable import LaminaStore

#if canImport(Glibc)
    import Glibc
#endif

/// The webhook outbox with several nodes on one PostgreSQL database: a webhook managed through
/// one node gets the events of commits through every node (`lamina_webhooks` notifications,
/// a reload per (re)connect), and one node at a time drains the outbox (an advisory-lock lease
/// on its listening connection), another taking over when it dies.
@Suite struct SharedPostgresOutboxTests {
    /// Polls `condition` every 20 ms until it holds; fails after `timeout`.
    static func waitUntil(_ what: String, timeout: Duration = .seconds(30), _ condition: () async throws -> Bool)
        async throws
    {
        let deadline = ContinuousClock.now + timeout
        while try await !condition() {
            guard ContinuousClock.now < deadline else { throw SyncTestTimeout(waitingFor: what) }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    @Test func aWebhookManagedThroughOneNodeGetsTheEventsOfAnother() async throws {
        let receiver = try await WebhookReceiver.start()
        let database = try PostgresTestCluster.newDatabase()
        let configure: (inout NodeServerConfiguration) -> Void = { c in
            c.webhooks.allowPrivateTargets = true
            c.webhooks.caFile = receiver.certificate
            c.webhooks.initialBackoffMilliseconds = 50
        }
        let a = try await SharedPostgresNodesTests.node("pg-hook-a", on: database, configure: configure)
        let b = try await SharedPostgresNodesTests.node("pg-hook-b", on: database, trusting: a, configure: configure)
        #expect(!b.server.engine.webhooks.wants(.messageSent))

        // Created and verified through A: B's outbox learns it from A's notification.
        let apiA = CurlAPI(a.server)
        let id = try await WebhookTests.createWebhook(apiA, url: receiver.url())
        _ = try await WebhookTests.waitForStatus(apiA, id, "active")
        try await Self.waitUntil("node B's outbox to know the webhook activated through A") {
            b.server.engine.webhooks.wants(.messageSent)
        }

        // A client on B sends: the event is queued in B's commit and delivered (by the lease holder).
        let alice = try await b.session(MessagingTests.alice, device: UUID())
        let conversation = try await MessagingTests.conversation(
            alice, with: [MessagingTests.alice, MessagingTests.bob])
        let (message, _) = try await MessagingTests.send(alice, conversation, "through b")
        let post = try await receiver.waitForPosts(1)[0]
        #expect(WebhookTests.messageID(of: post) == message.uuid.uuidString.lowercased())
        #expect(post.headers["layer-webhook-id"] == id)
        // Exactly one node holds the webhooks' lease.
        let holders = [a, b].filter { $0.server.store.holdsOutboxLease(.webhooks) }
        #expect(holders.count == 1)

        // Deleted through A: B stops queueing (its commit of the next message queues nothing).
        let deleted = try await apiA.request("DELETE", "/webhooks/\(id)", headers: apiA.webhookHeaders)
        #expect(deleted.status == 204)
        try await Self.waitUntil("node B's outbox to forget the webhook deleted through A") {
            !b.server.engine.webhooks.wants(.messageSent)
        }
        _ = try await MessagingTests.send(alice, conversation, "after the delete")
        #expect(try await b.server.store.read { r in try r.webhookQueueDepths() }.isEmpty)
        #expect(receiver.posts.count == 1)

        await alice.close()
        await a.stop()
        await b.stop()
        await receiver.stop()
    }

    /// A change nobody announced (written straight to the store, as if its notification was
    /// missed) reaches a node's outbox when its listening connection is established again.
    @Test func aListenerReconnectReloadsTheWebhookSubscriptions() async throws {
        let database = try PostgresTestCluster.newDatabase()
        let configure: (inout NodeServerConfiguration) -> Void = { c in c.webhooks.allowPrivateTargets = true }
        let a = try await SharedPostgresNodesTests.node("pg-hook-re-a", on: database, configure: configure)
        let b = try await SharedPostgresNodesTests.node("pg-hook-re-b", on: database, trusting: a, configure: configure)
        // Each node read the subscriptions once since it started listening (nothing else pending).
        try await Self.waitUntil("both nodes' first reading of the subscriptions") {
            a.server.webhooks.reloads.withLockedValue { $0 } == 1
                && b.server.webhooks.reloads.withLockedValue { $0 } == 1
        }
        let now = Timestamp.now()
        let webhook = StoredWebhook(
            id: UUID(), targetURL: "https://127.0.0.1:9/hook", events: ["message.sent"], secret: "s", config: nil,
            status: .active,
            createdAt: now, updatedAt: now)
        // Not through the delivery: no notification, no outbox changed.
        try await a.server.store.write { tx in try tx.createWebhook(webhook, limit: 10) }
        #expect(!a.server.engine.webhooks.wants(.messageSent))
        #expect(!b.server.engine.webhooks.wants(.messageSent))
        let connects = b.server.store.postgresStatistics?.listenerConnects ?? 0
        let pid = try #require(b.server.store.listenerBackendPID)
        let ended = try await a.server.store.write { tx in
            try tx.db.int64("SELECT CASE WHEN pg_terminate_backend(CAST(? AS INTEGER)) THEN 1 ELSE 0 END", [pid])
        }
        #expect(ended == 1)
        try await Self.waitUntil("node B to read the subscriptions again after its listener reconnected") {
            b.server.webhooks.reloads.withLockedValue { $0 } == 2
        }
        #expect(b.server.engine.webhooks.wants(.messageSent))
        #expect((b.server.store.postgresStatistics?.listenerConnects ?? 0) > connects)
        // A, whose listener stayed up, heard nothing.
        #expect(!a.server.engine.webhooks.wants(.messageSent))
        #expect(a.server.webhooks.reloads.withLockedValue { $0 } == 1)
        await a.stop()
        await b.stop()
    }

    /// Pushes of messages sent through two nodes are sent by the node holding the pushes' lease
    /// only; when it stops, the other takes over at once (the lease is released and announced).
    @Test func oneNodeSendsThePushesAndTheOtherTakesOverWhenItStops() async throws {
        let fake = try await FakePushServer.start(http1: true) { _, _ in HTTPResponse(status: 202) }
        let database = try PostgresTestCluster.newDatabase()
        func configure(_ name: String) -> (inout NodeServerConfiguration) -> Void {
            { c in
                // Each node signs its requests with its own authorization: the fake tells them apart.
                c.push.gateway = PushSettings.Gateway(url: fake.url("/push"), authorization: "Bearer \(name)")
                c.push.caFile = fake.certificate
                c.push.initialBackoffMilliseconds = 50
            }
        }
        let a = try await SharedPostgresNodesTests.node("pg-push-a", on: database, configure: configure("a"))
        let b = try await SharedPostgresNodesTests.node(
            "pg-push-b", on: database, trusting: a, configure: configure("b"))
        let bob = try await PushTests.registered(a, MessagingTests.bob, device: UUID(), .gateway(token: "bob-gw"))
        await bob.close()
        try await PushTests.waitForSessions(a, 0)
        let onA = try await a.session(MessagingTests.alice, device: UUID())
        let onB = try await b.session(MessagingTests.alice, device: UUID())
        let conversation = try await PushTests.conversation(onA, with: [MessagingTests.bob])
        try await Self.waitUntil("one node to hold the pushes' lease") {
            [a, b].filter { $0.server.store.holdsOutboxLease(.pushes) }.count == 1
        }
        let holderIsA = a.server.store.holdsOutboxLease(.pushes)
        var sent: [String] = []
        for i in 0..<6 {
            let id = try await PushTests.send(
                i % 2 == 0 ? onA : onB, conversation, "m\(i)", push: PushConfiguration(alert: "m\(i)"))
            sent.append("layer:///messages/\(id.uuid.uuidString.lowercased())")
        }
        let first = try await fake.waitForRequests(6)
        #expect(
            Set(first.compactMap { ($0.json["notification"] as? [String: Any])?["message_id"] as? String }) == Set(sent)
        )
        #expect(
            Set(first.map { $0.headers["authorization"] ?? "" }) == [holderIsA ? "Bearer a" : "Bearer b"],
            "one node sends")
        #expect([a, b].filter { $0.server.store.holdsOutboxLease(.pushes) }.count == 1, "never two holders")

        let (stopping, staying, stayingClient) = holderIsA ? (a, b, onB) : (b, a, onA)
        await (holderIsA ? onA : onB).close()
        await stopping.stop()
        try await Self.waitUntil("the other node to take the pushes' lease", timeout: .seconds(10)) {
            staying.server.store.holdsOutboxLease(.pushes)
        }
        let later = try await PushTests.send(
            stayingClient, conversation, "later", push: PushConfiguration(alert: "later"))
        let laterID = "layer:///messages/\(later.uuid.uuidString.lowercased())"
        func messageID(_ request: FakePushServer.Received) -> String? {
            (request.json["notification"] as? [String: Any])?["message_id"] as? String
        }
        try await Self.waitUntil("the push of the message sent after the stop") {
            fake.requests.contains { messageID($0) == laterID }
        }
        // Sent by the node that took over; besides it, at most pushes sent again (at least once:
        // one the stopped node had sent but not yet recorded goes again, by the new holder).
        let afterStop = fake.requests.dropFirst(6)
        #expect(afterStop.allSatisfy { $0.headers["authorization"] == (holderIsA ? "Bearer b" : "Bearer a") })
        #expect(Set(afterStop.compactMap(messageID)).isSubset(of: Set(sent + [laterID])))
        await stayingClient.close()
        await staying.stop()
        await fake.stop()
    }

    /// A device with a live session on one node gets no push for a message committed through
    /// another (`live_devices`); once its session ends there, it does.
    @Test func aDeviceLiveOnAnotherNodeGetsNoPush() async throws {
        let fake = try await FakePushServer.start(http1: true) { _, _ in HTTPResponse(status: 202) }
        let database = try PostgresTestCluster.newDatabase()
        let configure: (inout NodeServerConfiguration) -> Void = { c in
            c.push.gateway = PushSettings.Gateway(url: fake.url("/push"), authorization: "Bearer gw")
            c.push.caFile = fake.certificate
            c.push.initialBackoffMilliseconds = 50
        }
        let a = try await SharedPostgresNodesTests.node("pg-live-a", on: database, configure: configure)
        let b = try await SharedPostgresNodesTests.node("pg-live-b", on: database, trusting: a, configure: configure)
        let device = UUID()
        let deviceText = device.uuidString.lowercased()
        // Bob's phone registers its token through A, then is connected to B.
        let registering = try await PushTests.registered(
            a, MessagingTests.bob, device: device, .gateway(token: "bob-gw"))
        await registering.close()
        try await PushTests.waitForSessions(a, 0)
        let bobOnB = try await b.session(MessagingTests.bob, device: device)
        func liveAnywhere() async throws -> Bool {
            try await a.server.store.read { r in try r.devicesLiveOnAnyNode(of: [MessagingTests.bob]) }[
                MessagingTests.bob]?.contains(deviceText) == true
        }
        try await Self.waitUntil("bob's phone registered as live (on B)") { try await liveAnywhere() }

        // Alice sends through A: the phone is live on B, so A's commit queues no push.
        let alice = try await a.session(MessagingTests.alice, device: UUID())
        let conversation = try await PushTests.conversation(alice, with: [MessagingTests.bob])
        _ = try await PushTests.send(alice, conversation, "while live on b", push: PushConfiguration(alert: "1"))
        #expect(try await a.server.store.read { r in try r.pushQueueDepths() }.values.reduce(0, +) == 0)
        #expect(fake.requests.isEmpty)

        // The phone leaves B: the next message is pushed.
        await bobOnB.close()
        try await Self.waitUntil("bob's phone no longer live anywhere") { try await !liveAnywhere() }
        let later = try await PushTests.send(alice, conversation, "offline now", push: PushConfiguration(alert: "2"))
        let post = try await fake.waitForRequests(1)[0]
        #expect(
            (post.json["notification"] as? [String: Any])?["message_id"] as? String
                == "layer:///messages/\(later.uuid.uuidString.lowercased())")
        #expect(fake.requests.count == 1)

        // A node killed leaves no live device behind: its rows stop counting with its connection.
        let again = try await b.session(MessagingTests.bob, device: device)
        try await Self.waitUntil("bob's phone live on B again") { try await liveAnywhere() }
        let pid = try #require(b.server.store.listenerBackendPID)
        _ = try await a.server.store.write { tx in
            try tx.db.int64("SELECT CASE WHEN pg_terminate_backend(CAST(? AS INTEGER)) THEN 1 ELSE 0 END", [pid])
        }
        // B reconnects and registers its sessions again under its new connection.
        try await Self.waitUntil("B's listener back with a new connection") {
            b.server.store.listenerBackendPID.map { $0 != pid } ?? false
        }
        let newPID = try #require(b.server.store.listenerBackendPID)
        try await Self.waitUntil("bob's phone registered again by B's new connection") {
            let pids = try await a.server.store.read { r in
                try r.db.rows(
                    "SELECT CAST(backend_pid AS BIGINT) AS p FROM live_devices WHERE user_id = ?",
                    [MessagingTests.bob.rawValue]
                )
                .map { row -> Int64 in row["p"] }
            }
            return pids.contains(newPID)
        }
        #expect(try await liveAnywhere())

        await again.close()
        await alice.close()
        await a.stop()
        await b.stop()
        await fake.stop()
    }

    /// `/metrics` of a node process.
    static func metrics(_ node: NodeProcess) async throws -> String {
        try await ExternalCommand.run("/usr/bin/curl", ["-sS", "http://127.0.0.1:\(node.adminPort)/metrics"]).stdout
    }

    /// The value of the sample named exactly `name` (with its labels) in `text`; 0 when absent.
    static func sample(_ text: String, _ name: String) -> Double {
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.dropFirst(name.count + 1)) ?? 0
        }
        return 0
    }

    @Test func oneNodeDrainsTheWebhookOutboxAndAnotherTakesOverAfterKillNine() async throws {
        let accepting = NIOLockedValueBox(true)
        // Message ids the receiver accepted (answered 2xx), with how many times.
        let accepted = NIOLockedValueBox([String: Int]())
        let receiver = try await WebhookReceiver.start { _, post in
            guard accepting.withLockedValue({ $0 }) else { return 503 }
            accepted.withLockedValue { $0[WebhookTests.messageID(of: post), default: 0] += 1 }
            return 200
        }
        let store = try PostgresTestCluster.newDatabase()
        let directoryA = Fixtures.temporaryDirectory("pg-lease-a")
        let directoryB = Fixtures.temporaryDirectory("pg-lease-b")
        let config = directoryA.appendingPathComponent("node.json")
        try
            #"{"webhooks":{"allowPrivateTargets":true,"caFile":"\#(receiver.certificate)","initialBackoffMilliseconds":50,"maxBackoffSeconds":1}}"#
            .write(to: config, atomically: true, encoding: .utf8)
        let arguments = ["--store", store, "--config", config.path]
        let first = try await NodeProcess.start(in: directoryA, arguments: arguments)
        let dataB = directoryB.appendingPathComponent(".lamina")
        try FileManager.default.createDirectory(at: dataB, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            at: first.dataDirectory.appendingPathComponent(LocalNode.Files.devIdentity),
            to: dataB.appendingPathComponent(LocalNode.Files.devIdentity))
        let second = try await NodeProcess.start(in: directoryB, arguments: arguments)
        let nodes = [first, second]
        let dev = try DevIdentityProvider.loadOrCreate(
            in: first.dataDirectory.appendingPathComponent(LocalNode.Files.devIdentity))

        let data = first.dataDirectory
        let appID = try String(contentsOf: data.appendingPathComponent("server-api/app-id"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let token =
            try String(contentsOf: data.appendingPathComponent("server-api/tokens"), encoding: .utf8)
            .split(separator: "\n").map(String.init).first { !$0.hasPrefix("#") && !$0.isEmpty } ?? ""
        let api = CurlAPI(
            url: "https://127.0.0.1:\(first.syncPort)", caFile: data.appendingPathComponent("tls/node-cert.pem").path,
            appID: appID, token: token)
        let id = try await WebhookTests.createWebhook(api, url: receiver.url())
        _ = try await WebhookTests.waitForStatus(api, id, "active")
        let lease = "lamina_postgres_outbox_lease_held{outbox=\"webhooks\"}"
        let subscriptions = "lamina_webhook_subscriptions_active"
        let deliveries = "lamina_webhook_deliveries_total{webhook=\"\(id)\"}"
        // Both outboxes know the webhook; exactly one node holds the lease.
        var holder = first
        try await Self.waitUntil("both nodes to know the webhook and one to hold the lease") {
            var held: [NodeProcess] = []
            for node in nodes {
                let text = try await Self.metrics(node)
                guard Self.sample(text, subscriptions) == 1 else { return false }
                if Self.sample(text, lease) == 1 { held.append(node) }
            }
            #expect(held.count <= 1, "never two holders")
            guard held.count == 1 else { return false }
            holder = held[0]
            return true
        }
        let other = holder === first ? second : first

        // Alice on the holder, Bob on the other node; both send.
        let onHolder = try await SharedPostgresKillTests.session(MessagingTests.alice, on: holder, dev: dev)
        let onOther = try await SharedPostgresKillTests.session(MessagingTests.bob, on: other, dev: dev)
        let conversation = try await MessagingTests.conversation(
            onHolder, with: [MessagingTests.alice, MessagingTests.bob])
        var sent: [String] = []
        func send(_ phase: String, _ n: Int, from clients: [SyncTestClient]) async throws {
            for i in 0..<n {
                let (message, _) = try await MessagingTests.send(
                    clients[i % clients.count], conversation, "\(phase) \(i)")
                sent.append(message.uuid.uuidString.lowercased())
            }
        }
        try await send("before", 10, from: [onHolder, onOther])
        try await Self.waitUntil("the first 10 events delivered") { accepted.withLockedValue { $0.count } == 10 }
        // Only the holder delivered: its deliveries are every event, the other's none, no event twice.
        try await Self.waitUntil("the holder to record its 10 deliveries") {
            Self.sample(try await Self.metrics(holder), deliveries) == 10
        }
        #expect(Self.sample(try await Self.metrics(other), deliveries) == 0)
        #expect(Set(accepted.withLockedValue { $0.keys }) == Set(sent))
        #expect(accepted.withLockedValue { $0.values.allSatisfy { $0 == 1 } })

        // The target refuses for a while: events stay queued, some in flight from the holder.
        accepting.withLockedValue { $0 = false }
        let refusedBefore = receiver.posts.count
        try await send("during", 10, from: [onHolder, onOther])
        _ = try await receiver.waitForPosts(refusedBefore + 1)
        #expect(try await holder.stop(with: SIGKILL) == SIGKILL)
        await onHolder.drop()
        // Requests the killed node had sent are still read (its sockets close only after them).
        let gone = ContinuousClock.now + .seconds(30)
        while receiver.server.connectionCount > 0, ContinuousClock.now < gone {
            try await Task.sleep(for: .milliseconds(10))
        }
        accepting.withLockedValue { $0 = true }
        try await Self.waitUntil("the other node to take the lease") {
            Self.sample(try await Self.metrics(other), lease) == 1
        }
        try await send("after", 4, from: [onOther])
        try await Self.waitUntil("every acknowledged event delivered at least once", timeout: .seconds(60)) {
            Set(accepted.withLockedValue { $0.keys }).isSuperset(of: sent)
        }
        #expect(Set(accepted.withLockedValue { $0.keys }) == Set(sent), "nothing but the sent messages")
        // The queued events of the second and third phases went through the node that took over.
        try await Self.waitUntil("the new holder to record its deliveries") {
            Self.sample(try await Self.metrics(other), deliveries) >= 14
        }
        // Duplicates only with the same request id: one request id per message.
        var requestIDs: [String: Set<String>] = [:]
        for post in receiver.posts {
            requestIDs[WebhookTests.messageID(of: post), default: []].insert(
                post.headers["layer-webhook-request-id"] ?? "")
        }
        #expect(requestIDs.values.allSatisfy { $0.count == 1 })

        await onOther.close()
        #expect(try await other.stop() == 0)
        await receiver.stop()
    }
}
