import Foundation
import LaminaLocalNode
import LaminaModel
@testable import LaminaNode
import LaminaTestPostgres
import LaminaWire
import NIOConcurrencyHelpers
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The webhook outbox with several nodes on one PostgreSQL database: a webhook managed through
/// one node gets the events of commits through every node (`lamina_webhooks` notifications,
/// a reload per (re)connect), and one node at a time drains the outbox (an advisory-lock lease
/// on its listening connection), another taking over when it dies.
@Suite struct SharedPostgresOutboxTests {
    /// Polls `condition` every 20 ms until it holds; fails after `timeout`.
    static func waitUntil(_ what: String, timeout: Duration = .seconds(30), _ condition: () async throws -> Bool) async throws {
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
        let conversation = try await MessagingTests.conversation(alice, with: [MessagingTests.alice, MessagingTests.bob])
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
        let directoryA = Fixtures.temporaryDirectory("pg-lease-a"), directoryB = Fixtures.temporaryDirectory("pg-lease-b")
        let config = directoryA.appendingPathComponent("node.json")
        try #"{"webhooks":{"allowPrivateTargets":true,"caFile":"\#(receiver.certificate)","initialBackoffMilliseconds":50,"maxBackoffSeconds":1}}"#
            .write(to: config, atomically: true, encoding: .utf8)
        let arguments = ["--store", store, "--config", config.path]
        let first = try await NodeProcess.start(in: directoryA, arguments: arguments)
        let dataB = directoryB.appendingPathComponent(".lamina")
        try FileManager.default.createDirectory(at: dataB, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            at: first.dataDirectory.appendingPathComponent(LocalNode.Files.devIdentity), to: dataB.appendingPathComponent(LocalNode.Files.devIdentity))
        let second = try await NodeProcess.start(in: directoryB, arguments: arguments)
        let nodes = [first, second]
        let dev = try DevIdentityProvider.loadOrCreate(in: first.dataDirectory.appendingPathComponent(LocalNode.Files.devIdentity))

        let data = first.dataDirectory
        let appID = try String(contentsOf: data.appendingPathComponent("server-api/app-id"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let token = try String(contentsOf: data.appendingPathComponent("server-api/tokens"), encoding: .utf8)
            .split(separator: "\n").map(String.init).first { !$0.hasPrefix("#") && !$0.isEmpty } ?? ""
        let api = CurlAPI(url: "https://127.0.0.1:\(first.syncPort)", caFile: data.appendingPathComponent("tls/node-cert.pem").path,
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
        let conversation = try await MessagingTests.conversation(onHolder, with: [MessagingTests.alice, MessagingTests.bob])
        var sent: [String] = []
        func send(_ phase: String, _ n: Int, from clients: [SyncTestClient]) async throws {
            for i in 0..<n {
                let (message, _) = try await MessagingTests.send(clients[i % clients.count], conversation, "\(phase) \(i)")
                sent.append(message.uuid.uuidString.lowercased())
            }
        }
        try await send("before", 10, from: [onHolder, onOther])
        try await Self.waitUntil("the first 10 events delivered") { accepted.withLockedValue { $0.count } == 10 }
        // Only the holder delivered: its deliveries are every event, the other's none, no event twice.
        try await Self.waitUntil("the holder to record its 10 deliveries") { Self.sample(try await Self.metrics(holder), deliveries) == 10 }
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
        while receiver.server.connectionCount > 0, ContinuousClock.now < gone { try await Task.sleep(for: .milliseconds(10)) }
        accepting.withLockedValue { $0 = true }
        try await Self.waitUntil("the other node to take the lease") { Self.sample(try await Self.metrics(other), lease) == 1 }
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
        for post in receiver.posts { requestIDs[WebhookTests.messageID(of: post), default: []].insert(post.headers["layer-webhook-request-id"] ?? "") }
        #expect(requestIDs.values.allSatisfy { $0.count == 1 })

        await onOther.close()
        #expect(try await other.stop() == 0)
        await receiver.stop()
    }
}
