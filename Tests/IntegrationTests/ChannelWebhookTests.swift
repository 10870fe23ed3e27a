import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import LaminaTransport
import Testing

/// Channel webhooks (Protocol/WEBHOOKS.md) on a real node: each channel and membership event
/// of the Server API and of a member's own device arrives once at a real receiving server, with
/// the channel, membership or message it is about and who did it; a failing target gets the
/// event again (same request id) until it takes it.
@Suite struct ChannelWebhookTests {
    static let names = [
        "Channel.created", "Channel.deleted", "Membership.created", "Membership.deleted", "ChannelMessage.created",
    ]

    /// The channel's UUID in a Server API answer.
    static func channelUUID(_ body: String) -> String? {
        guard let range = body.range(of: #"layer:///channels/"#) else { return nil }
        return String(body[range.upperBound...].prefix(36))
    }

    @Test func everyChannelAndMembershipEventArrivesOnceWithItsObjectAndActor() async throws {
        let receiver = try await WebhookReceiver.start()
        let node = try await WebhookTests.node("webhook-channels", trusting: receiver)
        let api = CurlAPI(node.server, http: .http2)
        let webhook = try await WebhookEventNameTests.register(
            api, url: receiver.url("/channels"), key: "events", names: Self.names)
        _ = try await WebhookTests.waitForStatus(api, webhook, "active")

        // The Server API creates the channel with alice; bob joins from his device.
        let created = try await api.request("POST", "/channels", json: #"{"name":"hooked","members":["alice"]}"#)
        #expect(created.status == 201, "\(created.body)")
        let uuid = try #require(Self.channelUUID(created.body))
        let channel = ChannelID(uuid: try #require(UUID(uuidString: uuid)))
        let bob = try ClientHarness.device("bob", on: node)
        _ = try await ClientHarness.connectLive(bob, on: node)
        try await bob.joinChannel(channel)

        // Messages: alice through the Server API, bob from his device.
        let sent = try await api.request(
            "POST", "/channels/\(uuid)/messages",
            json: #"{"sender":{"user_id":"alice"},"parts":[{"mime_type":"text/plain","body":"hello hooks"}]}"#)
        #expect(sent.status == 201, "\(sent.body)")
        let bobs = try await bob.sendChannelMessage(text: "from bob", to: channel)

        // Bob leaves; the Server API removes alice, then deletes the channel.
        try await bob.leaveChannel(channel)
        #expect(try await api.request("DELETE", "/channels/\(uuid)/members/alice").status == 204)
        #expect(try await api.request("DELETE", "/channels/\(uuid)").status == 204)

        let posts = try await receiver.waitForPosts(8, timeout: .seconds(60))
        #expect(posts.count == 8)
        // Several events are in flight at once: grouped by name, not by arrival.
        let byName = Dictionary(grouping: posts) { $0.headers["layer-webhook-event-type"] ?? "" }
        #expect(
            byName.mapValues(\.count) == [
                "Channel.created": 1, "Channel.deleted": 1, "Membership.created": 2,
                "Membership.deleted": 2, "ChannelMessage.created": 2,
            ], "\(byName.keys)")
        for post in posts {
            let name = post.headers["layer-webhook-event-type"] ?? ""
            #expect((post.json["event"] as? [String: Any])?["type"] as? String == name)
            #expect(post.headers["layer-webhook-id"] == webhook)
            #expect(try await WebhookPayloadTests.signature(of: post.body) == post.headers["layer-webhook-signature"])
        }
        let channelID = "layer:///channels/\(uuid)"
        func actor(_ post: WebhookReceiver.Received) -> String? {
            let a = post.json["actor"] as? [String: Any]
            return a?["user_id"] as? String ?? (a?["name"] as? String).map { "system:\($0)" }
        }
        func object(_ post: WebhookReceiver.Received?, _ key: String) -> [String: Any] {
            post?.json[key] as? [String: Any] ?? [:]
        }
        func membership(_ name: String, _ user: String) -> WebhookReceiver.Received? {
            byName[name]?.first { object($0, "membership")["id"] as? String == "\(channelID)/members/\(user)" }
        }

        // Channel.created: the channel as created, by the Server API's system sender.
        let createdPost = byName["Channel.created"]?.first
        let made = object(createdPost, "channel")
        #expect(made["id"] as? String == channelID)
        #expect(made["name"] as? String == "hooked")
        #expect((made["url"] as? String)?.hasSuffix("/channels/\(uuid)") == true)
        #expect((made["members_url"] as? String)?.hasSuffix("/channels/\(uuid)/members") == true)
        #expect(made["member_count"] as? Int == 0)
        #expect(createdPost.map(actor) == "system:server-api")

        // Memberships: alice added by the Server API, bob joined by himself; bob left by himself,
        // alice removed by the Server API.
        for (name, user, by) in [
            ("Membership.created", "alice", "system:server-api"), ("Membership.created", "bob", "bob"),
            ("Membership.deleted", "bob", "bob"), ("Membership.deleted", "alice", "system:server-api"),
        ] {
            let post = membership(name, user)
            let m = object(post, "membership")
            #expect((m["channel"] as? [String: Any])?["id"] as? String == channelID, "\(name) \(user)")
            #expect((m["identity"] as? [String: Any])?["user_id"] as? String == user, "\(name) \(user)")
            #expect(post.map(actor) == by, "\(name) \(user)")
        }

        // Channel messages: the message with its place in the log, its sender as the actor.
        let messages = (byName["ChannelMessage.created"] ?? []).sorted {
            (object($0, "message")["position"] as? Int ?? 0) < (object($1, "message")["position"] as? Int ?? 0)
        }
        #expect(messages.count == 2)
        let expected: [(Int, String, String)] = [(1, "alice", "hello hooks"), (2, "bob", "from bob")]
        for (post, (position, sender, text)) in zip(messages, expected) {
            let message = object(post, "message")
            #expect((message["channel"] as? [String: Any])?["id"] as? String == channelID)
            #expect(message["position"] as? Int == position)
            #expect((message["sender"] as? [String: Any])?["user_id"] as? String == sender)
            #expect((message["parts"] as? [[String: Any]])?.first?["body"] as? String == text)
            #expect(actor(post) == sender)
        }
        #expect(
            object(messages.last, "message")["id"] as? String
                == "layer:///messages/\(bobs.uuid.uuidString.lowercased())")

        // The deletion carries the channel as it was (no member left), by the Server API.
        let deleted = byName["Channel.deleted"]?.first
        #expect(object(deleted, "channel")["name"] as? String == "hooked")
        #expect(object(deleted, "channel")["member_count"] as? Int == 0)
        #expect(deleted.map(actor) == "system:server-api")

        try await bob.close()
        await node.stop()
        await receiver.stop()
    }

    @Test func aDevicesChannelEventsReachAFailingTargetOnRetriesWithTheSameRequestID() async throws {
        let receiver = try await WebhookReceiver.start { index in index < 2 ? 500 : 200 }
        let node = try await WebhookTests.node("webhook-channels-retry", trusting: receiver)
        let api = CurlAPI(node.server)
        let webhook = try await WebhookEventNameTests.register(
            api, url: receiver.url("/retry"), key: "events", names: ["Channel.created", "Membership.created"])
        _ = try await WebhookTests.waitForStatus(api, webhook, "active")

        // A device creates a channel: Channel.created (one member, its creator) and its membership.
        let carol = try ClientHarness.device("carol", on: node)
        _ = try await ClientHarness.connectLive(carol, on: node)
        let channel = try await carol.createChannel(named: "retried")
        // Two failures (the first two POSTs, whichever events they carry), then one success each.
        let posts = try await receiver.waitForPosts(4, timeout: .seconds(60))
        #expect(posts.count == 4)
        let byName = Dictionary(grouping: posts) { $0.headers["layer-webhook-event-type"] ?? "" }
        #expect(Set(byName.keys) == ["Channel.created", "Membership.created"])
        #expect(byName.values.contains { $0.count >= 2 }, "an event was retried")
        for (name, tries) in byName {
            // Every try of one event: the same request id and the same body.
            #expect(Set(tries.map { $0.headers["layer-webhook-request-id"] ?? "" }).count == 1, "\(name)")
            #expect(Set(tries.map(\.body)).count == 1, "\(name)")
        }
        #expect(
            byName["Channel.created"]?.first?.headers["layer-webhook-request-id"]
                != byName["Membership.created"]?.first?.headers["layer-webhook-request-id"])
        let made = byName["Channel.created"]?.first?.json["channel"] as? [String: Any]
        #expect(made?["id"] as? String == "layer:///channels/\(channel.uuid.uuidString.lowercased())")
        #expect(made?["member_count"] as? Int == 1)
        #expect((byName["Channel.created"]?.first?.json["actor"] as? [String: Any])?["user_id"] as? String == "carol")
        let membership = byName["Membership.created"]?.first?.json["membership"] as? [String: Any]
        #expect((membership?["identity"] as? [String: Any])?["user_id"] as? String == "carol")
        try await carol.close()
        await node.stop()
        await receiver.stop()
    }
}
