import Foundation
import LaminaClient
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaTransport
import LaminaWire
import Testing

/// Pushes in a cluster of peers (SPEC §5.9, §6.5): the node that holds a device's token pushes
/// every message it holds, its own or replicated; a device's token moves to the node it last
/// registered on (the SDK registers on every connect), so a device live on another node gets
/// no push from the node it left.
@Suite struct ClusterPushTests {
    static let nodeA = NodeID(0xA1)
    static let nodeB = NodeID(0xB2)
    static let bob = UserID("bob")

    /// Waits until `node` holds exactly `expected` as bob's tokens (device → token).
    static func waitForBobTokens(_ node: TestNode, _ expected: [String: PushToken]) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let tokens = try await node.server.store.read { r in try r.pushTokens(of: Self.bob) }
            if Dictionary(uniqueKeysWithValues: tokens.map { ($0.device, $0.token) }) == expected { return }
            guard ContinuousClock.now < deadline else {
                throw SyncTestTimeout(waitingFor: "bob's tokens \(expected), got \(tokens)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    static func waitUntil(_ what: String, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while try await !condition() {
            guard ContinuousClock.now < deadline else { throw SyncTestTimeout(waitingFor: what) }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    static func messageID(_ post: FakePushServer.Received) -> String? {
        (post.json["notification"] as? [String: Any])?["message_id"] as? String
    }

    static func text(_ id: MessageID) -> String { "layer:///messages/\(id.uuid.uuidString.lowercased())" }

    @Test func theNodeHoldingTheTokenPushesReplicatedMessagesAndADeviceLiveOnAnotherNodeGetsNone() async throws {
        let fake = try await FakePushServer.start(http1: true)
        let certificates = Fixtures.temporaryDirectory("cluster-push-certs")
        let ca = try DevelopmentCluster.certificateAuthority(in: certificates).certificate
        func push(_ c: inout NodeServerConfiguration) {
            c.push.gateway = PushSettings.Gateway(url: fake.url("/push"))
            c.push.caFile = fake.certificate
            c.push.initialBackoffMilliseconds = 50
        }
        let a = try await TestNode.start("cluster-push-a") { c in
            c.nodeID = Self.nodeA.rawValue
            c.peers = try! DevelopmentCluster.settings(for: Self.nodeA, port: 0, peers: [], in: certificates)
            (c.certificatePath, c.privateKeyPath) = (c.peers.certificateFile, c.peers.keyFile)
            push(&c)
        }
        let b = try await TestNode.start("cluster-push-b") { c in
            c.nodeID = Self.nodeB.rawValue
            c.peers = try! DevelopmentCluster.settings(
                for: Self.nodeB, port: 0, peers: ["https://127.0.0.1:\(a.server.peers!.transport.port)"],
                in: certificates)
            (c.certificatePath, c.privateKeyPath) = (c.peers.certificateFile, c.peers.keyFile)
            push(&c)
        }
        let bobStore = Fixtures.temporaryDirectory("cluster-push-bob")
        func device(_ user: UserID, on node: TestNode, store: URL? = nil) throws -> LaminaClient {
            try ClientHarness.device(user, on: node) { c in
                if let store { c.dataDirectory = store }
                c.trust = .certificateAuthorities(URL(fileURLWithPath: ca))
            }
        }
        let alice = try device("alice", on: b)
        try await ClientHarness.connect(alice, on: b)

        // Bob's phone registers its token on node A, then goes offline.
        var bob = try device("bob", on: a, store: bobStore)
        let phone = try bob.store.deviceID().uuidString.lowercased()
        let token = PushToken.gateway(token: "bob-phone")
        _ = try await ClientHarness.connectLive(bob, on: a)
        let sessionsOnA = a.server.sessionCount
        try await bob.setPushToken(token)
        try await Self.waitForBobTokens(a, [phone: token])
        try await bob.close()
        try await PushTests.waitForSessions(a, sessionsOnA - 1)

        // Alice, on node B, writes: the message reaches A by replication, and A pushes it.
        let conversation = try alice.newConversation(participants: [Self.bob]).id
        let first = try alice.send(
            alice.newMessage(parts: [MessagePart.with(text: "one")], push: PushConfiguration(alert: "alice: one")),
            in: conversation
        ).id
        let pushed = try await fake.waitForRequests(1)
        #expect(Self.messageID(pushed[0]) == Self.text(first))
        #expect(pushed[0].json["token"] as? String == "bob-phone")
        #expect(pushed[0].json["device_id"] as? String == phone)
        // B holds no token of bob's: it queued nothing.
        #expect(try await b.server.store.read { r in try r.queuedPushes(of: first) }.isEmpty)

        // The same phone connects to node B: the SDK registers its token there, the
        // registration replicates, and A drops its own.
        bob = try device("bob", on: b, store: bobStore)
        _ = try await ClientHarness.connectLive(bob, on: b)
        try await Self.waitForBobTokens(b, [phone: token])
        try await Self.waitForBobTokens(a, [:])

        // Live on B: a message from B is not pushed by B (live session) nor by A (no token).
        let second = try alice.send(
            alice.newMessage(parts: [MessagePart.with(text: "two")], push: PushConfiguration(alert: "alice: two")),
            in: conversation
        ).id
        _ = try await bob.waitForCreation(of: second, timeout: .seconds(30))
        #expect(try await b.server.store.read { r in try r.queuedPushes(of: second) }.isEmpty)
        try await Self.waitUntil("node A to hold the second message") {
            try await a.server.store.read { r in try r.message(second) } != nil
        }
        #expect(try await a.server.store.read { r in try r.queuedPushes(of: second) }.isEmpty)

        // Offline again: B, which holds the token now, pushes.
        let sessionsOnB = b.server.sessionCount
        try await bob.close()
        try await PushTests.waitForSessions(b, sessionsOnB - 1)
        let third = try alice.send(
            alice.newMessage(parts: [MessagePart.with(text: "three")], push: PushConfiguration(alert: "alice: three")),
            in: conversation
        ).id
        let all = try await fake.waitForRequests(2)
        #expect(all.map(Self.messageID) == [Self.text(first), Self.text(third)])

        try await alice.close()
        await b.stop()
        await a.stop()
        await fake.stop()
    }
}
