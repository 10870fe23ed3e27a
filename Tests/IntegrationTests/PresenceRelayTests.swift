import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaWire
import Testing

/// Presence beyond direct peer links (SPEC §6.6, PEER_PRESENCE_RELAYED and _WITHDRAWN): in a
/// star of three nodes (B and C each linked to A only), a user on B and a user on C see each
/// other's presence, relayed by A; when B goes away, A withdraws B's reports and the user on C
/// sees B's user offline.
@Suite struct PresenceRelayTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    @Test func presenceCrossesTwoLinksAndIsWithdrawnWhenTheFarNodeGoesAway() async throws {
        let certificates = Fixtures.temporaryDirectory("presence-relay-certs")
        let nodeC = NodeID(0xC3)
        let a = try await TestNode.start("presence-relay-a") { c in
            c.nodeID = PeerReplicationTests.nodeA.rawValue
            c.peers = try! DevelopmentCluster.settings(
                for: PeerReplicationTests.nodeA, port: 0, peers: [], in: certificates)
        }
        let hub = "https://127.0.0.1:\(a.server.peers!.transport.port)"
        let b = try await TestNode.start("presence-relay-b") { c in
            c.nodeID = PeerReplicationTests.nodeB.rawValue
            c.peers = try! DevelopmentCluster.settings(
                for: PeerReplicationTests.nodeB, port: 0, peers: [hub], in: certificates)
        }
        let c = try await TestNode.start("presence-relay-c") { c in
            c.nodeID = nodeC.rawValue
            c.peers = try! DevelopmentCluster.settings(for: nodeC, port: 0, peers: [hub], in: certificates)
        }
        // Alice (on B) and bob (on C) share a conversation; it reaches C through A.
        let alice = try await b.session(Self.alice, device: UUID(), features: .withPresence)
        _ = try await MessagingTests.conversation(alice, with: [Self.bob])
        try await ResourceLimitTests.eventuallyAsync("the conversation to reach node C") {
            (try? await c.server.store.read { r in try r.identityAudience(of: Self.bob) })?.contains(Self.alice) == true
        }
        let bob = try await c.session(Self.bob, device: UUID(), features: .withPresence)
        let online = try await bob.presence(of: Self.alice, .available)
        _ = try await alice.presence(of: Self.bob, .available)

        try await alice.choose(.away)
        let away = try await bob.presence(of: Self.alice, .away, after: online)
        try await bob.choose(.busy)
        _ = try await alice.presence(of: Self.bob, .busy)

        // B goes away: A loses its link, forgets B's reports and withdraws them from C.
        await b.stop()
        _ = try await bob.presence(of: Self.alice, .offline, after: away, timeout: .seconds(30))
        await alice.close()
        await bob.close()
        await c.stop()
        await a.stop()
    }
}
