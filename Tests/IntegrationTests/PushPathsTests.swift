import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import LaminaTransport
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Push notifications (#13) from every way a message reaches a node (the Server API, its
/// announcements), durable across a restart, and registered through the SDK.
@Suite struct PushPathsTests {
    static let bob = UserID("bob")

    static func gatewayNode(_ name: String, fake: FakePushServer) async throws -> TestNode {
        try await TestNode.start(name) { c in
            c.push.gateway = PushSettings.Gateway(url: fake.url("/push"))
            c.push.caFile = fake.certificate
            c.push.initialBackoffMilliseconds = 50
            c.push.maxBackoffSeconds = 1
        }
    }

    static func notification(_ post: FakePushServer.Received) -> [String: Any] {
        post.json["notification"] as? [String: Any] ?? [:]
    }

    @Test func serverAPIMessagesAndAnnouncementsArePushed() async throws {
        let fake = try await FakePushServer.start(http1: true)
        let node = try await Self.gatewayNode("push-server-api", fake: fake)
        let bob = try await PushTests.registered(node, Self.bob, device: UUID(), .gateway(token: "bob-gw"))
        await bob.close()
        try await PushTests.waitForSessions(node, 0)
        let api = CurlAPI(node.server)
        let created = try await api.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        #expect(created.status == 201 || created.status == 200)
        let conversation = ServerAPITests.conversationUUID(created.object)
        let sent = try await api.request(
            "POST", "/conversations/\(conversation)/messages",
            json:
                #"{"sender_id":"layer:///identities/alice","parts":[{"body":"hi","mime_type":"text/plain"}],"notification":{"text":"from the backend","sound":"chime","recipients":{"layer:///identities/bob":{"text":"just for bob","data":{"k":"v"}}}}}"#
        )
        #expect(sent.status == 201, "\(sent.body)")
        let first = try await fake.waitForRequests(1)[0]
        // Bob's override replaces the text and adds data; the sound stays the message's.
        #expect(Self.notification(first)["alert"] as? String == "just for bob")
        #expect(Self.notification(first)["sound"] as? String == "chime")
        #expect((Self.notification(first)["data"] as? [String: String]) == ["k": "v"])
        let refused = try await api.request(
            "POST", "/conversations/\(conversation)/messages",
            json:
                #"{"sender_id":"layer:///identities/alice","parts":[{"body":"x","mime_type":"text/plain"}],"notification":{"text":"x","recipients":{"bob":"not an object"}}}"#
        )
        #expect(refused.status == 422, "\(refused.body)")
        #expect(Self.notification(first)["sender_id"] as? String == "alice")

        let v1 = CurlAPI(node.server, version: "1.0")
        let announced = try await v1.request(
            "POST", "/announcements",
            json:
                #"{"recipients":["bob"],"sender":{"name":"The System"},"parts":[{"body":"welcome","mime_type":"text/plain"}],"notification":{"text":"welcome"}}"#,
            headers: ["Authorization": "Bearer \(v1.token)", "Accept": "application/vnd.layer+json; version=1.0"])
        #expect(announced.status == 202, "\(announced.body)")
        let second = try await fake.waitForRequests(2)[1]
        #expect(Self.notification(second)["alert"] as? String == "welcome")
        #expect(Self.notification(second)["badge"] as? Int == 2)
        await node.stop()
        await fake.stop()
    }

    @Test func queuedPushesSurviveARestartAndGoOnceTheProviderIsBack() async throws {
        let healthy = NIOLockedValueBox(false)
        let fake = try await FakePushServer.start(http1: true) { _, _ in
            HTTPResponse(status: healthy.withLockedValue { $0 } ? 200 : 503)
        }
        let node = try await Self.gatewayNode("push-restart", fake: fake)
        let bob = try await PushTests.registered(node, Self.bob, device: UUID(), .gateway(token: "bob-gw"))
        await bob.close()
        let alice = try await node.session(UserID("alice"), device: UUID())
        try await PushTests.waitForSessions(node, 1)
        let conversation = try await PushTests.conversation(alice, with: [Self.bob])
        let message = try await PushTests.send(
            alice, conversation, "hold on", push: PushConfiguration(alert: "hold on"))
        _ = try await fake.waitForRequests(1)  // answered 503: retried later
        await alice.close()
        try await node.restart()
        #expect(try await node.server.store.read { r in try r.queuedPushes(of: message) }.count == 1)
        let before = fake.requests.count
        healthy.withLockedValue { $0 = true }
        let deadline = ContinuousClock.now + .seconds(30)
        while try await !node.server.store.read({ r in try r.queuedPushes(of: message) }).isEmpty {
            guard ContinuousClock.now < deadline else {
                throw SyncTestTimeout(waitingFor: "the queued push to be delivered after the restart")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let after = fake.requests.dropFirst(before)
        #expect(
            after.contains {
                Self.notification($0)["message_id"] as? String
                    == "layer:///messages/\(message.uuid.uuidString.lowercased())"
            })
        // Every attempt was the same push (one per message per device).
        #expect(Set(fake.requests.map { Self.notification($0)["message_id"] as? String }).count == 1)
        await node.stop()
        await fake.stop()
    }

    @Test func theSDKSetsAndRemovesTheDevicesTokenAndSigningOutRemovesIt() async throws {
        let fake = try await FakePushServer.start(http1: true)
        let node = try await Self.gatewayNode("push-sdk", fake: fake)
        let bob = try ClientHarness.device("bob", on: node)
        _ = try await ClientHarness.connectLive(bob, on: node)
        let device = try bob.store.deviceID().uuidString.lowercased()
        try await bob.setPushToken(.gateway(token: "sdk-token"))
        var tokens = try await node.server.store.read { r in try r.pushTokens(of: Self.bob) }
        #expect(tokens.map(\.device) == [device] && tokens.map(\.token) == [.gateway(token: "sdk-token")])
        // Refused: the wrong size (before sending), a provider the node does not deliver to.
        await #expect(throws: ClientError.self) {
            try await bob.setPushToken(.apns(token: [1, 2, 3], topic: "com.example", environment: .sandbox))
        }
        do {
            try await bob.setPushToken(.fcm(token: "fcm-token"))
            Issue.record("an FCM token was accepted by a node without FCM")
        } catch {
            #expect(error.code == .invalidPushToken, "\(error)")
        }
        try await bob.setPushToken(nil)
        tokens = try await node.server.store.read { r in try r.pushTokens(of: Self.bob) }
        #expect(tokens.isEmpty)
        try await bob.setPushToken(.gateway(token: "sdk-token-2"))
        try await PushTests.waitForTokens(node, Self.bob, 1)
        try await bob.deauthenticate()
        try await PushTests.waitForTokens(node, Self.bob, 0)
        await node.stop()
        await fake.stop()
    }
}

extension PushPathsTests {
    /// The node holds exactly `token` for bob's one device (waits up to 30 s).
    static func waitForToken(_ node: TestNode, _ token: PushToken, device: String) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while try await node.server.store.read({ r in try r.pushTokens(of: Self.bob) }).map({ [$0.device: $0.token] })
            != [[device: token]]
        {
            guard ContinuousClock.now < deadline else {
                throw SyncTestTimeout(waitingFor: "bob's token \(token) on the node")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The SDK keeps the device's token and registers it on every connect: one set while
    /// offline reaches the node when the device connects, one the node lost comes back at the
    /// next reconnect, and one the node refuses is not kept.
    @Test func theSDKRegistersItsTokenOnEveryConnectSoOneSetOfflineOrLostByTheNodeIsRegistered() async throws {
        let fake = try await FakePushServer.start(http1: true)
        let node = try await Self.gatewayNode("push-sdk-reconnect", fake: fake)
        let bob = try ClientHarness.device("bob", on: node)
        let device = try bob.store.deviceID().uuidString.lowercased()
        // Set before any connection: kept, registered once live.
        try await bob.setPushToken(.gateway(token: "set-offline"))
        #expect(try await node.server.store.read { r in try r.pushTokens(of: Self.bob) }.isEmpty)
        _ = try await ClientHarness.connectLive(bob, on: node)
        try await Self.waitForToken(node, .gateway(token: "set-offline"), device: device)

        // The node loses it (a restore from an older backup, an operator's cleanup): the next
        // session registers it again.
        try await node.server.store.write { tx in try tx.setPushToken(nil, user: Self.bob, device: device, at: .now()) }
        #expect(try await node.server.store.read { r in try r.pushTokens(of: Self.bob) }.isEmpty)
        await bob.disconnect()
        // Changed while disconnected: the new one is what the next session registers.
        try await bob.setPushToken(.gateway(token: "set-while-disconnected"))
        try await ClientHarness.connect(bob, on: node)
        try await Self.waitForToken(node, .gateway(token: "set-while-disconnected"), device: device)

        // Refused by the node while live: not kept (the previous one stays).
        do {
            try await bob.setPushToken(.fcm(token: "fcm-token"))
            Issue.record("an FCM token was accepted by a node without FCM")
        } catch {
            #expect(error.code == .invalidPushToken, "\(error)")
        }
        #expect(try bob.store.devicePushToken() == DevicePushToken(token: .gateway(token: "set-while-disconnected")))

        // Removed while disconnected: the next session removes it on the node.
        await bob.disconnect()
        try await bob.setPushToken(nil)
        try await ClientHarness.connect(bob, on: node)
        try await PushTests.waitForTokens(node, Self.bob, 0)
        await bob.disconnect()
        await node.stop()
        await fake.stop()
    }

    /// Pushes are queued in the commit of their message: a node killed with kill -9 after
    /// acknowledging messages and before delivering their pushes delivers every one after it
    /// starts again (duplicates only of the same push).
    @Test func killNineAfterCommitBeforeDeliveryLosesNoPush() async throws {
        let accepting = NIOLockedValueBox(false)
        let fake = try await FakePushServer.start(http1: true) { _, _ in
            HTTPResponse(status: accepting.withLockedValue { $0 } ? 200 : 503)
        }
        let directory = Fixtures.temporaryDirectory("push-kill")
        let data = directory.appendingPathComponent(".lamina")
        // Bob's device registers its token with the node (in-process, on the same data directory), then goes.
        let first = try await TestNode.start("push-kill-register") { c in
            c.dataDirectory = data.path
            c.push.gateway = PushSettings.Gateway(url: fake.url("/push"))
            c.push.caFile = fake.certificate
        }
        let bob = try await PushTests.registered(first, Self.bob, device: UUID(), .gateway(token: "bob-gw"))
        await bob.close()
        await first.stop()

        let config = directory.appendingPathComponent("node.json")
        try
            #"{"push":{"gateway":{"url":"\#(fake.url("/push"))"},"caFile":"\#(fake.certificate)","initialBackoffMilliseconds":50,"maxBackoffSeconds":1}}"#
            .write(to: config, atomically: true, encoding: .utf8)
        var node = try await NodeProcess.start(in: directory, arguments: ["--config", config.path])
        let appID = try String(contentsOf: data.appendingPathComponent("server-api/app-id"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let token =
            try String(contentsOf: data.appendingPathComponent("server-api/tokens"), encoding: .utf8)
            .split(separator: "\n").map(String.init).first { !$0.hasPrefix("#") && !$0.isEmpty } ?? ""
        let api = CurlAPI(
            url: "https://127.0.0.1:\(node.syncPort)", caFile: data.appendingPathComponent("tls/node-cert.pem").path,
            appID: appID, token: token)
        let conversation = try await WebhookTests.conversation(api)
        var messages: [String] = []
        for i in 0..<20 { messages.append(try await WebhookTests.send(api, in: conversation, "m\(i)")) }
        // Every send was acknowledged (committed); the gateway has refused what it was offered.
        _ = try await fake.waitForRequests(1)
        #expect(try await node.stop(with: SIGKILL) == SIGKILL)
        let refusedBefore = fake.requests.count
        accepting.withLockedValue { $0 = true }
        node = try await NodeProcess.start(in: directory, arguments: ["--config", config.path])
        // Every message's push arrives (each attempt carries its message id; an attempt the
        // kill cut short may come again).
        func delivered() -> Set<String> {
            Set(fake.requests.dropFirst(refusedBefore).compactMap { Self.notification($0)["message_id"] as? String })
        }
        let expected = Set(messages.map { "layer:///messages/\($0)" })
        let deadline = ContinuousClock.now + .seconds(30)
        while delivered() != expected {
            guard ContinuousClock.now < deadline else {
                throw SyncTestTimeout(waitingFor: "20 pushes after the restart (got \(delivered().count))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(delivered() == expected)
        #expect(Set(fake.requests.map { $0.json["token"] as? String }) == ["bob-gw"])
        _ = try await node.stop()
        await fake.stop()
    }
}

extension PushPathsTests {
    /// A push the provider is slow to answer holds only its own slot: later pushes go meanwhile.
    @Test func aSlowPushDoesNotHoldTheOthers() async throws {
        let (release, releaser) = AsyncStream.makeStream(of: Void.self)
        let fake = try await FakePushServer.start(http1: true) { request, _ in
            if request.json["token"] as? String == "slow" {
                for await _ in release { break }
            }
            return HTTPResponse(status: 200)
        }
        let node = try await Self.gatewayNode("push-slow", fake: fake)
        let carol = UserID("carol")
        for (user, token) in [(carol, "slow"), (Self.bob, "fast")] {
            let device = try await PushTests.registered(node, user, device: UUID(), .gateway(token: token))
            await device.close()
        }
        let alice = try await node.session(UserID("alice"), device: UUID())
        try await PushTests.waitForSessions(node, 1)
        let withCarol = try await PushTests.conversation(alice, with: [carol])
        let withBob = try await PushTests.conversation(alice, with: [Self.bob])
        try await PushTests.send(alice, withCarol, "for carol", push: PushConfiguration(alert: "for carol"))
        _ = try await fake.waitForRequests(1)  // carol's push, held by the provider
        try await PushTests.send(alice, withBob, "for bob", push: PushConfiguration(alert: "for bob"))
        let requests = try await fake.waitForRequests(2)
        #expect(requests.map { $0.json["token"] as? String } == ["slow", "fast"])
        releaser.yield()
        releaser.finish()
        await alice.close()
        await node.stop()
        await fake.stop()
    }
}
