import Foundation
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaWire
import Testing

/// Channels across peer nodes (SPEC §6.8, §6.5 kinds 16 to 19), on real nodes peered over
/// mutual TLS: a channel created on one node is joined on the other, members on both sides get
/// every message live and find it in their node's log, leaves and deletions reach the other
/// node, a partition heals into the same state on both, two peers may create one name
/// concurrently, and the member limit is each node's check where a join enters.
@Suite struct ChannelsAcrossPeersTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"
    static let carol: UserID = "carol"
    static let dave: UserID = "dave"

    @Test func membersOnBothNodesGetEveryMessageLiveAndInTheLog() async throws {
        let (a, b, _) = try await PeerReplicationTests.cluster("channels-peers")
        let alice = try await a.session(Self.alice, device: UUID())
        let bob = try await b.session(Self.bob, device: UUID())
        let carol = try await b.session(Self.carol, device: UUID())
        let dave = try await b.session(Self.dave, device: UUID())
        let channel = try await ChannelTests.create(alice, "lobby")
        try await Self.holds(b, channel)

        // Bob joins on node B: his feed there gets the channel and his membership; node A
        // learns he is a member.
        _ = try await ChannelTests.join(bob, channel)
        let told = try await bob.change { $0.event.kind == 16 }
        guard case .channelCreated(let c) = told.event else { return }
        #expect(c.name.rawValue == "lobby" && c.creator == Self.alice && told.seq > 0)
        try await Self.members(of: channel, on: a, are: [Self.alice, Self.bob])
        _ = try await ChannelTests.join(dave, channel)
        try await Self.members(of: channel, on: a, are: [Self.alice, Self.bob, Self.dave])

        // A message sent on each node reaches the members online on both, live.
        let (fromA, ackA) = try await ChannelTests.send(alice, channel, "from a")
        #expect(try await Self.live(bob, fromA).seq == 0)
        // Node B has appended A's message to its log: bob's is the second there.
        let (fromB, ackB) = try await ChannelTests.send(bob, channel, "from b")
        #expect(ackA.cursor == 1 && ackB.cursor == 2, "each node numbers its own log")
        for (client, id) in [(dave, fromA), (alice, fromB), (dave, fromB)] {
            let live = try await Self.live(client, id)
            #expect(live.seq == 0)
        }
        // Carol, on node B and not a member, got nothing.
        #expect(try await ChannelTests.channelMessagesThroughBarrier(carol).isEmpty)
        // Both logs hold both messages, each with the position the accepting node gave it.
        for client in [alice, dave] {
            let log = try await ChannelTests.fetch(client, channel, after: 0, count: 10).messages
            #expect(Set(log.map(\.id)) == [fromA, fromB] && log.map(\.logSeq) == [1, 2])
            #expect(log.first { $0.id == fromA }?.position == ackA.position)
            #expect(log.first { $0.id == fromB }?.position == ackB.position)
        }

        // Bob leaves on B: node A drops him; alice's next message reaches dave but not bob.
        _ = try await ChannelTests.leave(bob, channel)
        try await Self.members(of: channel, on: a, are: [Self.alice, Self.dave])
        let (after, _) = try await ChannelTests.send(alice, channel, "after bob left")
        _ = try await Self.live(dave, after)
        #expect(try await ChannelTests.channelMessagesThroughBarrier(bob).isEmpty)
        #expect(try await PeerReplicationTests.converged([a, b], within: .seconds(30)))

        // Alice deletes it on A: dave, on B, is told; commands on B naming it are not-found and
        // the name is free on both nodes.
        _ = try await ChannelTests.delete(alice, channel)
        let deleted = try await dave.change { $0.event.kind == 19 }
        #expect(deleted.seq > 0)
        await ChannelTests.expectRefused(.notFound) { try await ChannelTests.send(dave, channel, "gone") }
        #expect(try await PeerReplicationTests.converged([a, b], within: .seconds(30)))
        _ = try await ChannelTests.create(carol, "lobby")
        for client in [alice, bob, carol, dave] { await client.close() }
        await b.stop()
        await a.stop()
    }

    /// Through a partition both nodes take joins, sends and a creation of the same name; once
    /// the link heals they converge: every message in both logs once, every membership on
    /// both, and both channels of that name live on both nodes (name lookups answer the earlier).
    @Test func aPartitionHealsIntoOneStateOnBothNodes() async throws {
        let certificates = Fixtures.temporaryDirectory("channels-partition-certs")
        let a = try await TestNode.start("channels-partition-a") { c in
            c.nodeID = PeerReplicationTests.nodeA.rawValue
            c.peers = try! DevelopmentCluster.settings(
                for: PeerReplicationTests.nodeA, port: 0, peers: [], in: certificates)
        }
        let proxy = try await TCPProxy.start(to: a.server.peers!.transport.port)
        let b = try await TestNode.start("channels-partition-b") { c in
            c.nodeID = PeerReplicationTests.nodeB.rawValue
            c.peers = try! DevelopmentCluster.settings(
                for: PeerReplicationTests.nodeB, port: 0, peers: ["https://127.0.0.1:\(proxy.port)"], in: certificates)
            c.peers.reconnectMinimumMilliseconds = 20
            c.peers.reconnectMaximumMilliseconds = 200
        }
        let alice = try await a.session(Self.alice, device: UUID())
        let bob = try await b.session(Self.bob, device: UUID())
        let carol = try await b.session(Self.carol, device: UUID())
        let channel = try await ChannelTests.create(alice, "partitioned")
        try await Self.holds(b, channel)
        _ = try await ChannelTests.join(bob, channel)
        try await Self.members(of: channel, on: a, are: [Self.alice, Self.bob])

        proxy.cut()
        var sent: [MessageID] = []
        for i in 0..<3 { sent.append(try await ChannelTests.send(alice, channel, "a \(i)").id) }
        for i in 0..<2 { sent.append(try await ChannelTests.send(bob, channel, "b \(i)").id) }
        _ = try await ChannelTests.join(carol, channel)
        sent.append(try await ChannelTests.send(carol, channel, "carol joined on b").id)
        // The same name created on each side of the cut: both nodes accept theirs.
        let onA = try await ChannelTests.create(alice, "same name")
        let onB = try await ChannelTests.create(bob, "same name")

        proxy.heal()
        #expect(try await PeerReplicationTests.converged([a, b], within: .seconds(60)))
        for node in [a, b] {
            let log = try await node.server.store.read { r in try r.channelLog(channel, after: 0, limit: 100) }
            #expect(Set(log.map(\.id)) == Set(sent) && log.count == sent.count)
            #expect(log.map(\.logSeq) == Array(1...UInt64(sent.count)))
        }
        try await Self.members(of: channel, on: a, are: [Self.alice, Self.bob, Self.carol])
        // B's messages reached A after the heal; alice reads them from A's log by her cursor.
        let read = try await ChannelTests.fetch(alice, channel, after: 0, count: 100).messages
        #expect(Set(read.map(\.id)) == Set(sent))
        // Both channels named "same name" live on both nodes; a lookup by name answers the
        // earlier creation; a third creation of the name is refused on either node.
        for node in [a, b] {
            let (first, live) = try await node.server.store.read { r in
                (try r.channel(named: try ChannelName("same name")), [try r.channel(onA), try r.channel(onB)])
            }
            #expect(live.allSatisfy { $0 != nil && $0?.isDeleted == false })
            let earlier = live.compactMap { $0 }.min {
                ($0.channel.createdAt.millisecondsSince1970, $0.channel.id.uuid.uuidString)
                    < ($1.channel.createdAt.millisecondsSince1970, $1.channel.id.uuid.uuidString)
            }
            #expect(first?.channel.id == earlier?.channel.id)
        }
        await ChannelTests.expectRefused(.idInUse) { try await ChannelTests.create(carol, "same name") }
        await ChannelTests.expectRefused(.idInUse) { try await ChannelTests.create(alice, "same name") }
        for client in [alice, bob, carol] { await client.close() }
        await b.stop()
        await a.stop()
        await proxy.stop()
    }

    /// The member limit is checked where a join enters, against the members the node holds
    /// (those who joined on its peers included); a peer's joins are applied whatever it holds.
    @Test func theMemberLimitIsEachNodesCheckWhereAJoinEnters() async throws {
        let certificates = Fixtures.temporaryDirectory("channels-limit-peers-certs")
        let a = try await TestNode.start("channels-limit-peers-a") { c in
            c.nodeID = PeerReplicationTests.nodeA.rawValue
            c.peers = try! DevelopmentCluster.settings(
                for: PeerReplicationTests.nodeA, port: 0, peers: [], in: certificates)
        }
        let aPeers = "https://127.0.0.1:\(a.server.peers!.transport.port)"
        let b = try await TestNode.start("channels-limit-peers-b") { c in
            c.nodeID = PeerReplicationTests.nodeB.rawValue
            c.peers = try! DevelopmentCluster.settings(
                for: PeerReplicationTests.nodeB, port: 0, peers: [aPeers], in: certificates)
            c.resources.maxChannelMembers = 2
        }
        let alice = try await a.session(Self.alice, device: UUID())
        let bob = try await a.session(Self.bob, device: UUID())
        let dave = try await a.session(Self.dave, device: UUID())
        let carol = try await b.session(Self.carol, device: UUID())
        let channel = try await ChannelTests.create(alice, "small on b")
        _ = try await ChannelTests.join(bob, channel)
        try await Self.members(of: channel, on: b, are: [Self.alice, Self.bob])
        // Node B holds two members, its limit: carol's join there is refused; node B serves on.
        await ChannelTests.expectRefused(.tooManyParticipants) { try await ChannelTests.join(carol, channel) }
        // Node A (limit 10,000) takes dave; node B applies his join although it holds two.
        _ = try await ChannelTests.join(dave, channel)
        try await Self.members(of: channel, on: b, are: [Self.alice, Self.bob, Self.dave])
        await ChannelTests.expectRefused(.tooManyParticipants) { try await ChannelTests.join(carol, channel) }
        // Leaves on A bring B below its limit: carol's join is taken.
        _ = try await ChannelTests.leave(bob, channel)
        _ = try await ChannelTests.leave(dave, channel)
        try await Self.members(of: channel, on: b, are: [Self.alice])
        _ = try await ChannelTests.join(carol, channel)
        try await Self.members(of: channel, on: a, are: [Self.alice, Self.carol])
        for client in [alice, bob, carol, dave] { await client.close() }
        await b.stop()
        await a.stop()
    }

    /// Three nodes, B and C each peered with A only: a channel created on B and joined on C
    /// carries messages both ways through A, live to the members on every node.
    @Test func threeNodesRelayChannelsThroughTheMiddleOne() async throws {
        let (a, b, certificates) = try await PeerReplicationTests.cluster("channels-three")
        let nodeC = NodeID(0xC3)
        let c = try await TestNode.start("channels-three-c") { config in
            config.nodeID = nodeC.rawValue
            config.peers = try! DevelopmentCluster.settings(
                for: nodeC, port: 0, peers: ["https://127.0.0.1:\(a.server.peers!.transport.port)"], in: certificates)
        }
        let alice = try await a.session(Self.alice, device: UUID())
        let bob = try await b.session(Self.bob, device: UUID())
        let carol = try await c.session(Self.carol, device: UUID())
        let channel = try await ChannelTests.create(bob, "three")
        try await Self.holds(c, channel)
        _ = try await ChannelTests.join(carol, channel)
        try await Self.holds(a, channel)
        _ = try await ChannelTests.join(alice, channel)
        try await Self.members(of: channel, on: b, are: [Self.alice, Self.bob, Self.carol])
        let (fromB, _) = try await ChannelTests.send(bob, channel, "from b")
        let (fromC, _) = try await ChannelTests.send(carol, channel, "from c")
        for (client, id) in [(carol, fromB), (alice, fromB), (bob, fromC), (alice, fromC)] {
            _ = try await Self.live(client, id)
        }
        #expect(try await PeerReplicationTests.converged([a, b, c], within: .seconds(30)))
        for client in [alice, bob, carol] { await client.close() }
        await c.stop()
        await b.stop()
        await a.stop()
    }

    // MARK: - Helpers

    /// Waits until `node` holds `channel` (its creation replicated there).
    static func holds(_ node: TestNode, _ channel: ChannelID) async throws {
        try await ResourceLimitTests.eventuallyAsync("channel \(channel) to reach the node") {
            (try? await node.server.store.read { r in try r.channel(channel) }) != nil
        }
    }

    /// Waits until `node`'s members of `channel` are `expected`.
    static func members(of channel: ChannelID, on node: TestNode, are expected: Set<UserID>) async throws {
        try await ResourceLimitTests.eventuallyAsync("the members of \(channel) to be \(expected.sorted())") {
            let held = try? await node.server.store.read { r in try r.channelMembers(of: channel) }
            return held.map(Set.init) == expected
        }
    }

    /// The live `channel-message` change for `id` at `client`.
    static func live(_ client: SyncTestClient, _ id: MessageID) async throws -> Change {
        try await client.change {
            if case .channelMessage(let m) = $0.event { return m.id == id }
            return false
        }
    }
}
