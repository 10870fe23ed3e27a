import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaTestPostgres
import LaminaWire
import Testing

/// Operations committed by a node sharing a PostgreSQL with a node that has a peer link, but
/// without one of its own (SPEC §6.5 with POSTGRES.md's "Several nodes"): they are in the store's
/// operation log, and the linked node ships them to its peer as soon as they are committed, not
/// at its own next command, also when they advance no feed. Node A (SQLite) peers with B1; B2
/// shares B1's store and has no link.
@Suite struct PeerOfSharedStoreTests {
    /// Node A (SQLite, listening for peers), B1 on a fresh PostgreSQL database dialing A, and B2
    /// on the same database with no peer link.
    static func nodes(_ name: String) async throws -> (a: TestNode, b1: TestNode, b2: TestNode) {
        let database = try PostgresTestCluster.newDatabase()
        let certificates = Fixtures.temporaryDirectory("\(name)-certs")
        let nodeA = PeerReplicationTests.nodeA
        let nodeB = PeerReplicationTests.nodeB
        let a = try await TestNode.start("\(name)-a") { c in
            c.nodeID = nodeA.rawValue
            c.adminPort = 0
            c.peers = try! DevelopmentCluster.settings(for: nodeA, port: 0, peers: [], in: certificates)
        }
        let aPeers = "https://127.0.0.1:\(a.server.peers!.transport.port)"
        let b1 = try await SharedPostgresNodesTests.node("\(name)-b1", on: database) { c in
            c.nodeID = nodeB.rawValue
            c.peers = try! DevelopmentCluster.settings(for: nodeB, port: 0, peers: [aPeers], in: certificates)
        }
        let b2 = try await SharedPostgresNodesTests.node("\(name)-b2", on: database, trusting: b1)
        return (a, b1, b2)
    }

    @Test func whatTheUnlinkedNodeCommitsReachesThePeerWithoutTheLinkedNodesHelp() async throws {
        let (a, b1, b2) = try await Self.nodes("pg-peer-shared")

        // A channel of alice's (on A) reaches the store of B1 and B2; bob joins it through B2.
        let alice = try await a.session("alice", device: UUID())
        let bob = try await b2.session("bob", device: UUID())
        let channel = try await ChannelTests.create(alice, "bridge")
        try await ChannelsAcrossPeersTests.holds(b1, channel)
        _ = try await ChannelTests.join(bob, channel)
        // Nothing happens on B1 from here on: B2's join reaches A through B1's link by itself.
        try await ChannelsAcrossPeersTests.members(of: channel, on: a, are: ["alice", "bob"])
        let (fromB2, _) = try await ChannelTests.send(bob, channel, "from b2")
        let live = try await ChannelsAcrossPeersTests.live(alice, fromB2)
        guard case .channelMessage(let m) = live.event else { return }
        #expect(ChannelTests.text(m) == "from b2")

        // A conversation created and written to through B2 (the SDK): A holds both and alice's
        // device on A gets the message.
        let carol = try ClientHarness.device("carol", on: b2)
        let dave = try ClientHarness.device("dave", on: a)
        try await ClientHarness.connect(carol, on: b2)
        try await ClientHarness.connect(dave, on: a)
        let conversation = try carol.newConversation(participants: ["dave"]).id
        let sent = try carol.send(carol.newMessage(parts: [MessagePart.with(text: "via b2")]), in: conversation).id
        let received = try await dave.waitForCreation(of: sent, timeout: .seconds(30))
        #expect(received.message.conversationID == conversation)
        try await ResourceLimitTests.eventuallyAsync("node A to hold carol's message") {
            (try? await a.server.store.read { r in try r.message(sent) }) != nil
        }

        // A suspension set through B2's Server API: an operation that advances no feed (erin has
        // no conversation and no session), announced all the same, so B1 ships it to A.
        let suspend = try await CurlAPI(b2.server, http: .http2).request(
            "PATCH", "/users/erin", json: #"[{"operation":"set","property":"suspended","value":true}]"#,
            contentType: "application/vnd.layer-patch+json")
        #expect(suspend.status == 204, "\(suspend.body)")
        try await ResourceLimitTests.eventuallyAsync("node A to hold erin's suspension") {
            (try? await a.server.store.read { r in try r.isSuspended("erin") }) == true
        }

        for client in [carol, dave] { try await client.close() }
        for client in [alice, bob] { await client.close() }
        await b2.stop()
        await b1.stop()
        await a.stop()
    }
}
