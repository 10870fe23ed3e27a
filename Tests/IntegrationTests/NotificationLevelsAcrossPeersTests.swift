import Foundation
import LaminaMerge
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaTransport
import LaminaWire
import Testing

/// Notification levels and mentions across peer nodes (SPEC §6.10, §6.5 kind 73): a level bob
/// sets on node A is obeyed by node B's push decision for bob's phone registered there, a
/// message's mentions cross the nodes with it, and both nodes end with the same registers.
@Suite struct NotificationLevelsAcrossPeersTests {
    static let alice = UserID("alice")
    static let bob = UserID("bob")

    @Test func aLevelSetOnOneNodeDecidesThePushesOfTheOther() async throws {
        let fake = try await FakePushServer.start(http1: true) { _, _ in HTTPResponse(status: 202) }
        let certificates = Fixtures.temporaryDirectory("levels-peers-certs")
        let a = try await TestNode.start("levels-peers-a") { c in
            c.nodeID = PeerReplicationTests.nodeA.rawValue
            c.adminPort = 0
            c.peers = try! DevelopmentCluster.settings(
                for: PeerReplicationTests.nodeA, port: 0, peers: [], in: certificates)
        }
        let b = try await TestNode.start("levels-peers-b") { c in
            c.nodeID = PeerReplicationTests.nodeB.rawValue
            c.peers = try! DevelopmentCluster.settings(
                for: PeerReplicationTests.nodeB, port: 0,
                peers: ["https://127.0.0.1:\(a.server.peers!.transport.port)"], in: certificates)
            c.push.gateway = PushSettings.Gateway(url: fake.url("/push"), authorization: "Bearer gw")
            c.push.caFile = fake.certificate
            c.push.initialBackoffMilliseconds = 50
        }
        // Bob's phone holds its pushes on node B (offline); his laptop and alice use node A.
        let phone = try await PushTests.registered(b, Self.bob, device: UUID(), .gateway(token: "bob-phone"))
        await phone.close()
        try await PushTests.waitForSessions(b, 0)
        let laptop = try await a.session(Self.bob, device: UUID())
        let alice = try await a.session(Self.alice, device: UUID())
        let quiet = try await PushTests.conversation(alice, with: [Self.bob])
        let muted = try await PushTests.conversation(alice, with: [Self.bob])
        _ = try await NotificationLevelTests.setLevel(laptop, .mentions, of: quiet)
        _ = try await NotificationLevelTests.setLevel(laptop, .none, of: muted)
        // Node B holds both levels (kind 73) before the messages come.
        try await ResourceLimitTests.eventuallyAsync("the levels to reach node B") {
            let levels = try? await b.server.store.read { r in try r.notificationSettings(of: Self.bob) }
            return levels?[quiet]?.current?.level == .mentions
                && levels?[muted]?.current?.level == NotificationLevel.none
        }

        try await NotificationLevelTests.send(alice, muted, "muted @bob", mentions: [Self.bob])
        try await NotificationLevelTests.send(alice, quiet, "no mention")
        let mention = try await NotificationLevelTests.send(alice, quiet, "@bob", mentions: [Self.bob])
        let post = try await fake.waitForRequests(1)[0]
        // Node B stored the mention with the message (it decided the push from it).
        try await ResourceLimitTests.eventuallyAsync("the three messages on node B") {
            (try? await b.server.store.read { r in try r.message(mention, as: Self.bob) })?.mentions == [Self.bob]
        }
        try await NotificationLevelTests.waitForEmptyQueue(b)
        #expect(fake.requests.count == 1, "only the mention in `quiet` is pushed")
        #expect(NotificationLevelTests.pushedMessage(post) == NotificationLevelTests.url(mention))
        #expect(NotificationLevelTests.badge(post) == 2, "quiet's two unread; muted is left out")

        try await ResourceLimitTests.eventuallyAsync("the users' digests to agree") {
            let da = try? await a.server.engine.convergenceDigest()
            let db = try? await b.server.engine.convergenceDigest()
            return da != nil && da?.users == db?.users
        }
        await laptop.close()
        await alice.close()
        await b.stop()
        await a.stop()
        await fake.stop()
    }
}
