import Foundation
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaTestPostgres
import LaminaWire
import Testing

/// Channels on two nodes sharing one PostgreSQL (SPEC §6.8): a message accepted on either node
/// reaches the members online on both, live; each node's in-memory member list follows the
/// joins, leaves and deletions made through the other (notified at once, no read per member);
/// a message too large to ride in a notification is read once from the shared log.
@Suite struct ChannelsOnSharedPostgresTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"
    static let carol: UserID = "carol"
    static let dave: UserID = "dave"

    @Test func membersOnlineOnBothNodesGetEveryMessageLive() async throws {
        let database = try PostgresTestCluster.newDatabase()
        let a = try await SharedPostgresNodesTests.node("pg-channels-a", on: database)
        let b = try await SharedPostgresNodesTests.node("pg-channels-b", on: database, trusting: a)
        let alice = try await a.session(Self.alice, device: UUID())
        let bob = try await b.session(Self.bob, device: UUID())
        let carol = try await b.session(Self.carol, device: UUID())
        let dave = try await b.session(Self.dave, device: UUID())
        let channel = try await ChannelTests.create(alice, "shared")
        // A message before anyone else joins: node A now holds the channel's member list.
        let (first, _) = try await ChannelTests.send(alice, channel, "alone")
        _ = try await ChannelsAcrossPeersTests.live(alice, first)

        // Bob and dave join through node B; node A's list learns it from B's notifications.
        _ = try await ChannelTests.join(bob, channel)
        _ = try await ChannelTests.join(dave, channel)
        try await Self.noticesReceived(by: a, atLeast: 2)
        let (fromA, ackA) = try await ChannelTests.send(alice, channel, "from a")
        #expect(ackA.cursor == 2, "one log, numbered in the shared store")
        for client in [bob, dave] {
            let live = try await ChannelsAcrossPeersTests.live(client, fromA)
            guard case .channelMessage(let m) = live.event else { return }
            #expect(live.seq == 0 && m.logSeq == 2 && ChannelTests.text(m) == "from a")
        }
        // A message accepted on B reaches alice on A.
        let (fromB, ackB) = try await ChannelTests.send(bob, channel, "from b")
        #expect(ackB.cursor == 3)
        _ = try await ChannelsAcrossPeersTests.live(alice, fromB)
        _ = try await ChannelsAcrossPeersTests.live(dave, fromB)
        // Carol, on B and not a member, gets nothing.
        #expect(try await ChannelTests.channelMessagesThroughBarrier(carol).isEmpty)

        // Bob leaves through B: A's next message reaches dave and not bob.
        _ = try await ChannelTests.leave(bob, channel)
        try await Self.noticesReceived(by: a, atLeast: 4)
        let (afterLeave, _) = try await ChannelTests.send(alice, channel, "after bob left")
        _ = try await ChannelsAcrossPeersTests.live(dave, afterLeave)
        #expect(try await ChannelTests.channelMessagesThroughBarrier(bob).isEmpty)

        // A message too large to ride in a notification: node B reads its one log row.
        let parts = try (0..<6).map { i in try MessagePart(text: String(repeating: "\(i)", count: 2_000)) }
        let (big, _) = try await ChannelTests.send(alice, channel, "", parts: parts)
        let bigLive = try await ChannelsAcrossPeersTests.live(dave, big)
        guard case .channelMessage(let bigMessage) = bigLive.event else { return }
        #expect(bigMessage.parts == parts)

        // Deleted through A: dave's feed on B says so; sends through B are not-found.
        _ = try await ChannelTests.delete(alice, channel)
        _ = try await dave.change { $0.event.kind == 19 }
        await ChannelTests.expectRefused(.notFound) { try await ChannelTests.send(dave, channel, "gone") }
        #expect(b.server.engine.sharedChannelNoticeCounts.received >= 3)
        for client in [alice, bob, carol, dave] { await client.close() }
        await b.stop()
        await a.stop()
    }

    /// Waits until `node` has received at least `count` channel notices from the other node.
    static func noticesReceived(by node: TestNode, atLeast count: Int) async throws {
        try await ResourceLimitTests.eventuallyAsync("\(count) channel notices to reach the node") {
            node.server.engine.sharedChannelNoticeCounts.received >= count
        }
    }
}
