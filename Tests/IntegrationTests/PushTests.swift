import Foundation
import LaminaModel
import LaminaNode
import LaminaTransport
import LaminaWire
import NIOCore
import Testing

/// Push notifications (#13) on a real node: devices register tokens over the sync protocol;
/// a message to a device without a live session is pushed through a fake provider started in
/// the test (APNs over HTTP/2, FCM's token and send endpoints, a gateway) on the project's
/// transport; the provider's "this token is gone" removes the token.
@Suite struct PushTests {
    static let team = "TEAM123456"
    static let keyID = "KEY1234567"
    static let topic = "com.example.chat"
    static let apnsToken: [UInt8] = (0..<32).map { UInt8(($0 * 11 + 3) & 0xFF) }

    // MARK: Helpers

    /// A P-256 key as an APNs `.p8` file; the public key's PEM.
    static func apnsKey() throws -> (file: String, publicKeyPEM: String) {
        let keys = try ECKeyPair.generateP256()
        let file = Fixtures.temporaryDirectory("apns-key").appendingPathComponent("AuthKey.p8").path
        try keys.privateKeyPEM.write(toFile: file, atomically: true, encoding: .utf8)
        return (file, keys.publicKeyPEM)
    }

    static func apnsNode(_ name: String, fake: FakePushServer, keyFile: String, admin: Bool = false) async throws
        -> TestNode
    {
        try await TestNode.start(name) { c in
            var apns = PushSettings.APNs(teamID: team, keyID: keyID, keyFile: keyFile)
            apns.productionURL = fake.url()
            apns.sandboxURL = fake.url()
            c.push.apns = apns
            c.push.caFile = fake.certificate
            c.push.initialBackoffMilliseconds = 50
            if admin { c.adminPort = 0 }
        }
    }

    /// A session of `user` on `device` that registered `token` (still open).
    static func registered(_ node: TestNode, _ user: UserID, device: UUID, _ token: PushToken?) async throws
        -> SyncTestClient
    {
        let client = try await node.session(user, device: device)
        let id = UUID()
        try await client.command(.registerPushToken(RegisterPushToken(requestID: id, token: token)), id: id)
        return client
    }

    /// Waits until the node counts `count` open sessions (a closed client's session is gone).
    static func waitForSessions(_ node: TestNode, _ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while node.server.sessionCount != count {
            guard ContinuousClock.now < deadline else {
                throw SyncTestTimeout(waitingFor: "\(count) sessions (\(node.server.sessionCount) open)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Waits until `user` has `count` push tokens stored.
    static func waitForTokens(_ node: TestNode, _ user: UserID, _ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while try await node.server.store.read({ r in try r.pushTokens(of: user) }).count != count {
            guard ContinuousClock.now < deadline else {
                throw SyncTestTimeout(waitingFor: "\(count) push tokens of \(user)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    static func conversation(_ alice: SyncTestClient, with others: Set<UserID>) async throws -> ConversationID {
        let id = ConversationID.random()
        try await alice.command(
            .createConversation(
                CreateConversation(
                    conversationID: id, participants: others.union([UserID("alice")]),
                    options: ConversationOptions(isDistinct: false))),
            id: id.uuid)
        return id
    }

    @discardableResult
    static func send(_ alice: SyncTestClient, _ conversation: ConversationID, _ text: String, push: PushConfiguration?)
        async throws -> MessageID
    {
        let id = MessageID.random()
        let part = MessagePart(id: UUID(), mimeType: .textPlain, content: .inline(Array(text.utf8)))
        try await alice.command(
            .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: [part], push: push)),
            id: id.uuid)
        return id
    }

    /// The JWT's header and claims, and whether its signature verifies with `publicKeyPEM`.
    static func jwt(_ token: String, publicKeyPEM: String, _ algorithm: JWSAlgorithm) throws -> (
        header: [String: Any], claims: [String: Any], verifies: Bool
    ) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        func object(_ s: Substring) throws -> [String: Any] {
            let bytes = try #require(Base64URL.decode(s))
            let parsed = try JSONSerialization.jsonObject(with: Data(bytes))
            return try #require(parsed as? [String: Any])
        }
        let key = try JWSPublicKey(pem: publicKeyPEM)
        let verifies = key.verify(
            signature: try #require(Base64URL.decode(parts[2])), signingInput: Array("\(parts[0]).\(parts[1])".utf8),
            algorithm: algorithm)
        return (try object(parts[0]), try object(parts[1]), verifies)
    }

    static let alice = UserID("alice")
    static let bob = UserID("bob")

    // MARK: APNs

    @Test func anOfflineAPNsDeviceGetsThePushWithTheExactHeadersAndAVerifiedJWTAndALiveOneGetsNone() async throws {
        let fake = try await FakePushServer.start(http1: false) { _, _ in FakePushServer.json(200, [:]) }
        let key = try Self.apnsKey()
        let node = try await Self.apnsNode("push-apns", fake: fake, keyFile: key.file, admin: true)
        let bob = try await Self.registered(
            node, Self.bob, device: UUID(), .apns(token: Self.apnsToken, topic: Self.topic, environment: .sandbox))
        let alice = try await node.session(Self.alice, device: UUID())
        let conversation = try await Self.conversation(alice, with: [Self.bob])

        // Bob's device is live: it gets the message over sync, and no push.
        let live = try await Self.send(
            alice, conversation, "while you are here", push: PushConfiguration(alert: "alice: while you are here"))
        _ = try await bob.message(live)
        await bob.close()
        try await Self.waitForSessions(node, 1)

        let push = PushConfiguration(
            alert: "alice: second", sound: "default", title: "Alice", category: "MESSAGE", data: ["thread": "t1"])
        let second = try await Self.send(alice, conversation, "second", push: push)
        let first = try await fake.waitForRequests(1)[0]
        let now = Int(Date().timeIntervalSince1970)
        #expect(first.httpVersion == "2")
        #expect(first.method == "POST")
        #expect(first.path == "/3/device/" + Self.apnsToken.map { String(format: "%02x", $0) }.joined())
        #expect(first.headers["apns-topic"] == Self.topic)
        #expect(first.headers["apns-push-type"] == "alert")
        #expect(first.headers["apns-priority"] == "10")
        #expect(first.headers["apns-collapse-id"] == second.uuid.uuidString.lowercased())
        let expiration = try #require(first.headers["apns-expiration"].flatMap { Int($0) })
        #expect(expiration > now && expiration <= now + 86_400 + 60)
        let authorization = try #require(first.headers["authorization"])
        #expect(authorization.hasPrefix("bearer "))
        let token = try Self.jwt(
            String(authorization.dropFirst("bearer ".count)), publicKeyPEM: key.publicKeyPEM, .es256)
        #expect(token.verifies)
        #expect(token.header["alg"] as? String == "ES256")
        #expect(token.header["kid"] as? String == Self.keyID)
        #expect(token.claims["iss"] as? String == Self.team)
        let iat = try #require(token.claims["iat"] as? Int)
        #expect(abs(iat - now) < 300)
        let aps = try #require(first.json["aps"] as? [String: Any])
        #expect((aps["alert"] as? [String: String]) == ["title": "Alice", "body": "alice: second"])
        #expect(aps["sound"] as? String == "default")
        #expect(aps["category"] as? String == "MESSAGE")
        #expect(aps["badge"] as? Int == 2)  // both messages are unread by bob
        #expect(first.json["thread"] as? String == "t1")
        #expect(
            (first.json["layer"] as? [String: Any])?["message_identifier"] as? String
                == "layer:///messages/\(second.uuid.uuidString.lowercased())")

        // A message without push configuration is pushed silently. Had the live message been
        // queued, its push (queued before these) would have come by now.
        let third = try await Self.send(alice, conversation, "quiet", push: nil)
        let requests = try await fake.waitForRequests(2)
        #expect(
            requests.map { $0.headers["apns-collapse-id"] } == [second, third].map { $0.uuid.uuidString.lowercased() })
        #expect(requests[1].headers["apns-push-type"] == "background")
        #expect(requests[1].headers["apns-priority"] == "5")
        let silent = try #require(requests[1].json["aps"] as? [String: Any])
        #expect(silent["content-available"] as? Int == 1)
        #expect(silent["alert"] == nil)
        #expect(silent["badge"] as? Int == 3)

        // Metrics per provider on /metrics.
        // (The node records a delivery just after the provider's answer: scraped until it has.)
        let port = try #require(node.server.admin?.port)
        let delivered = #"lamina_push_deliveries_total{provider="apns"} 2"#
        let empty = #"lamina_push_queue_depth_pushes{provider="apns"} 0"#
        var metrics = ""
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline, !(metrics.contains(delivered) && metrics.contains(empty)) {
            metrics = try await ExternalCommand.run("/usr/bin/curl", ["-sS", "http://127.0.0.1:\(port)/metrics"]).stdout
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(metrics.contains(delivered), "\(metrics.split(separator: "\n").filter { $0.contains("push") })")
        #expect(metrics.contains(empty), "\(metrics.split(separator: "\n").filter { $0.contains("push") })")
        await alice.close()
        await node.stop()
        await fake.stop()
    }

    @Test func apns410RemovesTheTokenAnd429IsRetried() async throws {
        let fake = try await FakePushServer.start(http1: false) { _, index in
            index == 0
                ? FakePushServer.json(429, ["reason": "TooManyRequests"])
                : FakePushServer.json(410, ["reason": "Unregistered"])
        }
        let key = try Self.apnsKey()
        let node = try await Self.apnsNode("push-apns-410", fake: fake, keyFile: key.file)
        let bob = try await Self.registered(
            node, Self.bob, device: UUID(), .apns(token: Self.apnsToken, topic: Self.topic, environment: .production))
        await bob.close()
        let alice = try await node.session(Self.alice, device: UUID())
        try await Self.waitForSessions(node, 1)
        let conversation = try await Self.conversation(alice, with: [Self.bob])
        let message = try await Self.send(alice, conversation, "hello", push: PushConfiguration(alert: "hello"))
        let requests = try await fake.waitForRequests(2)
        // The retry is the same push (one per message per device), on the same token.
        #expect(
            requests.map { $0.headers["apns-collapse-id"] }
                == Array(repeating: message.uuid.uuidString.lowercased(), count: 2))
        try await Self.waitForTokens(node, Self.bob, 0)
        // No token, nothing queued for the next message.
        let next = try await Self.send(alice, conversation, "again", push: PushConfiguration(alert: "again"))
        #expect(try await node.server.store.read { r in try r.queuedPushes(of: next) }.isEmpty)
        await alice.close()
        await node.stop()
        await fake.stop()
    }

    @Test func tokensOfTheWrongSizeOrKindAreRefusedAndSigningOutRemovesTheToken() async throws {
        let fake = try await FakePushServer.start(http1: false)
        let key = try Self.apnsKey()
        let node = try await Self.apnsNode("push-register", fake: fake, keyFile: key.file)
        let device = UUID()
        let bob = try await node.session(Self.bob, device: device)
        for (token, what) in [
            (
                PushToken.apns(token: Array(repeating: 1, count: 10), topic: Self.topic, environment: .sandbox),
                "a 10-byte APNs token"
            ),
            (PushToken.apns(token: Self.apnsToken, topic: "has space", environment: .sandbox), "a topic with a space"),
            (PushToken.fcm(token: "fcm-token"), "FCM on a node without FCM"),
        ] {
            let id = UUID()
            await #expect(throws: CommandFailed.self, "\(what)") {
                try await bob.command(.registerPushToken(RegisterPushToken(requestID: id, token: token)), id: id)
            }
        }
        let id = UUID()
        bob.send(.registerPushToken(RegisterPushToken(requestID: id, token: .gateway(token: "x"))))
        guard case .error(let refused) = try await bob.answer(to: id) else {
            Issue.record("no ERROR")
            return
        }
        #expect(refused.code == .invalidPushToken && !refused.isFatal)
        // The session goes on: a valid token is taken.
        let ok = UUID()
        try await bob.command(
            .registerPushToken(
                RegisterPushToken(
                    requestID: ok, token: .apns(token: Self.apnsToken, topic: Self.topic, environment: .sandbox))),
            id: ok)
        try await Self.waitForTokens(node, Self.bob, 1)
        // The same token registered by another device moves there.
        let other = try await Self.registered(
            node, Self.bob, device: UUID(), .apns(token: Self.apnsToken, topic: Self.topic, environment: .sandbox))
        let tokens = try await node.server.store.read { r in try r.pushTokens(of: Self.bob) }
        #expect(tokens.map(\.device) != [device.uuidString.lowercased()] && tokens.count == 1)
        // END_SESSION removes the signing-out device's token.
        let end = UUID()
        try await other.command(.endSession(EndSession(requestID: end)), id: end)
        try await Self.waitForTokens(node, Self.bob, 0)
        await bob.close()
        await node.stop()
        await fake.stop()
    }

    @Test func credentialsThatDoNotParseStopTheStartWithTheReason() async throws {
        let garbage = Fixtures.temporaryDirectory("push-bad-credentials").appendingPathComponent("bad.p8").path
        try "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n".write(
            toFile: garbage, atomically: true, encoding: .utf8)
        do {
            _ = try await TestNode.start("push-bad-apns") { c in
                c.push.apns = PushSettings.APNs(teamID: Self.team, keyID: Self.keyID, keyFile: garbage)
            }
            Issue.record("the node started with an APNs key that does not parse")
        } catch {
            #expect("\(error)".contains("apns keyFile"), "\(error)")
        }
        let account = Fixtures.temporaryDirectory("push-bad-fcm").appendingPathComponent("account.json").path
        try #"{"client_email": "x@y", "token_uri": "https://127.0.0.1/token", "project_id": "p"}"#.write(
            toFile: account, atomically: true, encoding: .utf8)
        do {
            _ = try await TestNode.start("push-bad-fcm") { c in
                c.push.fcm = PushSettings.FCM(serviceAccountFile: account)
            }
            Issue.record("the node started with a service account without a private key")
        } catch {
            #expect("\(error)".contains("fcm serviceAccountFile"), "\(error)")
        }
    }

    // MARK: FCM

    @Test func fcmExchangesAVerifiedAssertionOnceAndPushesAndUnregisteredRemovesTheToken() async throws {
        let fake = try await FakePushServer.start(http1: true) { request, _ in
            if request.path == "/token" {
                return FakePushServer.json(
                    200, ["access_token": "ya29.fake", "expires_in": 3_600, "token_type": "Bearer"])
            }
            if (request.json["message"] as? [String: Any])?["token"] as? String == "gone-token" {
                return FakePushServer.json(
                    404, ["error": ["code": 404, "status": "NOT_FOUND", "details": [["errorCode": "UNREGISTERED"]]]])
            }
            return FakePushServer.json(200, ["name": "projects/lamina-test/messages/1"])
        }
        let directory = Fixtures.temporaryDirectory("fcm-account")
        let keyFile = directory.appendingPathComponent("key.pem").path
        let made = try await ExternalCommand.run(
            "/usr/bin/openssl", ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", keyFile])
        try #require(made.status == 0, "\(made.stderr)")
        let publicKey = try await ExternalCommand.run("/usr/bin/openssl", ["pkey", "-in", keyFile, "-pubout"]).stdout
        let email = "push@lamina-test.iam.gserviceaccount.com"
        let account: [String: Any] = [
            "type": "service_account", "project_id": "lamina-test", "client_email": email,
            "private_key": try String(contentsOfFile: keyFile, encoding: .utf8), "token_uri": fake.url("/token"),
        ]
        let accountFile = directory.appendingPathComponent("account.json").path
        try JSONSerialization.data(withJSONObject: account).write(to: URL(fileURLWithPath: accountFile))
        let node = try await TestNode.start("push-fcm") { c in
            c.push.fcm = PushSettings.FCM(
                serviceAccountFile: accountFile, sendURL: fake.url("/v1/projects/lamina-test/messages:send"))
            c.push.caFile = fake.certificate
            c.push.initialBackoffMilliseconds = 50
        }
        let bob = try await Self.registered(node, Self.bob, device: UUID(), .fcm(token: "fcm-token-bob"))
        await bob.close()
        let alice = try await node.session(Self.alice, device: UUID())
        try await Self.waitForSessions(node, 1)
        let conversation = try await Self.conversation(alice, with: [Self.bob])
        let first = try await Self.send(
            alice, conversation, "hi", push: PushConfiguration(alert: "alice: hi", title: "Alice", data: ["k": "v"]))
        let exchange = try await fake.waitForRequests(2)
        let tokenRequest = exchange[0]
        let send = exchange[1]
        #expect(tokenRequest.path == "/token" && tokenRequest.method == "POST")
        #expect(tokenRequest.headers["content-type"] == "application/x-www-form-urlencoded")
        var form: [String: String] = [:]
        for pair in tokenRequest.text.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? String($0) }
            if kv.count == 2 { form[kv[0]] = kv[1] }
        }
        #expect(form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer")
        let assertion = try Self.jwt(try #require(form["assertion"]), publicKeyPEM: publicKey, .rs256)
        #expect(assertion.verifies)
        #expect(assertion.header["alg"] as? String == "RS256")
        #expect(assertion.claims["iss"] as? String == email)
        #expect(assertion.claims["scope"] as? String == "https://www.googleapis.com/auth/firebase.messaging")
        #expect(assertion.claims["aud"] as? String == fake.url("/token"))
        #expect((assertion.claims["exp"] as? Int).map { $0 - (assertion.claims["iat"] as? Int ?? 0) } == 3_600)

        #expect(send.path == "/v1/projects/lamina-test/messages:send")
        // Sends over HTTP/2; the token exchange as before over HTTP/1.1.
        #expect(send.httpVersion == "2" && tokenRequest.httpVersion == "1.1")
        #expect(send.headers["authorization"] == "Bearer ya29.fake")
        let message = try #require(send.json["message"] as? [String: Any])
        #expect(message["token"] as? String == "fcm-token-bob")
        #expect((message["notification"] as? [String: String]) == ["title": "Alice", "body": "alice: hi"])
        let data = try #require(message["data"] as? [String: String])
        #expect(
            data["k"] == "v" && data["layer_message_id"] == "layer:///messages/\(first.uuid.uuidString.lowercased())"
                && data["badge"] == "1")
        #expect(
            (message["android"] as? [String: Any])?["collapse_key"] as? String == first.uuid.uuidString.lowercased())

        // The access token is cached: the next push goes without a new exchange.
        _ = try await Self.send(alice, conversation, "again", push: PushConfiguration(alert: "again"))
        let three = try await fake.waitForRequests(3)
        #expect(three[2].path == "/v1/projects/lamina-test/messages:send")

        // UNREGISTERED removes the token.
        let dave = try await Self.registered(node, UserID("dave"), device: UUID(), .fcm(token: "gone-token"))
        await dave.close()
        try await Self.waitForSessions(node, 1)
        let withDave = try await Self.conversation(alice, with: [UserID("dave")])
        _ = try await Self.send(alice, withDave, "are you there", push: PushConfiguration(alert: "are you there"))
        _ = try await fake.waitForRequests(4)
        try await Self.waitForTokens(node, UserID("dave"), 0)
        #expect(fake.requests.filter { $0.path == "/token" }.count == 1)
        await alice.close()
        await node.stop()
        await fake.stop()
    }

    // MARK: Gateway

    @Test func theGatewayGetsAJSONPostPerNotificationAnd410RemovesTheToken() async throws {
        let fake = try await FakePushServer.start(http1: true) { request, _ in
            HTTPResponse(status: request.json["token"] as? String == "gone" ? 410 : 202)
        }
        let node = try await TestNode.start("push-gateway") { c in
            c.push.gateway = PushSettings.Gateway(url: fake.url("/push?app=1"), authorization: "Bearer gw-secret")
            c.push.caFile = fake.certificate
            c.push.initialBackoffMilliseconds = 50
        }
        let device = UUID()
        let bob = try await Self.registered(node, Self.bob, device: device, .gateway(token: "bob-gw"))
        await bob.close()
        let alice = try await node.session(Self.alice, device: UUID())
        try await Self.waitForSessions(node, 1)
        let conversation = try await Self.conversation(alice, with: [Self.bob])
        let message = try await Self.send(
            alice, conversation, "hi", push: PushConfiguration(alert: "alice: hi", sound: "ping"))
        let post = try await fake.waitForRequests(1)[0]
        #expect(post.method == "POST" && post.path == "/push?app=1")
        #expect(post.headers["authorization"] == "Bearer gw-secret")
        #expect(post.headers["content-type"] == "application/json")
        #expect(post.json["token"] as? String == "bob-gw")
        #expect(post.json["provider"] as? String == "gateway")
        #expect(post.json["user_id"] as? String == "bob")
        #expect(post.json["device_id"] as? String == device.uuidString.lowercased())
        let notification = try #require(post.json["notification"] as? [String: Any])
        #expect(notification["alert"] as? String == "alice: hi")
        #expect(notification["sound"] as? String == "ping")
        #expect(notification["badge"] as? Int == 1)
        #expect(notification["silent"] as? Bool == false)
        #expect(notification["message_id"] as? String == "layer:///messages/\(message.uuid.uuidString.lowercased())")
        #expect(notification["sender_id"] as? String == "alice")

        let carol = UserID("carol")
        let gone = try await Self.registered(node, carol, device: UUID(), .gateway(token: "gone"))
        await gone.close()
        try await Self.waitForSessions(node, 1)
        let withCarol = try await Self.conversation(alice, with: [carol])
        _ = try await Self.send(alice, withCarol, "hello carol", push: PushConfiguration(alert: "hello carol"))
        _ = try await fake.waitForRequests(2)
        try await Self.waitForTokens(node, carol, 0)
        #expect(try await node.server.store.read { r in try r.pushTokens(of: Self.bob) }.count == 1)
        await alice.close()
        await node.stop()
        await fake.stop()
    }
}
