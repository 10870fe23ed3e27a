import Foundation
import LaminaTransport
import NIOConcurrencyHelpers
import Testing

@testable import LaminaNode

#if canImport(Glibc)
    import Glibc
#endif

/// Webhooks (#13) on a real node: created through the webhooks API, verified by a receiver
/// started in the test (TLS with a test certificate, HTTP/1.1), events signed and retried,
/// one target's trouble kept from the others, nothing lost across kill -9.
@Suite struct WebhookTests {
    static let secret = "0123456789abcdef-secret"

    /// A node that trusts `receiver`'s certificate and allows loopback targets.
    static func node(_ name: String, trusting receiver: WebhookReceiver, backoffMilliseconds: Int = 50) async throws
        -> TestNode
    {
        try await TestNode.start(name) { c in
            c.webhooks.allowPrivateTargets = true
            c.webhooks.caFile = receiver.certificate
            c.webhooks.initialBackoffMilliseconds = backoffMilliseconds
        }
    }

    /// Creates a webhook for `events` to `url`; its id (the UUID).
    static func createWebhook(_ api: CurlAPI, url: String, events: [String] = ["message.sent"], config: String = "null")
        async throws -> String
    {
        let list = events.map { "\"\($0)\"" }.joined(separator: ",")
        let created = try await api.request(
            "POST", "/webhooks",
            json: #"{"target_url":"\#(url)","events":[\#(list)],"secret":"\#(secret)","config":\#(config)}"#,
            headers: api.webhookHeaders)
        #expect(created.status == 201, "\(created.body)")
        #expect(created.object["status"] as? String == "unverified")
        #expect(created.object["secret"] == nil)
        return (created.object["id"] as? String ?? "").components(separatedBy: "/").last ?? ""
    }

    /// Polls the webhook's status until it is `status` (the verification runs after the create).
    static func waitForStatus(_ api: CurlAPI, _ id: String, _ status: String) async throws -> [String: Any] {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let got = try await api.request("GET", "/webhooks/\(id)", headers: api.webhookHeaders)
            if got.object["status"] as? String == status { return got.object }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw SyncTestTimeout(waitingFor: "webhook \(id) to be \(status)")
    }

    /// A conversation of alice and bob; its UUID.
    static func conversation(_ api: CurlAPI) async throws -> String {
        let created = try await api.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        #expect(created.status == 201 || created.status == 200)
        return ServerAPITests.conversationUUID(created.object)
    }

    /// Alice sends `text`; the message's UUID.
    static func send(_ api: CurlAPI, in conversation: String, _ text: String) async throws -> String {
        let sent = try await api.request(
            "POST", "/conversations/\(conversation)/messages",
            json: #"{"sender_id":"layer:///identities/alice","parts":[{"body":"\#(text)","mime_type":"text/plain"}]}"#)
        #expect(sent.status == 201, "\(sent.body)")
        return (sent.object["id"] as? String ?? "").replacingOccurrences(of: "layer:///messages/", with: "")
    }

    /// Whether events arrived in commit order up to the in-flight bound: they start in commit
    /// order, at most `inFlight` at once, so when an event starts every earlier one has arrived
    /// but the at most `inFlight - 1` still in flight beside it: at most that many events
    /// committed before an event first arrive after it.
    static func inCommitOrder(_ arrived: [String], _ committed: [String], inFlight: Int) -> Bool {
        let position = Dictionary(committed.enumerated().map { ($1, $0) }, uniquingKeysWith: min)
        var seen = Set<String>()
        let firsts = arrived.filter { seen.insert($0).inserted }.compactMap { position[$0] }
        return firsts.enumerated().allSatisfy { i, index in firsts[(i + 1)...].filter { $0 < index }.count < inFlight }
    }

    static func messageID(of post: WebhookReceiver.Received) -> String {
        ((post.json["message"] as? [String: Any])?["id"] as? String ?? "").replacingOccurrences(
            of: "layer:///messages/", with: "")
    }

    @Test func aWebhookIsVerifiedAndReceivesASignedMessageSentWithinASecond() async throws {
        let receiver = try await WebhookReceiver.start()
        let node = try await Self.node("webhook-signed", trusting: receiver)
        let api = CurlAPI(node.server)
        let id = try await Self.createWebhook(api, url: receiver.url("/hook?app=1"), config: #"{"team":"blue"}"#)
        let active = try await Self.waitForStatus(api, id, "active")
        #expect(receiver.challenges == 1)
        #expect(active["target_url"] as? String == receiver.url("/hook?app=1"))
        #expect((active["config"] as? [String: String]) == ["team": "blue"])
        let listed = try await api.request("GET", "/webhooks", headers: api.webhookHeaders)
        #expect(listed.array.count == 1)

        let conversation = try await Self.conversation(api)
        let message = try await Self.send(api, in: conversation, "hello hooks")
        // Measured from the send's acknowledgment (the commit is before it; curl's own start-up
        // and TLS are not the node's lag): delivered within a second of it, or before it.
        let acknowledgedAt = ContinuousClock.now
        let post = try await receiver.waitForPosts(1, timeout: .seconds(30))[0]
        print("webhook event delivered \(post.at - acknowledgedAt) after the send's acknowledgment")
        #expect(
            post.at - acknowledgedAt < .seconds(1), "delivered \(post.at - acknowledgedAt) after the acknowledgment")
        #expect(post.path == "/hook?app=1")
        #expect(post.headers["layer-webhook-event-type"] == "message.sent")
        #expect(post.headers["layer-webhook-id"] == id)
        #expect(post.headers["content-type"] == "application/vnd.layer.webhooks+json; version=3.0")
        #expect(UUID(uuidString: post.headers["layer-webhook-request-id"] ?? "") != nil)
        // The signature is HMAC-SHA1 of the exact body, checked with openssl, not our code.
        let bodyFile = Fixtures.temporaryDirectory("webhook-body").appendingPathComponent("body.json")
        try Data(post.body).write(to: bodyFile)
        let digest = try await ExternalCommand.run(
            "/usr/bin/openssl", ["dgst", "-sha1", "-hmac", Self.secret, "-r", bodyFile.path])
        #expect(digest.stdout.split(separator: " ").first.map(String.init) == post.headers["layer-webhook-signature"])
        let event = post.json["event"] as? [String: Any]
        #expect(event?["type"] as? String == "message.sent")
        #expect(Self.messageID(of: post) == message)
        #expect((post.json["config"] as? [String: String]) == ["team": "blue"])
        #expect(
            ((post.json["message"] as? [String: Any])?["parts"] as? [[String: Any]])?.first?["body"] as? String
                == "hello hooks")
        #expect((post.json["actor"] as? [String: Any])?["user_id"] as? String == "alice")

        // Deactivated: no new events; activated again (verified again): delivery resumes.
        let off = try await api.request("POST", "/webhooks/\(id)/deactivate", headers: api.webhookHeaders)
        #expect(off.object["status"] as? String == "inactive")
        _ = try await Self.send(api, in: conversation, "unheard")
        let on = try await api.request("POST", "/webhooks/\(id)/activate", headers: api.webhookHeaders)
        #expect(on.status == 200)
        #expect(on.object["status"] as? String == "active")
        #expect(receiver.challenges == 2)
        let third = try await Self.send(api, in: conversation, "heard again")
        let posts = try await receiver.waitForPosts(2, timeout: .seconds(30))
        #expect(posts.map(Self.messageID) == [message, third])

        let deleted = try await api.request("DELETE", "/webhooks/\(id)", headers: api.webhookHeaders)
        #expect(deleted.status == 204)
        let gone = try await api.request("GET", "/webhooks/\(id)", headers: api.webhookHeaders)
        #expect(gone.status == 404)
        await node.stop()
        await receiver.stop()
    }

    @Test func badWebhooksAreRefusedWithAReason() async throws {
        let node = try await TestNode.start("webhook-refusals")
        let api = CurlAPI(node.server)
        func create(_ json: String) async throws -> CurlAPI.Response {
            try await api.request("POST", "/webhooks", json: json, headers: api.webhookHeaders)
        }
        let cases: [(String, String, String)] = [
            (
                #"{"target_url":"https://127.0.0.1:9/x","events":["message.sent"],"secret":"\#(Self.secret)"}"#,
                "target_url", "private"
            ),
            (
                #"{"target_url":"http://example.com/x","events":["message.sent"],"secret":"\#(Self.secret)"}"#,
                "target_url", "https"
            ),
            (#"{"target_url":"https://example.com/x","events":["message.sent"],"secret":"short"}"#, "secret", "16"),
            (
                #"{"target_url":"https://example.com/x","events":["message.exploded"],"secret":"\#(Self.secret)"}"#,
                "events", "unknown"
            ),
            (#"{"target_url":"https://example.com/x","events":[],"secret":"\#(Self.secret)"}"#, "events", "non-empty"),
        ]
        for (json, property, words) in cases {
            let refused = try await create(json)
            #expect(refused.status == 422, "\(json)")
            #expect(refused.object["id"] as? String == "invalid_property", "\(json)")
            #expect((refused.object["data"] as? [String: Any])?["property"] as? String == property, "\(json)")
            #expect((refused.object["message"] as? String ?? "").contains(words), "\(refused.body)")
            #expect(refused.headers["content-type"]?.hasPrefix("application/json") == true)
        }
        let missing = try await create(#"{"events":["message.sent"],"secret":"\#(Self.secret)"}"#)
        #expect(missing.object["id"] as? String == "missing_property")
        let wrongAccept = try await api.request("GET", "/webhooks")
        #expect(wrongAccept.status == 406)
        let noToken = try await api.request(
            "GET", "/webhooks", headers: ["Accept": "application/vnd.layer.webhooks+json; version=3.0"])
        #expect(noToken.status == 401)
        await node.stop()
    }

    @Test func aTargetAnswering500ThreeTimesGetsTheEventOnTheFourthTryWithTheSameRequestID() async throws {
        let receiver = try await WebhookReceiver.start { index in index < 3 ? 500 : 200 }
        let node = try await Self.node("webhook-retry", trusting: receiver)
        let api = CurlAPI(node.server)
        let id = try await Self.createWebhook(api, url: receiver.url())
        _ = try await Self.waitForStatus(api, id, "active")
        let message = try await Self.send(api, in: try await Self.conversation(api), "try again")
        let posts = try await receiver.waitForPosts(4)
        #expect(posts.count == 4)
        #expect(Set(posts.map { $0.headers["layer-webhook-request-id"] ?? "" }).count == 1)
        #expect(Set(posts.map { $0.headers["layer-webhook-signature"] ?? "" }).count == 1)
        #expect(Set(posts.map(\.body)).count == 1)
        #expect(posts.allSatisfy { Self.messageID(of: $0) == message })
        // Backoff: each retry waits longer than the one before (50 ms doubled, jitter of at most half).
        let gaps = zip(posts.dropFirst(), posts).map { $0.at - $1.at }
        #expect(gaps.allSatisfy { $0 >= .milliseconds(25) }, "\(gaps)")
        // Delivered once: nothing more arrives after the 200 (a next event shows the queue moved on).
        let next = try await Self.send(api, in: try await Self.conversation(api), "after")
        let all = try await receiver.waitForPosts(5)
        #expect(all.count == 5)
        #expect(Self.messageID(of: all[4]) == next)
        await node.stop()
        await receiver.stop()
    }

    @Test func aDeadTargetDoesNotDelayAHealthyOne() async throws {
        let release = AsyncStream.makeStream(of: Void.self)
        // The dead target takes requests and never answers (until the test ends).
        let dead = try await WebhookReceiver.start { _ in
            for await _ in release.stream {}
            return 200
        }
        let healthy = try await WebhookReceiver.start()
        // Both receivers' certificates: the node trusts one CA file, so both share a bundle.
        let bundle = Fixtures.temporaryDirectory("webhook-bundle").appendingPathComponent("ca.pem")
        try
            (String(contentsOfFile: dead.certificate, encoding: .utf8)
            + String(contentsOfFile: healthy.certificate, encoding: .utf8))
            .write(to: bundle, atomically: true, encoding: .utf8)
        let node = try await TestNode.start("webhook-dead") { c in
            c.webhooks.allowPrivateTargets = true
            c.webhooks.caFile = bundle.path
        }
        let api = CurlAPI(node.server)
        let deadID = try await Self.createWebhook(api, url: dead.url())
        let healthyID = try await Self.createWebhook(api, url: healthy.url())
        _ = try await Self.waitForStatus(api, deadID, "active")
        _ = try await Self.waitForStatus(api, healthyID, "active")
        let conversation = try await Self.conversation(api)
        var messages: [String] = []
        for i in 0..<3 { messages.append(try await Self.send(api, in: conversation, "m\(i)")) }
        let acknowledgedAt = ContinuousClock.now
        let got = try await healthy.waitForPosts(3, timeout: .seconds(30))
        // All three, each once (several are in flight at once, so they may arrive in any order).
        #expect(got.count == 3 && Set(got.map(Self.messageID)) == Set(messages))
        #expect(got[2].at - acknowledgedAt < .seconds(1))
        // The dead one holds its first events, up to its in-flight bound (4): all three, none retried.
        #expect(Set(try await dead.waitForPosts(3).map(Self.messageID)) == Set(messages))
        #expect(dead.posts.count == 3)
        // Stopping the node does not wait for the dead target's answer (its request fails at once).
        let stopping = ContinuousClock.now
        await node.stop()
        #expect(ContinuousClock.now - stopping < .seconds(5))
        release.continuation.finish()
        await dead.stop()
        await healthy.stop()
    }

    @Test func killNineAfterCommitBeforeDeliveryLosesNoEvent() async throws {
        let accepting = NIOLockedValueBox(false)
        let receiver = try await WebhookReceiver.start { _ in accepting.withLockedValue { $0 } ? 200 : 503 }
        let directory = Fixtures.temporaryDirectory("webhook-kill")
        let config = directory.appendingPathComponent("node.json")
        try
            #"{"webhooks":{"allowPrivateTargets":true,"caFile":"\#(receiver.certificate)","initialBackoffMilliseconds":50,"maxBackoffSeconds":1}}"#
            .write(to: config, atomically: true, encoding: .utf8)
        var node = try await NodeProcess.start(in: directory, arguments: ["--config", config.path])
        let data = node.dataDirectory
        let appID = try String(contentsOf: data.appendingPathComponent("server-api/app-id"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let token =
            try String(contentsOf: data.appendingPathComponent("server-api/tokens"), encoding: .utf8)
            .split(separator: "\n").map(String.init).first { !$0.hasPrefix("#") && !$0.isEmpty } ?? ""
        func api(_ node: NodeProcess) -> CurlAPI {
            CurlAPI(
                url: "https://127.0.0.1:\(node.syncPort)",
                caFile: data.appendingPathComponent("tls/node-cert.pem").path,
                appID: appID, token: token)
        }
        let id = try await Self.createWebhook(api(node), url: receiver.url())
        _ = try await Self.waitForStatus(api(node), id, "active")
        let conversation = try await Self.conversation(api(node))
        var messages: [String] = []
        for i in 0..<20 { messages.append(try await Self.send(api(node), in: conversation, "m\(i)")) }
        // Every send was acknowledged (committed); the target has refused what it was offered.
        _ = try await receiver.waitForPosts(1)
        #expect(try await node.stop(with: SIGKILL) == SIGKILL)
        // Requests the killed node had sent are still read and refused (its sockets close only
        // after them): once its connections are gone, every later post is the new node's.
        let gone = ContinuousClock.now + .seconds(30)
        while receiver.server.connectionCount > 0, ContinuousClock.now < gone {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(receiver.server.connectionCount == 0)
        let refusedBefore = receiver.posts.count
        accepting.withLockedValue { $0 = true }
        node = try await NodeProcess.start(in: directory, arguments: ["--config", config.path])
        let posts = try await receiver.waitForPosts(refusedBefore + 20, timeout: .seconds(30))
        let accepted = Array(posts.dropFirst(refusedBefore))
        #expect(accepted.map(Self.messageID).sorted() == messages.sorted(), "none missing, none twice")
        #expect(
            Self.inCommitOrder(accepted.map(Self.messageID), messages, inFlight: 4),
            "\(accepted.map(Self.messageID)) \(messages)")
        // Duplicates only with the same request id: one request id per message.
        var requestIDs: [String: Set<String>] = [:]
        for post in posts {
            requestIDs[Self.messageID(of: post), default: []].insert(post.headers["layer-webhook-request-id"] ?? "")
        }
        #expect(requestIDs.values.allSatisfy { $0.count == 1 })
        // Metrics on /metrics: 20 deliveries, the queue empty (the node records a delivery just
        // after the target's answer, so the scrape is repeated until it has).
        let delivered = "lamina_webhook_deliveries_total{webhook=\"\(id)\"} 20\n"
        let empty = "lamina_webhook_queue_depth_events{webhook=\"\(id)\"} 0.0\n"
        var metrics = ""
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline, !(metrics.contains(delivered) && metrics.contains(empty)) {
            metrics = try await ExternalCommand.run(
                "/usr/bin/curl", ["-sS", "http://127.0.0.1:\(node.adminPort)/metrics"]
            ).stdout
        }
        #expect(metrics.contains(delivered), "\(metrics)")
        #expect(metrics.contains(empty), "\(metrics)")
        _ = try await node.stop()
        await receiver.stop()
    }

    @Test func aTargetThatDoesNotEchoTheChallengeStaysUnverified() async throws {
        let receiver = try await WebhookReceiver.start(echoing: false)
        let node = try await Self.node("webhook-unverified", trusting: receiver)
        let api = CurlAPI(node.server)
        let id = try await Self.createWebhook(api, url: receiver.url())
        let activation = try await api.request("POST", "/webhooks/\(id)/activate", headers: api.webhookHeaders)
        #expect(activation.status == 422)
        #expect((activation.object["message"] as? String ?? "").contains("did not verify"), "\(activation.body)")
        #expect(receiver.challenges >= 1)
        let got = try await api.request("GET", "/webhooks/\(id)", headers: api.webhookHeaders)
        #expect(got.object["status"] as? String == "unverified")
        #expect((got.object["status_reason"] as? String ?? "").contains("did not verify"), "\(got.body)")
        _ = try await Self.send(api, in: try await Self.conversation(api), "nobody listens")
        await node.stop()
        #expect(receiver.posts.isEmpty)
        await receiver.stop()
    }

    @Test func aWebhookFailingForTheRetryPeriodIsMarkedUnhealthyAndDeactivated() async throws {
        let receiver = try await WebhookReceiver.start { _ in 503 }
        let node = try await TestNode.start("webhook-unhealthy") { c in
            c.webhooks.allowPrivateTargets = true
            c.webhooks.caFile = receiver.certificate
            c.webhooks.initialBackoffMilliseconds = 100
            // Long enough for a retry even when a loaded run starts the first attempt late.
            c.webhooks.retryPeriodSeconds = 15
        }
        let api = CurlAPI(node.server)
        let id = try await Self.createWebhook(api, url: receiver.url())
        _ = try await Self.waitForStatus(api, id, "active")
        _ = try await Self.send(api, in: try await Self.conversation(api), "never taken")
        let inactive = try await Self.waitForStatus(api, id, "inactive")
        #expect((inactive["status_reason"] as? String ?? "").contains("unhealthy"), "\(inactive)")
        #expect(receiver.posts.count >= 2)
        let tries = receiver.posts.count
        // No more attempts once inactive, and no new events queued.
        _ = try await Self.send(api, in: try await Self.conversation(api), "after")
        await node.stop()
        #expect(receiver.posts.count == tries)
        await receiver.stop()
    }

    @Test func eventsStartInCommitOrderSeveralInFlightAndARetriedOneGoesAloneWithItsRequestID() async throws {
        // No answer before every message was sent, then each takes 300 ms, so events queue up
        // and several are in flight however slowly the sends go; the event of "m5" is refused
        // with a 500 once.
        let failedOnce = NIOLockedValueBox(false)
        let allSent = NIOLockedValueBox(false)
        let receiver = try await WebhookReceiver.start { _, post in
            if (post.json["message"] as? [String: Any]).flatMap({
                ($0["parts"] as? [[String: Any]])?.first?["body"] as? String
            }) == "m5",
                failedOnce.withLockedValue({ f in
                    defer { f = true }
                    return !f
                })
            {
                return 500
            }
            let deadline = ContinuousClock.now + .seconds(60)
            while !allSent.withLockedValue({ $0 }) && ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(20))
            }
            try? await Task.sleep(for: .milliseconds(300))
            return 200
        }
        let node = try await Self.node("webhook-window", trusting: receiver)
        let api = CurlAPI(node.server)
        let id = try await Self.createWebhook(api, url: receiver.url())
        _ = try await Self.waitForStatus(api, id, "active")
        let conversation = try await Self.conversation(api)
        var messages: [String] = []
        for i in 0..<12 { messages.append(try await Self.send(api, in: conversation, "m\(i)")) }
        allSent.withLockedValue { $0 = true }
        let posts = try await receiver.waitForPosts(13, timeout: .seconds(60))
        let ids = posts.map(Self.messageID)
        #expect(ids.sorted() == (messages + [messages[5]]).sorted(), "every event, m5's twice")
        // Several at once, never more than the in-flight bound (4).
        #expect(posts.map(\.others).max() ?? 0 >= 1, "\(posts.map(\.others))")
        #expect(posts.map(\.others).max() ?? 0 <= 3, "\(posts.map(\.others))")
        #expect(Self.inCommitOrder(ids, messages, inFlight: 4), "\(ids)")
        // The retry carries the first attempt's request id, signature and body.
        let tries = posts.filter { Self.messageID(of: $0) == messages[5] }
        #expect(Set(tries.map { $0.headers["layer-webhook-request-id"] ?? "" }).count == 1)
        #expect(Set(tries.map { $0.headers["layer-webhook-signature"] ?? "" }).count == 1)
        #expect(Set(tries.map(\.body)).count == 1)
        // The retry went alone: nothing else in flight when it arrived, and the next event
        // started only once it was answered; every event committed before it went first.
        let retry = try #require(posts.lastIndex { Self.messageID(of: $0) == messages[5] })
        #expect(posts[retry].others == 0)
        if retry + 1 < posts.count { #expect(posts[retry + 1].others == 0) }
        #expect(Set(ids[..<retry]).isSuperset(of: messages[..<5]))
        #expect(retry < posts.count - 1, "later events went after the retry")
        // One request id per message.
        var requestIDs: [String: Set<String>] = [:]
        for post in posts {
            requestIDs[Self.messageID(of: post), default: []].insert(post.headers["layer-webhook-request-id"] ?? "")
        }
        #expect(requestIDs.count == 12 && requestIDs.values.allSatisfy { $0.count == 1 })
        await node.stop()
        await receiver.stop()
    }

    @Test func aConnectionTheTargetClosedWhileIdleIsReplacedWithoutARetry() async throws {
        // Idle long enough that a loaded run's verification (a handshake, then the request)
        // is not cut; the test waits for the close anyway.
        let receiver = try await WebhookReceiver.start(idleTimeout: .seconds(5))
        // A retry would wait at least 2.5 s: the second event arriving sooner shows there was none.
        let node = try await Self.node("webhook-idle", trusting: receiver, backoffMilliseconds: 5_000)
        let api = CurlAPI(node.server)
        let id = try await Self.createWebhook(api, url: receiver.url())
        _ = try await Self.waitForStatus(api, id, "active")
        let conversation = try await Self.conversation(api)
        _ = try await Self.send(api, in: conversation, "first")
        _ = try await receiver.waitForPosts(1)
        // The receiver closes the kept-alive connection once it idles.
        let deadline = ContinuousClock.now + .seconds(30)
        while receiver.server.connectionCount > 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(receiver.server.connectionCount == 0)
        _ = try await Self.send(api, in: conversation, "second")
        let acknowledgedAt = ContinuousClock.now
        let posts = try await receiver.waitForPosts(2)
        #expect(posts[1].at - acknowledgedAt < .seconds(2))
        await node.stop()
        await receiver.stop()
    }
}

extension WebhookTests {
    /// Issue 35, item 4: a target on any address of the node's own interfaces is refused,
    /// public-range ones included (this machine's eth0 has 192.0.2.2, which the private-range
    /// filter alone let through).
    @Test func targetsOnTheNodesOwnAddressesAreRefused() async throws {
        let node = try await TestNode.start("webhook-own-address")
        let api = CurlAPI(node.server)
        let own = WebhookTarget.ownAddresses().filter { !WebhookTarget.isInternal($0) }
        for address in own.sorted() {
            let host = address.contains(":") ? "[\(address)]" : address
            let refused = try await api.request(
                "POST", "/webhooks",
                json: #"{"target_url":"https://\#(host):9/x","events":["message.sent"],"secret":"\#(Self.secret)"}"#,
                headers: api.webhookHeaders)
            #expect(refused.status == 422, "\(address): \(refused.body)")
            #expect(refused.body.contains("address of this node"), "\(refused.body)")
        }
        print("own public-range addresses refused: \(own.sorted())")
        await node.stop()
    }
}
