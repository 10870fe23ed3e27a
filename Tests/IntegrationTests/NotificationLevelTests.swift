import Foundation
import LaminaMerge
import LaminaModel
import LaminaNode
import LaminaTransport
import LaminaWire
import NIOCore
import Testing

/// Notification levels and mentions (issue 38 item 4, SPEC §6.10) on a real node over TLS +
/// HTTP/2, with a push gateway test double: `none` stops a conversation's pushes and takes it
/// out of the badge, `mentions` lets only messages mentioning the user through, a level with an
/// end runs out at the push decision, and every device of the user learns the level (in its
/// feed, and in a new device's snapshot).
@Suite struct NotificationLevelTests {
    static let alice = UserID("alice")
    static let bob = UserID("bob")

    static func gatewayNode(_ name: String, fake: FakePushServer) async throws -> TestNode {
        try await TestNode.start(name) { c in
            c.push.gateway = PushSettings.Gateway(url: fake.url("/push"), authorization: "Bearer gw")
            c.push.caFile = fake.certificate
            c.push.initialBackoffMilliseconds = 50
        }
    }

    /// Bob's phone: registers a gateway token, then goes offline (its pushes queue from now on).
    static func offlinePhone(_ node: TestNode, sessionsLeft: Int) async throws {
        let phone = try await PushTests.registered(node, bob, device: UUID(), .gateway(token: "bob-phone"))
        await phone.close()
        try await PushTests.waitForSessions(node, sessionsLeft)
    }

    static func setLevel(
        _ client: SyncTestClient, _ level: NotificationLevel, of conversation: ConversationID, until: Timestamp? = nil
    ) async throws -> Ack {
        let id = UUID()
        return try await client.command(
            .setNotificationLevel(
                SetNotificationLevel(requestID: id, conversationID: conversation, level: level, until: until)), id: id)
    }

    static func learned(_ client: SyncTestClient, _ level: NotificationLevel, of conversation: ConversationID)
        async throws
    {
        _ = try await client.change { change in
            guard case .notificationLevelChanged(let c) = change.event else { return false }
            return c.conversationID == conversation && c.level == level
        }
    }

    @discardableResult
    static func send(
        _ alice: SyncTestClient, _ conversation: ConversationID, _ text: String, mentions: Set<UserID> = []
    ) async throws -> MessageID {
        let id = MessageID.random()
        try await alice.command(
            .sendMessage(
                SendMessage(
                    messageID: id, conversationID: conversation, parts: [try MessagePart(text: text)],
                    push: PushConfiguration(alert: text), mentions: mentions)),
            id: id.uuid)
        return id
    }

    /// Waits until the push queue is empty: every push queued was sent.
    static func waitForEmptyQueue(_ node: TestNode) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while try await node.server.store.read({ r in try r.pushQueueDepths() }).values.reduce(0, +) > 0 {
            guard ContinuousClock.now < deadline else { throw SyncTestTimeout(waitingFor: "an empty push queue") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    static func pushedMessage(_ request: FakePushServer.Received) -> String? {
        (request.json["notification"] as? [String: Any])?["message_id"] as? String
    }

    static func badge(_ request: FakePushServer.Received) -> Int? {
        (request.json["notification"] as? [String: Any])?["badge"] as? Int
    }

    static func url(_ id: MessageID) -> String { "layer:///messages/\(id.uuid.uuidString.lowercased())" }

    @Test func noneAndMentionsDecidePushesAndTheBadgeAndBothDevicesLearnTheLevels() async throws {
        let fake = try await FakePushServer.start(http1: true) { _, _ in HTTPResponse(status: 202) }
        let node = try await Self.gatewayNode("levels-push", fake: fake)
        try await Self.offlinePhone(node, sessionsLeft: 0)
        let laptop = try await node.session(Self.bob, device: UUID())
        let tablet = try await node.session(Self.bob, device: UUID())
        let alice = try await node.session(Self.alice, device: UUID())
        let muted = try await PushTests.conversation(alice, with: [Self.bob])
        let quiet = try await PushTests.conversation(alice, with: [Self.bob])
        let loud = try await PushTests.conversation(alice, with: [Self.bob])

        // The laptop sets the levels; the tablet (and the laptop itself) learn them from the feed.
        #expect(try await Self.setLevel(laptop, .none, of: muted).conversationID == muted)
        _ = try await Self.setLevel(laptop, .mentions, of: quiet)
        try await Self.learned(tablet, .none, of: muted)
        try await Self.learned(tablet, .mentions, of: quiet)
        try await Self.learned(laptop, .mentions, of: quiet)

        let inMuted = try await Self.send(alice, muted, "muted, even with @bob", mentions: [Self.bob])
        try await Self.send(alice, quiet, "no mention")
        let mention = try await Self.send(
            alice, quiet, "@bob, and someone who is not here", mentions: [Self.bob, UserID("mallory")])
        let plain = try await Self.send(alice, loud, "loud")

        // The message reaches bob's devices with its mentions, those of non-participants dropped.
        #expect(try await tablet.message(mention).mentions == [Self.bob])
        #expect(try await tablet.message(inMuted).mentions == [Self.bob])

        let posts = try await fake.waitForRequests(2)
        try await Self.waitForEmptyQueue(node)
        #expect(fake.requests.count == 2, "only the mention in `quiet` and the message in `loud` are pushed")
        #expect(Set(posts.compactMap(Self.pushedMessage)) == [Self.url(mention), Self.url(plain)])
        // Counted after all four were stored: quiet's 2 and loud's 1 unread; muted's 1 is left out.
        let last = try #require(posts.first { Self.pushedMessage($0) == Self.url(plain) })
        #expect(Self.badge(last) == 3)

        // Back to `all`: muted's messages push and count again.
        _ = try await Self.setLevel(tablet, .all, of: muted)
        try await Self.learned(laptop, .all, of: muted)
        let again = try await Self.send(alice, muted, "heard again")
        let third = try await fake.waitForRequests(3)[2]
        #expect(Self.pushedMessage(third) == Self.url(again))
        #expect(Self.badge(third) == 5)

        for client in [laptop, tablet, alice] { await client.close() }
        await node.stop()
        await fake.stop()
    }

    @Test func aLevelWithAnEndRunsOutAtThePushDecision() async throws {
        let fake = try await FakePushServer.start(http1: true) { _, _ in HTTPResponse(status: 202) }
        let node = try await Self.gatewayNode("levels-until", fake: fake)
        try await Self.offlinePhone(node, sessionsLeft: 0)
        let laptop = try await node.session(Self.bob, device: UUID())
        let alice = try await node.session(Self.alice, device: UUID())
        let conversation = try await PushTests.conversation(alice, with: [Self.bob])

        let until = Timestamp(millisecondsSince1970: Timestamp.now().millisecondsSince1970 + 3_000)
        _ = try await Self.setLevel(laptop, .none, of: conversation, until: until)
        let during = try await Self.send(alice, conversation, "during")
        _ = try await laptop.message(during)
        try await Self.waitForEmptyQueue(node)
        #expect(fake.requests.isEmpty)
        // The level ends by the clock alone: no write comes.
        while Timestamp.now() <= until { try await Task.sleep(for: .milliseconds(20)) }
        let after = try await Self.send(alice, conversation, "after")
        let post = try await fake.waitForRequests(1)[0]
        #expect(Self.pushedMessage(post) == Self.url(after))
        #expect(Self.badge(post) == 2, "the conversation counts again, with both unread messages")

        await laptop.close()
        await alice.close()
        await node.stop()
        await fake.stop()
    }

    @Test func aNewDevicesSnapshotHoldsTheLevelsAndAnOldSessionNeverSeesThem() async throws {
        let node = try await TestNode.start("levels-snapshot")
        let laptop = try await node.session(Self.bob, device: UUID())
        let alice = try await node.session(Self.alice, device: UUID())
        let conversation = try await PushTests.conversation(alice, with: [Self.bob])
        let until = Timestamp(millisecondsSince1970: 4_102_444_800_000)
        _ = try await Self.setLevel(laptop, .mentions, of: conversation, until: until)
        let mention = try await Self.send(alice, conversation, "@bob", mentions: [Self.bob])

        let fresh = try await node.session(Self.bob, device: UUID(), features: FeatureSet.all.union(.snapshots))
        let snapshotted = try await fresh.change { change in
            guard case .notificationLevelChanged(let c) = change.event else { return false }
            return c.conversationID == conversation
        }
        #expect(snapshotted.seq == 0)
        #expect(
            snapshotted.event
                == .notificationLevelChanged(
                    NotificationLevelChanged(conversationID: conversation, level: .mentions, until: until)))

        // A session without bits 17 and 18 gets the message without its mentions, and no level.
        let old = try await node.session(
            Self.bob, device: UUID(), features: FeatureSet.all.subtracting([.mentions, .notificationLevels]))
        #expect(try await old.message(mention).mentions.isEmpty)
        let marker = try await Self.send(alice, conversation, "after the level")
        _ = try await old.message(marker)
        #expect(!old.seenChanges.contains { $0.kind == 22 })
        let refused = UUID()
        await #expect(throws: CommandFailed.self) {
            try await old.command(
                .setNotificationLevel(
                    SetNotificationLevel(requestID: refused, conversationID: conversation, level: .none)),
                id: refused)
        }

        // Not a participant: refused, nothing set.
        let carol = try await node.session(UserID("carol"), device: UUID())
        let stranger = UUID()
        do {
            try await carol.command(
                .setNotificationLevel(
                    SetNotificationLevel(requestID: stranger, conversationID: conversation, level: .none)),
                id: stranger)
            Issue.record("a user who is not a participant set a level")
        } catch let failed as CommandFailed {
            #expect(failed.error.code == .notAParticipant)
        }
        for client in [laptop, alice, fresh, old, carol] { await client.close() }
        await node.stop()
    }
    @Test func theServerAPIAndTheClientAPISetAndGetALevelOverHTTP() async throws {
        let node = try await TestNode.start("levels-http")
        let laptop = try await node.session(Self.bob, device: UUID())
        let alice = try await node.session(Self.alice, device: UUID())
        let conversation = try await PushTests.conversation(alice, with: [Self.bob])
        let uuid = conversation.uuid.uuidString.lowercased()
        let api = CurlAPI(node.server, http: .http2)
        let path = "/users/bob/conversations/\(uuid)/notification_level"

        let unset = try await api.request("GET", path)
        #expect(unset.status == 200, "\(unset.body)")
        #expect(unset.object["level"] as? String == "all" && unset.object["until"] is NSNull)
        // The Server API sets it on bob's behalf: his device learns it from the feed.
        let set = try await api.request("PUT", path, json: #"{"level":"none","until":"2100-01-01T00:00:00.000Z"}"#)
        #expect(set.status == 200, "\(set.body)")
        #expect(set.object["level"] as? String == "none" && set.object["effective_level"] as? String == "none")
        #expect(set.object["until"] as? String == "2100-01-01T00:00:00.000Z")
        #expect(set.object["conversation_id"] as? String == "layer:///conversations/\(uuid)")
        try await Self.learned(laptop, .none, of: conversation)
        // Bad input: an error with a code and a reason, nothing changed.
        let bad = try await api.request("PUT", path, json: #"{"level":"loud"}"#)
        #expect(bad.status == 422 || bad.status == 400, "\(bad.body)")
        #expect(try await api.request("PUT", path, json: #"{"level":"all","until":"yesterday"}"#).status != 200)
        #expect(try await api.request("GET", "/users/carol/conversations/\(uuid)/notification_level").status == 403)
        let unknown = UUID().uuidString.lowercased()
        #expect(try await api.request("GET", "/users/bob/conversations/\(unknown)/notification_level").status == 404)

        // The Client API: the session user's own level, over HTTP/1.1.
        let client = try await ClientAPICurl.session("bob", on: node, http: .http1)
        let mine = try await client.request("GET", "/conversations/\(uuid)/notification_level")
        #expect(mine.status == 200 && mine.object["level"] as? String == "none", "\(mine.body)")
        let mentions = try await client.request(
            "PUT", "/conversations/\(uuid)/notification_level", json: #"{"level":"mentions"}"#)
        #expect(mentions.status == 200 && mentions.object["until"] is NSNull, "\(mentions.body)")
        try await Self.learned(laptop, .mentions, of: conversation)
        let fromServer = try await api.request("GET", path)
        #expect(fromServer.object["level"] as? String == "mentions")
        let carol = try await ClientAPICurl.session("carol", on: node, http: .http2)
        #expect(
            try await carol.request("PUT", "/conversations/\(uuid)/notification_level", json: #"{"level":"none"}"#)
                .status
                == 403)
        await laptop.close()
        await alice.close()
        await node.stop()
    }
    @Test func mentionsGoInThroughBothAPIsAndComeBackInTheirRepresentations() async throws {
        let node = try await TestNode.start("mentions-http")
        let laptop = try await node.session(Self.bob, device: UUID())
        let alice = try await node.session(Self.alice, device: UUID())
        let conversation = try await PushTests.conversation(alice, with: [Self.bob])
        let uuid = conversation.uuid.uuidString.lowercased()
        let api = CurlAPI(node.server, http: .http2)
        let sent = try await api.request(
            "POST", "/conversations/\(uuid)/messages",
            json:
                #"{"sender_id":"layer:///identities/alice","parts":[{"mime_type":"text/plain","body":"@bob"}],"mentions":["bob","layer:///identities/mallory"]}"#
        )
        #expect(sent.status == 201, "\(sent.body)")
        #expect(sent.object["mentions"] as? [String] == ["bob"], "mallory is no participant: dropped")
        let id = try #require(
            (sent.object["id"] as? String)?.split(separator: "/").last.flatMap { UUID(uuidString: String($0)) })
        #expect(try await laptop.message(MessageID(uuid: id)).mentions == [Self.bob])
        let tooMany = (0..<251).map { "\"u\($0)\"" }.joined(separator: ",")
        let refused = try await api.request(
            "POST", "/conversations/\(uuid)/messages",
            json:
                #"{"sender_id":"layer:///identities/alice","parts":[{"mime_type":"text/plain","body":"x"}],"mentions":[\#(tooMany)]}"#
        )
        #expect(refused.status == 422 || refused.status == 400, "\(refused.body)")

        let client = try await ClientAPICurl.session("bob", on: node, http: .http1)
        let read = try await client.request("GET", "/messages/\(id.uuidString.lowercased())")
        #expect(
            read.status == 200 && read.object["mentions"] as? [String] == ["layer:///identities/bob"], "\(read.body)")
        let reply = try await client.request(
            "POST", "/conversations/\(uuid)/messages",
            json: #"{"parts":[{"mime_type":"text/plain","body":"@alice"}],"mentions":["layer:///identities/alice"]}"#)
        #expect(reply.status == 201 && reply.object["mentions"] as? [String] == ["layer:///identities/alice"])
        let plain = try await client.request(
            "POST", "/conversations/\(uuid)/messages", json: #"{"parts":[{"mime_type":"text/plain","body":"hi"}]}"#)
        #expect(plain.status == 201 && plain.object["mentions"] == nil, "no mentions: the property is left out")
        await laptop.close()
        await alice.close()
        await node.stop()
    }
}
