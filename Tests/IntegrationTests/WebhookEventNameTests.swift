import Foundation
import LaminaNode
import LaminaTransport
import Testing

/// Webhook event names per version (Protocol/WEBHOOKS.md): a webhook registered with Layer
/// 3.0's names (in `event_types`) receives `Message.created`, …, in the header and the payload;
/// one registered with the early names (in `events`) receives the same events under those.
@Suite struct WebhookEventNameTests {
    /// Each event, its early and 3.0 names, and the payload object it carries.
    static let events: [(early: String, layer3: String, object: String)] = [
        ("conversation.created", "Conversation.created", "conversation"),
        ("conversation.updated", "Conversation.updated", "conversation"),
        ("message.sent", "Message.created", "message"),
        ("message.deleted", "Message.deleted", "message"),
        ("conversation.deleted", "Conversation.deleted", "conversation"),
    ]

    static func register(_ api: CurlAPI, url: String, key: String, names: [String]) async throws -> String {
        let list = names.map { "\"\($0)\"" }.joined(separator: ",")
        let created = try await api.request(
            "POST", "/webhooks",
            json: #"{"target_url":"\#(url)","\#(key)":[\#(list)],"secret":"\#(WebhookTests.secret)"}"#,
            headers: api.webhookHeaders)
        #expect(created.status == 201, "\(created.body)")
        #expect(created.object["events"] as? [String] == names)
        return (created.object["id"] as? String ?? "").components(separatedBy: "/").last ?? ""
    }

    @Test func eachWebhookReceivesEventsUnderTheNamesItSubscribedBy() async throws {
        let receiver = try await WebhookReceiver.start()
        let node = try await WebhookTests.node("webhook-names", trusting: receiver)
        let api = CurlAPI(node.server, http: .http2)
        let layer3 = try await Self.register(
            api, url: receiver.url("/v3"), key: "event_types", names: Self.events.map(\.layer3))
        let early = try await Self.register(
            api, url: receiver.url("/early"), key: "events", names: Self.events.map(\.early))
        _ = try await WebhookTests.waitForStatus(api, layer3, "active")
        _ = try await WebhookTests.waitForStatus(api, early, "active")

        let conversation = try await WebhookTests.conversation(api)
        let patched = try await api.request(
            "PATCH", "/conversations/\(conversation)",
            json: #"[{"operation":"set","property":"metadata.title","value":"Hooks"}]"#,
            contentType: "application/vnd.layer-patch+json")
        #expect(patched.status == 204)
        let message = try await WebhookTests.send(api, in: conversation, "named")
        #expect(try await api.request("DELETE", "/conversations/\(conversation)/messages/\(message)").status == 204)
        #expect(try await api.request("DELETE", "/conversations/\(conversation)").status == 204)

        let posts = try await receiver.waitForPosts(2 * Self.events.count, timeout: .seconds(60))
        for (path, webhook, names) in [
            ("/v3", layer3, Self.events.map(\.layer3)), ("/early", early, Self.events.map(\.early)),
        ] {
            let mine = posts.filter { $0.path == path }
            #expect(Set(mine.compactMap { $0.headers["layer-webhook-event-type"] }) == Set(names), "\(path)")
            for (index, name) in names.enumerated() {
                guard let post = mine.first(where: { $0.headers["layer-webhook-event-type"] == name }) else {
                    Issue.record("\(path): no \(name)")
                    continue
                }
                let object = Self.events[index].object
                #expect(post.headers["layer-webhook-id"] == webhook)
                #expect(post.headers["content-type"] == "application/vnd.layer.webhooks+json; version=3.0")
                #expect(post.headers["user-agent"] == "layer-webhooks/3.0")
                #expect(UUID(uuidString: post.headers["layer-webhook-request-id"] ?? "") != nil)
                let event = post.json["event"] as? [String: Any]
                #expect(event?["type"] as? String == name)
                #expect(UUID(uuidString: event?["id"] as? String ?? "") != nil)
                #expect((event?["created_at"] as? String)?.hasSuffix("Z") == true)
                #expect((post.json["actor"] as? [String: Any])?["id"] as? String != nil, "\(name)")
                let subject = post.json[object] as? [String: Any]
                let expectedID =
                    object == "message" ? "layer:///messages/\(message)" : "layer:///conversations/\(conversation)"
                #expect(subject?["id"] as? String == expectedID, "\(name)")
                switch Self.events[index].early {
                case "message.sent":
                    #expect((subject?["parts"] as? [[String: Any]])?.first?["body"] as? String == "named")
                case "conversation.updated":
                    #expect((subject?["metadata"] as? [String: Any])?["title"] as? String == "Hooks")
                case "message.deleted":
                    #expect(
                        (subject?["conversation"] as? [String: Any])?["id"] as? String
                            == "layer:///conversations/\(conversation)")
                default: break
                }
            }
        }
        await node.stop()
        await receiver.stop()
    }

    @Test func registrationsNameKnownEventsOnce() async throws {
        let receiver = try await WebhookReceiver.start()
        let node = try await WebhookTests.node("webhook-names-refused", trusting: receiver)
        let api = CurlAPI(node.server)
        for (body, property) in [
            (#"["Receipt.updated"]"#, "events"), (#"["message.sent","Message.created"]"#, "events"),
            (#"["Message.Created"]"#, "events"),
        ] {
            let refused = try await api.request(
                "POST", "/webhooks",
                json: #"{"target_url":"\#(receiver.url())","events":\#(body),"secret":"\#(WebhookTests.secret)"}"#,
                headers: api.webhookHeaders)
            #expect(refused.status == 422, "\(body)")
            #expect((refused.object["data"] as? [String: Any])?["property"] as? String == property, "\(body)")
        }
        let viaEventTypes = try await api.request(
            "POST", "/webhooks",
            json: #"{"target_url":"\#(receiver.url())","event_types":[],"secret":"\#(WebhookTests.secret)"}"#,
            headers: api.webhookHeaders)
        #expect(viaEventTypes.status == 422)
        #expect((viaEventTypes.object["data"] as? [String: Any])?["property"] as? String == "event_types")
        await node.stop()
        await receiver.stop()
    }
}
