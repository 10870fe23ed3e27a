import Foundation
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaTestPostgres
import LaminaWire
import Testing

/// A peer's channel operations applied by one of the nodes sharing a PostgreSQL (SPEC §6.8): the
/// node that applied them tells the others sharing the store, as it does for its own commands,
/// so a member online on another node of the store gets a peer's message live, and that node's
/// member list follows a peer's joins. Node A (SQLite) peers with B1; B2 shares B1's store and
/// has no peer link.
@Suite struct ChannelsPeerOnSharedPostgresTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"
    static let dave: UserID = "dave"

    @Test func aPeersMessagesAndJoinsReachTheOtherNodeOnTheStore() async throws {
        let (a, b1, b2) = try await PeerOfSharedStoreTests.nodes("pg-peer-channels")

        let alice = try await a.session(Self.alice, device: UUID())
        let bob = try await b2.session(Self.bob, device: UUID())
        let dave = try await b2.session(Self.dave, device: UUID())
        let channel = try await ChannelTests.create(alice, "bridge")
        try await ChannelsAcrossPeersTests.holds(b1, channel)
        // Bob joins through B2 (the shared store holds it; A need not know to send).
        _ = try await ChannelTests.join(bob, channel)

        // Alice's message reaches node B1 from its peer; B1 tells B2, whose member bob gets it live.
        let received = b2.server.engine.sharedChannelNoticeCounts.received
        let (first, _) = try await ChannelTests.send(alice, channel, "across")
        let live = try await ChannelsAcrossPeersTests.live(bob, first)
        guard case .channelMessage(let m) = live.event else { return }
        #expect(live.seq == 0 && ChannelTests.text(m) == "across")
        #expect(b2.server.engine.sharedChannelNoticeCounts.received > received)

        // Dave is added on node A (its Server API): B2's member list, held since the last
        // message, learns it from B1, so A's next message reaches dave on B2 live.
        let api = CurlAPI(a.server, http: .http2)
        let added = try await api.request("PUT", "/channels/\(channel.uuid.uuidString.lowercased())/members/dave")
        #expect(added.status == 204, "\(added.body)")
        try await ChannelsAcrossPeersTests.members(of: channel, on: b2, are: [Self.alice, Self.bob, Self.dave])
        // (B1's notices reach B2 in the order B1 sent them: the join before the next message.)
        let (second, _) = try await ChannelTests.send(alice, channel, "to dave too")
        _ = try await ChannelsAcrossPeersTests.live(dave, second)
        _ = try await ChannelsAcrossPeersTests.live(bob, second)

        for client in [alice, bob, dave] { await client.close() }
        await b2.stop()
        await b1.stop()
        await a.stop()
    }
}
