import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaTestPostgres
import LaminaWire
import Testing

/// Presence across nodes (SPEC §6.6): between two peered nodes it travels as PEER_PRESENCE on
/// the peer link and is forgotten when the link is lost; between two nodes on one PostgreSQL
/// database as notifications, with no table written per change.
@Suite struct PresenceAcrossNodesTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    @Test func presenceCrossesAPeerLinkAndIsForgottenWhenItIsLost() async throws {
        let (a, b, _) = try await PeerReplicationTests.cluster("presence-peers")
        let alice = try await a.session(Self.alice, device: UUID(), features: .withPresence)
        _ = try await MessagingTests.conversation(alice, with: [Self.bob])
        try await ResourceLimitTests.eventuallyAsync("the conversation to reach node B") {
            (try? await b.server.store.read { r in try r.identityAudience(of: Self.bob) })?.contains(Self.alice) == true
        }
        let bob = try await b.session(Self.bob, device: UUID(), features: .withPresence)
        let online = try await bob.presence(of: Self.alice, .available)
        // Bob's presence reaches alice on node A the same way.
        _ = try await alice.presence(of: Self.bob, .available)

        try await alice.choose(.away)
        let away = try await bob.presence(of: Self.alice, .away, after: online)
        await alice.close()
        let gone = try await bob.presence(of: Self.alice, .offline, after: away)
        #expect(gone.lastSeenAt != nil)

        // Alice comes back on node A (still away: her choice is kept); then node A goes away
        // and node B forgets what it reported once the link is lost.
        let again = try await a.session(Self.alice, device: UUID(), features: .withPresence)
        let back = try await bob.presence(of: Self.alice, .away, after: gone)
        await a.stop()
        _ = try await bob.presence(of: Self.alice, .offline, after: back, timeout: .seconds(30))
        await again.close()
        await bob.close()
        await b.stop()
    }

    @Test func presenceCrossesNodesSharingPostgresWithoutTableWrites() async throws {
        let database = try PostgresTestCluster.newDatabase()
        let first = try await SharedPostgresNodesTests.node("presence-pg-1", on: database)
        let second = try await SharedPostgresNodesTests.node("presence-pg-2", on: database, trusting: first)
        let alice = try await first.session(Self.alice, device: UUID(), features: .withPresence)
        _ = try await MessagingTests.conversation(alice, with: [Self.bob])
        let bob = try await second.session(Self.bob, device: UUID(), features: .withPresence)
        let online = try await bob.presence(of: Self.alice, .available)
        _ = try await alice.presence(of: Self.bob, .available)

        let writesBefore = Self.transactions([first, second])
        try await alice.choose(.busy)
        let busy = try await bob.presence(of: Self.alice, .busy, after: online)
        try await alice.choose(.invisible)
        let hidden = try await bob.presence(of: Self.alice, .offline, after: busy)
        #expect(hidden.lastSeenAt != nil)
        try await alice.choose(.available)
        _ = try await bob.presence(of: Self.alice, .available, after: hidden)
        let writesAfter = Self.transactions([first, second])
        #expect(writesAfter == writesBefore, "presence changes committed: \(writesBefore) -> \(writesAfter)")
        print("presence on a shared store: 3 changes, \(writesAfter - writesBefore) transactions committed")

        await alice.close()
        _ = try await bob.presence(of: Self.alice, .offline, after: hidden)
        await bob.close()
        await first.stop()
        await second.stop()
    }

    /// Transactions the nodes' store writers committed so far, but for the last-seen times'
    /// batch (written every 2 s when someone went offline, SPEC §6.6: under load the window
    /// of the three changes can span one).
    static func transactions(_ nodes: [TestNode]) -> Int {
        nodes.reduce(0) {
            $0 + $1.server.store.writerStatistics.transactions - $1.server.engine.lastSeenWrites.transactions
        }
    }
}
