import Foundation
import LaminaModel
import LaminaTestPostgres
import NIOConcurrencyHelpers
import Testing

@testable import LaminaNode

/// Two nodes on one PostgreSQL store answer for one app (issue #33): one app id, each node's
/// Server API token good on both, one webhook that receives every event once under that app
/// id whichever node took the command, and a queue-depth gauge that is the shared outbox's
/// count on both nodes: it shows the backlog while the receiver is down, and is never negative.
@Suite struct SharedPostgresAppTests {
    /// `lamina_webhook_queue_depth_events` of `webhook` on `node`'s /metrics (nil: not shown).
    static func depth(_ node: TestNode, _ webhook: String) async throws -> Double? {
        let metrics = try await ExternalCommand.run(
            "/usr/bin/curl", ["-sS", "http://127.0.0.1:\(node.server.admin?.port ?? 0)/metrics"]
        ).stdout
        let prefix = "lamina_webhook_queue_depth_events{webhook=\"\(webhook)\"} "
        guard let line = metrics.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return nil }
        return Double(line.dropFirst(prefix.count))
    }

    @Test func twoNodesAnswerForOneAppAndItsWebhookGetsEveryEventOnce() async throws {
        let down = NIOLockedValueBox(false)
        let receiver = try await WebhookReceiver.start { _ in down.withLockedValue { $0 } ? 503 : 200 }
        let database = try PostgresTestCluster.newDatabase()
        let configure: (inout NodeServerConfiguration) -> Void = { c in
            c.webhooks.allowPrivateTargets = true
            c.webhooks.caFile = receiver.certificate
            c.webhooks.initialBackoffMilliseconds = 50
            c.webhooks.maxBackoffSeconds = 1
            c.adminPort = 0
        }
        let a = try await SharedPostgresNodesTests.node("pg-app-a", on: database, configure: configure)
        let b = try await SharedPostgresNodesTests.node("pg-app-b", on: database, trusting: a, configure: configure)

        // One app id; each node's token is good on both.
        let appID = try #require(a.server.serverAPICredentials?.appID)
        #expect(b.server.serverAPICredentials?.appID == appID)
        let apiA = CurlAPI(a.server)
        let apiB = CurlAPI(b.server)
        #expect(apiA.appID == apiB.appID)
        let aTokenOnB = CurlAPI(b.server, token: apiA.token)
        #expect(try await aTokenOnB.request("GET", "/users/alice/conversations").status == 200)
        let bTokenOnA = CurlAPI(a.server, token: apiB.token)
        try await SharedPostgresOutboxTests.waitUntil("node A to take node B's token") {
            try await bTokenOnA.request("GET", "/users/alice/conversations").status == 200
        }
        let wrong = CurlAPI(a.server, token: "not-a-token-of-any-node-0123456789")
        #expect(try await wrong.request("GET", "/users/alice/conversations").status == 401)

        // One webhook, registered through A; commands through both nodes.
        let webhook = try await WebhookEventNameTests.register(
            apiA, url: receiver.url("/app"), key: "events", names: ["Message.created", "Conversation.created"])
        _ = try await WebhookTests.waitForStatus(apiA, webhook, "active")
        try await SharedPostgresOutboxTests.waitUntil("node B's outbox to know the webhook") {
            b.server.engine.webhooks.wants(.messageSent)
        }
        let conversation = try await WebhookTests.conversation(apiB)
        var messages: [String] = []
        for (i, api) in [apiA, apiB, apiA, apiB].enumerated() {
            messages.append(try await WebhookTests.send(api, in: conversation, "message \(i)"))
        }
        let posts = try await receiver.waitForPosts(1 + messages.count, timeout: .seconds(60))
        let created = posts.filter { $0.headers["layer-webhook-event-type"] == "Message.created" }
        #expect(created.map(WebhookTests.messageID).sorted() == messages.sorted(), "each message once")
        #expect(posts.filter { $0.headers["layer-webhook-event-type"] == "Conversation.created" }.count == 1)
        for post in posts {
            #expect(post.headers["layer-webhook-id"] == webhook)
            let object = (post.json["message"] ?? post.json["conversation"]) as? [String: Any]
            #expect((object?["url"] as? String)?.contains("/apps/\(appID)/") == true, "\(post.json)")
        }
        #expect(Set(posts.compactMap { ($0.json["event"] as? [String: Any])?["id"] as? String }).count == posts.count)

        // The receiver is down: both nodes show the backlog of the shared outbox.
        down.withLockedValue { $0 = true }
        for (i, api) in [apiA, apiB, apiB].enumerated() {
            _ = try await WebhookTests.send(api, in: conversation, "while down \(i)")
        }
        for node in [a, b] {
            try await SharedPostgresOutboxTests.waitUntil("a backlog of 3 on /metrics") {
                try await Self.depth(node, webhook) == 3
            }
        }
        // Back up: the backlog drains and the gauge returns to 0 on both, never below.
        down.withLockedValue { $0 = false }
        for node in [a, b] {
            try await SharedPostgresOutboxTests.waitUntil("the backlog drained on /metrics", timeout: .seconds(60)) {
                try await Self.depth(node, webhook) == 0
            }
        }
        #expect(receiver.posts.filter { $0.headers["layer-webhook-event-type"] == "Message.created" }.count >= 7)

        await a.stop()
        await b.stop()
        await receiver.stop()
    }
}
