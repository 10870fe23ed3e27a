import Foundation
import LaminaClient
import LaminaLocalNode
import LaminaMerge
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaTransport
import Testing

/// Reactions on two peering nodes (SPEC §6.5, §6.9): kind 20 replicates as a logged operation
/// applied by `ReactionSet`'s rule. Users on both nodes react and unreact, also while the link
/// is cut; after it heals both nodes hold the same reactions, every device shows them, and an
/// add made on one side during the partition survives the remove made on the other side.
@Suite struct ReactionsAcrossPeersTests {
    static let thumbs = "\u{1F44D}"
    static let party = "\u{1F389}"

    static func present(_ node: TestNode, _ message: MessageID) async throws -> Set<String> {
        Set(
            try await node.server.store.read { r in try r.presentReactions(on: [message]) }.map {
                "\($0.user) \($0.key)"
            })
    }

    static func shows(_ client: LaminaClient, _ message: MessageID) throws -> Set<String> {
        Set((try client.message(message)?.reactions ?? [:]).flatMap { key, users in users.map { "\($0) \(key)" } })
    }

    static func waitForBoth(_ a: TestNode, _ b: TestNode, _ message: MessageID, _ expected: Set<String>) async throws
        -> Bool
    {
        try await poll("both nodes to hold \(expected.sorted())") {
            let onA = try await present(a, message)
            let onB = try await present(b, message)
            return onA == expected && onB == expected
        }
    }

    /// Polls `condition` until it holds (true) or 30 s pass (false).
    static func poll(_ what: String, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("timed out waiting for \(what)")
        return false
    }

    @Test func bothNodesConvergeAndAnAddDuringAPartitionSurvivesTheOtherSidesRemove() async throws {
        let certificates = Fixtures.temporaryDirectory("reactions-peers-certs")
        let a = try await TestNode.start("reactions-peers-a") { c in
            c.nodeID = PeerReplicationTests.nodeA.rawValue
            c.peers = try! DevelopmentCluster.settings(
                for: PeerReplicationTests.nodeA, port: 0, peers: [], in: certificates)
        }
        let proxy = try await TCPProxy.start(to: a.server.peers!.transport.port)
        let b = try await TestNode.start("reactions-peers-b") { c in
            c.nodeID = PeerReplicationTests.nodeB.rawValue
            c.peers = try! DevelopmentCluster.settings(
                for: PeerReplicationTests.nodeB, port: 0, peers: ["https://127.0.0.1:\(proxy.port)"],
                in: certificates)
            c.peers.reconnectMinimumMilliseconds = 20
            c.peers.reconnectMaximumMilliseconds = 200
        }
        let aliceOnA = try ClientHarness.device("alice", on: a)
        let aliceOnB = try ClientHarness.device("alice", on: b)
        let bob = try ClientHarness.device("bob", on: b)
        for (client, node) in [(aliceOnA, a), (aliceOnB, b), (bob, b)] {
            try await ClientHarness.connect(client, on: node)
        }
        let conversation = try aliceOnA.newConversation(
            participants: ["bob"], options: ConversationOptions(isDistinct: false)
        ).id
        let message = try aliceOnA.send(
            aliceOnA.newMessage(parts: [MessagePart.with(text: "react across nodes")]), in: conversation
        ).id
        for client in [aliceOnB, bob] { _ = try await client.waitForCreation(of: message, timeout: .seconds(30)) }

        // Linked: Alice reacts on A, Bob on B; both nodes and every device agree.
        try aliceOnA.react(Self.thumbs, to: message)
        try bob.react(Self.party, to: message)
        let both: Set<String> = ["alice \(Self.thumbs)", "bob \(Self.party)"]
        #expect(try await Self.waitForBoth(a, b, message, both))
        for client in [aliceOnA, aliceOnB, bob] {
            try await ClientHarness.waitUntil(client, "both reactions") { try Self.shows(client, message) == both }
        }

        // Cut: Alice takes 👍 back on A while her device on B adds it again there (B makes a tag
        // of its own: an add A's remove did not see), and Bob takes 🎉 back on B.
        proxy.cut()
        try aliceOnA.unreact(Self.thumbs, from: message)
        #expect(
            try await Self.poll("the remove applied on A") {
                try await Self.present(a, message) == ["bob \(Self.party)"]
            })
        // Her device on B still shows 👍: the add is queued all the same, and B, holding only
        // A's tag for it, stamps one of its own.
        try aliceOnB.react(Self.thumbs, to: message)
        try bob.unreact(Self.party, from: message)
        #expect(
            try await Self.poll("B's own tag and Bob's remove") {
                let tags = try await b.server.store.read { r in
                    try r.reactionTags(of: Self.thumbs, by: "alice", on: message)
                }
                let onB = try await Self.present(b, message)
                return tags.contains { $0.tag.node == PeerReplicationTests.nodeB && !$0.removed }
                    && onB == ["alice \(Self.thumbs)"]
            })

        // Healed: the add made on B survives A's remove (it named only A's tag); 🎉 is gone.
        proxy.heal()
        let after: Set<String> = ["alice \(Self.thumbs)"]
        #expect(try await Self.waitForBoth(a, b, message, after))
        for client in [aliceOnA, aliceOnB, bob] {
            try await ClientHarness.waitUntil(client, "the healed reactions") {
                try Self.shows(client, message) == after
            }
        }
        let tags = try await a.server.store.read { r in try r.reactionTags(of: Self.thumbs, by: "alice", on: message) }
        #expect(tags.filter { !$0.removed }.map(\.tag.node) == [PeerReplicationTests.nodeB])
        #expect(tags.filter(\.removed).map(\.tag.node) == [PeerReplicationTests.nodeA])
        #expect(try await PeerReplicationTests.converged([a, b], within: .seconds(30)))

        for client in [aliceOnA, aliceOnB, bob] { try await client.close() }
        await b.stop()
        await proxy.stop()
        await a.stop()
    }
}
