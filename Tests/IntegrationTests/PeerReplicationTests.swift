import Foundation
import LaminaClient
import LaminaLocalNode
import LaminaMerge
import LaminaModel
import LaminaNode
import LaminaTransport
import LaminaWire
import Testing

/// Two real nodes peering over mutual TLS + HTTP/2 on loopback (SPEC §6.5): users on
/// different nodes talk through the SDK as if on one node, and bad peers are refused with
/// their code while the good link keeps working.
@Suite struct PeerReplicationTests {
    static let nodeA = NodeID(0xA1)
    static let nodeB = NodeID(0xB2)

    /// Node A (listening for peers) and node B (dialing A), certificates from one dev CA.
    static func cluster(_ name: String) async throws -> (a: TestNode, b: TestNode, certificates: URL) {
        let certificates = Fixtures.temporaryDirectory("\(name)-certs")
        let a = try await TestNode.start("\(name)-a") { c in
            c.nodeID = nodeA.rawValue
            c.adminPort = 0
            c.peers = try! DevelopmentCluster.settings(for: nodeA, port: 0, peers: [], in: certificates)
        }
        let aPeers = "https://127.0.0.1:\(a.server.peers!.transport.port)"
        let b = try await TestNode.start("\(name)-b") { c in
            c.nodeID = nodeB.rawValue
            c.peers = try! DevelopmentCluster.settings(for: nodeB, port: 0, peers: [aPeers], in: certificates)
        }
        return (a, b, certificates)
    }

    @Test func usersOnTwoNodesTalkThroughTheSDK() async throws {
        let (a, b, _) = try await Self.cluster("peer-chat")
        let alice = try ClientHarness.device("alice", on: a)
        let bob = try ClientHarness.device("bob", on: b)
        try await ClientHarness.connect(alice, on: a)
        try await ClientHarness.connect(bob, on: b)

        let conversation = try alice.newConversation(participants: ["bob"]).id
        let hello = try alice.send(
            alice.newMessage(parts: [MessagePart.with(text: "hello from node a")]), in: conversation
        ).id
        let received = try await bob.waitForCreation(of: hello, timeout: .seconds(30))
        #expect(received.message.conversationID == conversation)

        let reply = try bob.send(bob.newMessage(parts: [MessagePart.with(text: "hi from node b")]), in: conversation).id
        _ = try await alice.waitForCreation(of: reply, timeout: .seconds(30))
        // Bob's own copy gets its position with the node's ACK, which may come after Alice has it.
        try await ClientHarness.waitUntil(bob, "the reply acknowledged to Bob") { try bob.isSent(reply) }
        // Positions are assigned where a message is accepted and are the same on both nodes.
        #expect(try alice.message(reply)?.message.position == bob.message(reply)?.message.position)
        #expect(try alice.message(hello)?.message.position == bob.message(hello)?.message.position)

        // Reads flow back to the sender's node.
        try bob.markAllMessagesAsRead(in: conversation)
        try await ClientHarness.waitUntil(alice, "bob's read at alice") {
            try alice.message(hello)?.message.recipientStatus["bob"] == .read
        }
        #expect(a.server.peers?.links[Self.nodeB] != nil)
        #expect(b.server.peers?.links[Self.nodeA] != nil)

        // The admin port shows the link, the lag (none once B acknowledged everything) and the
        // vector; /replication the same digest on both nodes.
        let admin = try #require(a.server.admin).port
        var metrics = ""
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            metrics = try await HTTPGet.fetch(port: admin, path: "/metrics").body
            if metrics.contains("lamina_peer_lag_operations{peer=\"b2\"} 0.0") { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(metrics.contains("lamina_peer_links 1.0"))
        #expect(
            metrics.contains("lamina_peer_lag_operations{peer=\"b2\"} 0.0"),
            "\(metrics.split(separator: "\n").filter { $0.contains("peer") })")
        #expect(metrics.contains("lamina_replication_counter{origin=\"a1\"}"))
        #expect(try await Self.converged([a, b], within: .seconds(30)))
        let replication = try await HTTPGet.fetch(port: admin, path: "/replication").body
        #expect(replication.contains(try await a.server.engine.convergenceDigest().overall))

        try await alice.close()
        try await bob.close()
        await b.stop()
        await a.stop()
    }

    /// WELCOME names the node's cluster: a client configured for another cluster is told so
    /// (`wrong-cluster`, naming both) and stops; one configured for this cluster syncs.
    @Test func aClientConfiguredForAnotherClusterIsToldSo() async throws {
        let (a, b, _) = try await Self.cluster("peer-cluster-name")
        let stray = try ClientHarness.device("alice", on: a) { $0.cluster = "another-cluster" }
        let events = Recorder(stray.syncEvents)
        try await ClientHarness.connect(stray, on: a)
        try await events.wait("the wrong-cluster failure", timeout: .seconds(30)) { events in
            events.contains { if case .failed(let e) = $0 { e.code == .wrongCluster } else { false } }
        }
        let failure = events.all.compactMap { if case .failed(let e) = $0 { e } else { nil } }.first
        #expect(
            failure?.reason.contains("\"lamina\"") == true && failure?.reason.contains("\"another-cluster\"") == true,
            "\(String(describing: failure))")
        #expect(!events.all.contains(.state(.live)))

        let member = try ClientHarness.device("bob", on: b) { $0.cluster = "lamina" }
        _ = try await ClientHarness.connectLive(member, on: b)
        try await stray.close()
        try await member.close()
        await b.stop()
        await a.stop()
    }

    /// A peer sends an operation on a conversation node A has never held (its creation comes
    /// later): A parks it and acknowledges it, the session goes on, and once the creation
    /// arrives the parked operation applies, here and on node B.
    @Test func anOperationOnAConversationNeverHeldKeepsThePeerSessionGoing() async throws {
        let (a, b, certificates) = try await Self.cluster("peer-parked")
        let nodeC = NodeID(0xC3)
        let peer = try await Self.rawPeer(to: a, as: nodeC, certificates: certificates)
        peer.send(.peerHello(PeerHello(nodeID: nodeC, cluster: "lamina")), .versionVector(VersionVector()))
        /// Waits for A's PEER_ACK that holds `counter` of node C (fails on an ERROR).
        func acknowledged(_ counter: UInt64) async throws -> Bool {
            while true {
                switch try await peer.nextFrame() {
                case .peerAck(let ack) where ack.vector[nodeC] >= counter: return true
                case .error(let error):
                    Issue.record("node A refused: \(error.code.name) \(error.reason)")
                    return false
                default: continue
                }
            }
        }
        let conversation = ConversationID.random()
        let now = UInt64(Timestamp.now().millisecondsSince1970)
        let title = try MetadataKeyPath(["title"])
        // An origin's readings grow with its counters (SPEC §6.5), whatever the operations name.
        let early = ReplicatedOperation(
            origin: nodeC, counter: 1, hlc: HLCTimestamp(physical: now, logical: 0, node: nodeC),
            event: .metadataChanged(
                MetadataChanged(
                    conversationID: conversation, keyPath: title, value: .string("set before the creation arrived"),
                    by: "carol", at: HLCTimestamp(physical: now, logical: 0, node: nodeC))))
        peer.send(.replicate(Replicate(operations: [early])))
        #expect(try await acknowledged(1))
        #expect(try await a.server.store.read { r in try r.parkedOperationCount() } == 1)

        let creation = ReplicatedOperation(
            origin: nodeC, counter: 2, hlc: HLCTimestamp(physical: now, logical: 1, node: nodeC),
            event: .conversationCreated(
                Conversation(
                    id: conversation, participants: ["carol", "alice"], isDistinct: false, metadata: [:],
                    deliveryReceiptsEnabled: true,
                    createdAt: Timestamp(millisecondsSince1970: Int64(now)), creator: "carol")))
        peer.send(.replicate(Replicate(operations: [creation])))
        #expect(try await acknowledged(2))
        #expect(try await a.server.store.read { r in try r.parkedOperationCount() } == 0)
        for node in [a, b] {
            let deadline = ContinuousClock.now + .seconds(30)
            var value: MetadataValue?
            while value == nil, ContinuousClock.now < deadline {
                value = try await node.server.store.read { r in
                    try r.conversation(conversation) != nil ? try r.metadata(of: conversation).values["title"] : nil
                }
                if value == nil { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(value == .string("set before the creation arrived"))
        }
        #expect(try await Self.converged([a, b], within: .seconds(30)))
        await peer.close()
        await b.stop()
        await a.stop()
    }

    /// A peer stream opened with a certificate of the cluster's CA for node C.
    static func rawPeer(to node: TestNode, as certified: NodeID, certificates: URL) async throws -> SyncTestClient {
        let files = try DevelopmentCluster.nodeCertificate(for: certified, in: certificates)
        let ca = try DevelopmentCluster.certificateAuthority(in: certificates).certificate
        let tls = try TLSContext(
            .client(trust: .caFile(ca), certificateChainFile: files.certificate, privateKeyFile: files.key))
        return try await SyncTestClient.connect(
            url: "https://127.0.0.1:\(node.server.peers!.transport.port)", caFile: ca, path: PeerService.path, tls: tls)
    }

    /// The code of the fatal ERROR that ends the stream (nil when it ends without one).
    static func fatalCode(_ client: SyncTestClient) async throws -> WireError.Code? {
        for frame in try await client.framesUntilEnd() {
            if case .error(let error) = frame, error.isFatal { return error.code }
        }
        return nil
    }

    @Test func badPeersAreRefusedWithTheirCodeAndTheLinkKeepsWorking() async throws {
        let (a, b, certificates) = try await Self.cluster("peer-bad")
        let nodeC = NodeID(0xC3)

        // Another cluster's name.
        let otherCluster = try await Self.rawPeer(to: a, as: nodeC, certificates: certificates)
        otherCluster.send(.peerHello(PeerHello(nodeID: nodeC, cluster: "another-cluster")))
        #expect(try await Self.fatalCode(otherCluster) == .forbidden)

        // A node id its certificate does not name.
        let impostor = try await Self.rawPeer(to: a, as: nodeC, certificates: certificates)
        impostor.send(.peerHello(PeerHello(nodeID: Self.nodeB, cluster: "lamina")))
        #expect(try await Self.fatalCode(impostor) == .forbidden)

        // A client frame on a peer stream.
        let confused = try await Self.rawPeer(to: a, as: nodeC, certificates: certificates)
        confused.send(.hello(Hello(agent: "not a peer")))
        #expect(try await Self.fatalCode(confused) == .unexpectedFrame)

        // A gap in an origin's counters.
        let gappy = try await Self.rawPeer(to: a, as: nodeC, certificates: certificates)
        gappy.send(.peerHello(PeerHello(nodeID: nodeC, cluster: "lamina")), .versionVector(VersionVector()))
        let stray = ReplicatedOperation(
            origin: nodeC, counter: 5, hlc: HLCTimestamp(physical: 1_000, logical: 0, node: nodeC),
            event: .statusUpTo(
                StatusUpTo(
                    conversationID: .random(), user: "x", status: .read,
                    upTo: HLCTimestamp(physical: 1, logical: 0, node: nodeC))))
        gappy.send(.replicate(Replicate(operations: [stray])))
        #expect(try await Self.fatalCode(gappy) == .invalidArgument)

        // No certificate at all: the peer listener fails the handshake (with TLS 1.3 the
        // client learns it at its first read), so no frame ever arrives.
        do {
            let anonymous = try await SyncTestClient.connect(
                url: "https://127.0.0.1:\(a.server.peers!.transport.port)",
                caFile: try DevelopmentCluster.certificateAuthority(in: certificates).certificate,
                path: PeerService.path)
            anonymous.send(.peerHello(PeerHello(nodeID: nodeC, cluster: "lamina")))
            await #expect(throws: (any Error).self) { _ = try await anonymous.nextFrame() }
            await anonymous.close()
        } catch {
            // Refused before the stream opened: as good.
        }

        // The real link still carries messages.
        let alice = try ClientHarness.device("alice", on: a)
        let bob = try ClientHarness.device("bob", on: b)
        try await ClientHarness.connect(alice, on: a)
        try await ClientHarness.connect(bob, on: b)
        let conversation = try bob.newConversation(participants: ["alice"]).id
        let sent = try bob.send(bob.newMessage(parts: [MessagePart.with(text: "still here")]), in: conversation).id
        _ = try await alice.waitForCreation(of: sent, timeout: .seconds(30))

        for client in [otherCluster, impostor, confused, gappy] { await client.close() }
        try await alice.close()
        try await bob.close()
        await b.stop()
        await a.stop()
    }

    /// Polls until every node's convergence digest is the same (or `timeout` passes).
    static func converged(_ nodes: [TestNode], within timeout: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            var digests = Set<String>()
            for node in nodes { digests.insert(try await node.server.engine.convergenceDigest().overall) }
            if digests.count == 1 { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Three nodes (B and C dial A through proxies that can be cut): a partition leaves every
    /// node taking sends; after the links heal, every node converges, every
    /// acknowledged message is there once, the distinct conversations created on all three
    /// sides of the cut are one everywhere (and every device follows it), a distinct
    /// conversation that lost its distinctness on one side merges with the one created
    /// concurrently on another, and a device on C holds what was sent through A and B.
    @Test func threeNodesConvergeAfterAPartitionHeals() async throws {
        let certificates = Fixtures.temporaryDirectory("peer-partition-certs")
        let nodeC = NodeID(0xC3)
        func fast(_ settings: inout PeerSettings) {
            settings.reconnectMinimumMilliseconds = 20
            settings.reconnectMaximumMilliseconds = 200
        }
        let a = try await TestNode.start("peer-partition-a") { c in
            c.nodeID = Self.nodeA.rawValue
            c.peers = try! DevelopmentCluster.settings(for: Self.nodeA, port: 0, peers: [], in: certificates)
        }
        let toA = a.server.peers!.transport.port
        let proxyB = try await TCPProxy.start(to: toA)
        let proxyC = try await TCPProxy.start(to: toA)
        let b = try await TestNode.start("peer-partition-b") { c in
            c.nodeID = Self.nodeB.rawValue
            c.peers = try! DevelopmentCluster.settings(
                for: Self.nodeB, port: 0, peers: ["https://127.0.0.1:\(proxyB.port)"], in: certificates)
            fast(&c.peers)
        }
        let c = try await TestNode.start("peer-partition-c") { c in
            c.nodeID = nodeC.rawValue
            c.peers = try! DevelopmentCluster.settings(
                for: nodeC, port: 0, peers: ["https://127.0.0.1:\(proxyC.port)"], in: certificates)
            fast(&c.peers)
        }
        let alice = try ClientHarness.device("alice", on: a)
        let bob = try ClientHarness.device("bob", on: b)
        let carol = try ClientHarness.device("carol", on: c)
        let bobOnC = try ClientHarness.device("bob", on: c)
        for (client, node) in [(alice, a), (bob, b), (carol, c), (bobOnC, c)] {
            try await ClientHarness.connect(client, on: node)
        }

        let group = try alice.newConversation(
            participants: ["bob", "carol"], options: ConversationOptions(isDistinct: false)
        ).id
        func say(_ client: LaminaClient, _ text: String, in conversation: ConversationID) throws -> MessageID {
            try client.send(client.newMessage(parts: [MessagePart.with(text: text)]), in: conversation).id
        }
        let first = try say(alice, "before the cut", in: group)
        _ = try await bob.waitForCreation(of: first, timeout: .seconds(30))
        _ = try await carol.waitForCreation(of: first, timeout: .seconds(30))

        proxyB.cut()
        proxyC.cut()
        // Each side of the cut keeps taking sends (acknowledged by its own node).
        let distinctOnA = try alice.newConversation(participants: ["bob"]).id
        let distinctOnB = try bob.newConversation(participants: ["alice"]).id
        let distinctOnC = try bobOnC.newConversation(participants: ["alice"]).id
        // Alice's distinct conversation with carol stops being distinct on A while carol creates
        // one with her on C.
        let carolOnA = try alice.newConversation(participants: ["carol"]).id
        let aliceOnC = try carol.newConversation(participants: ["alice"]).id
        let sent = [
            first, try say(alice, "a alone", in: group), try say(bob, "b alone", in: group),
            try say(carol, "c alone", in: group),
            try say(alice, "a's distinct", in: distinctOnA), try say(bob, "b's distinct", in: distinctOnB),
            try say(bobOnC, "c's distinct", in: distinctOnC), try say(alice, "to carol on a", in: carolOnA),
            try say(carol, "to alice on c", in: aliceOnC),
        ]
        try alice.addParticipants(["dave"], to: carolOnA)
        for (client, id) in [
            (alice, sent[1]), (bob, sent[2]), (carol, sent[3]), (alice, sent[4]), (bob, sent[5]), (bobOnC, sent[6]),
            (alice, sent[7]), (carol, sent[8]),
        ] {
            try await ClientHarness.waitUntil(client, "the node's ACK") { try client.isSent(id) }
        }
        let daveDeadline = ContinuousClock.now + .seconds(60)
        while try await !a.server.store.read({ r in try r.participants(of: carolOnA) }).contains("dave") {
            guard ContinuousClock.now < daveDeadline else {
                Issue.record("dave's addition never reached node A")
                break
            }
            try await Task.sleep(for: .milliseconds(50))
        }

        proxyB.heal()
        proxyC.heal()
        // Correctness here (a loaded test run is slow); the time to converge is a figure for
        // the bench on a quiet machine (issue 14 asks for 5 s).
        let healed = ContinuousClock.now
        let converged = try await Self.converged([a, b, c], within: .seconds(60))
        #expect(converged, "digests still differ \(ContinuousClock.now - healed) after healing")
        print("three nodes converged \(ContinuousClock.now - healed) after the links healed")

        // Every acknowledged message once on every node.
        for node in [a, b, c] {
            let ids = try await node.server.store.read { r -> [MessageID] in
                var out: [MessageID] = []
                for id in sent { if let m = try r.message(id) { out.append(m.message.id) } }
                return out
            }
            #expect(ids == sent)
        }
        // One distinct conversation of alice and bob on every node.
        let survivors = try await [a, b, c].asyncMap { node in
            try await node.server.store.read { r in
                try r.distinctConversation(participants: ["alice", "bob"])?.conversation.id
            }
        }
        #expect(Set(survivors).count == 1 && survivors[0] != nil)
        for node in [a, b, c] {
            let targets = try await node.server.store.read { r in
                try [distinctOnA, distinctOnB, distinctOnC].map { try r.resolvedConversation($0) ?? $0 }
            }
            #expect(Set(targets) == [survivors[0]!])
        }
        // Alice's and carol's two conversations are one on every node: not distinct, dave in it.
        let carolPair = try await [a, b, c].asyncMap { node in
            try await node.server.store.read { r in
                try [carolOnA, aliceOnC].map { try r.resolvedConversation($0) ?? $0 }
            }
        }
        #expect(Set(carolPair.flatMap { $0 }).count == 1)
        let merged = try await a.server.store.read { r in try r.conversation(carolPair[0][0]) }
        #expect(
            merged?.conversation.isDistinct == false && merged?.conversation.participants == ["alice", "carol", "dave"])
        // Carol's device (on C) holds what was sent through A and B.
        for id in sent[0...3] { _ = try await carol.waitForCreation(of: id, timeout: .seconds(30)) }
        // Every device follows the merges to the same conversations.
        if let survivor = survivors[0] {
            for (client, name) in [(alice, "alice"), (bob, "bob"), (bobOnC, "bob on c")] {
                for id in sent[4...6] {
                    _ = try await client.waitForCreation(of: id, timeout: .seconds(30))
                    try await ClientHarness.waitUntil(client, "\(name)'s device on the survivor") {
                        try client.message(id)?.message.conversationID == survivor
                    }
                }
            }
        }
        for client in [alice, carol] {
            for id in sent[7...8] {
                _ = try await client.waitForCreation(of: id, timeout: .seconds(30))
                try await ClientHarness.waitUntil(client, "\(client.user)'s device on alice and carol's conversation") {
                    try client.message(id)?.message.conversationID == carolPair[0][0]
                }
            }
        }

        for client in [alice, bob, carol, bobOnC] { try await client.close() }
        await c.stop()
        await b.stop()
        await a.stop()
        await proxyB.stop()
        await proxyC.stop()
    }

    /// The JSON of a node's `/replication` (vector and digest).
    static func replication(_ adminPort: Int) async throws -> (vector: [String: UInt64], digest: String) {
        let body = try await HTTPGet.fetch(port: adminPort, path: "/replication").body
        guard let object = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any],
            let vector = object["vector"] as? [String: Any], let digest = object["digest"] as? String
        else {
            throw SyncTestTimeout(waitingFor: "a /replication document, got \(body)")
        }
        return (vector.compactMapValues { ($0 as? NSNumber)?.uint64Value }, digest)
    }

    /// Node B, a process, is killed with SIGKILL while it takes 3,000 operations from node A;
    /// started again on its data directory it resumes from its version vector: in the end it
    /// holds every message once (its user's feed has each exactly once) and the same digest.
    @Test func aPeerKilledDuringReplicationResumesWithNothingLostOrTwice() async throws {
        let certificates = Fixtures.temporaryDirectory("peer-kill-certs")
        let a = try await TestNode.start("peer-kill-a") { c in
            c.nodeID = Self.nodeA.rawValue
            c.adminPort = 0
            c.peers = try! DevelopmentCluster.settings(for: Self.nodeA, port: 0, peers: [], in: certificates)
        }
        let bFiles = try DevelopmentCluster.nodeCertificate(for: Self.nodeB, in: certificates)
        let ca = try DevelopmentCluster.certificateAuthority(in: certificates).certificate
        let bArguments = [
            "--node-id", String(Self.nodeB.rawValue, radix: 16), "--peer-listen", "127.0.0.1:0", "--cluster", "lamina",
            "--peer", "https://127.0.0.1:\(a.server.peers!.transport.port)", "--peer-ca", ca,
            "--peer-certificate", bFiles.certificate, "--peer-key", bFiles.key,
        ]
        let bDirectory = Fixtures.temporaryDirectory("peer-kill-b")

        // Alice sends 3,000 messages to bob on A (pipelined), all acknowledged before B exists.
        let alice = try await a.session("alice", device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: ["alice", "bob"])
        let ids = (0..<3_000).map { _ in MessageID.random() }
        for chunk in stride(from: 0, to: ids.count, by: 100) {
            let part = try MessagePart.with(text: "m")
            let frames = ids[chunk..<min(chunk + 100, ids.count)].map {
                Frame.sendMessage(SendMessage(messageID: $0, conversationID: conversation, parts: [part]))
            }
            alice.send(frames)
            for id in ids[chunk..<min(chunk + 100, ids.count)] { _ = try await alice.answer(to: id.uuid) }
        }
        let total = try await a.server.engine.versionVector()[Self.nodeA]

        var b = try await NodeProcess.start(in: bDirectory, arguments: bArguments)
        // Kill B once it holds part of A's log, not all of it.
        let deadline = ContinuousClock.now + .seconds(60)
        var heldAtKill: UInt64 = 0
        while ContinuousClock.now < deadline {
            heldAtKill = try await Self.replication(b.adminPort).vector["a1"] ?? 0
            if heldAtKill > 0 { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(try await b.stop(with: SIGKILL) == SIGKILL)
        #expect(heldAtKill > 0 && heldAtKill < total, "B held \(heldAtKill) of \(total) when killed")

        b = try await NodeProcess.start(in: bDirectory, arguments: bArguments)
        let expected = try await a.server.engine.convergenceDigest().overall
        var digest = ""
        while ContinuousClock.now < deadline + .seconds(60) {
            digest = try await Self.replication(b.adminPort).digest
            if digest == expected { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(digest == expected)

        // Bob's feed on B has every message exactly once.
        let dev = try DevIdentityProvider.loadOrCreate(
            in: b.dataDirectory.appendingPathComponent(NodeBootstrap.Files.devIdentity))
        let bob = try await SyncTestClient.connect(
            url: "https://127.0.0.1:\(b.syncPort)",
            caFile: b.dataDirectory.appendingPathComponent(NodeBootstrap.Files.certificate).path)
        _ = try await bob.hello()
        _ = try await bob.authenticate(user: "bob", device: UUID(), dev: dev)
        let (changes, _) = try await bob.sync(from: 0)
        var received: [MessageID] = []
        for change in changes { if case .messageCreated(let m) = change.event { received.append(m.id) } }
        #expect(received.count == ids.count)
        #expect(Set(received) == Set(ids))

        await bob.close()
        await alice.close()
        _ = try await b.stop()
        await a.stop()
    }
    /// A device that moves to another node of the cluster syncs that node's feed from its
    /// start (a cursor counts in one node's feed): during a partition bob's device holds five
    /// messages from B, moves to A, whose feed of bob is shorter and ordered otherwise, and ends
    /// with everything A holds, and after healing with everything.
    @Test func aDeviceMovingToAnotherNodeSyncsThatNodesFeed() async throws {
        let certificates = Fixtures.temporaryDirectory("peer-move-certs")
        // Both nodes serve clients with certificates of the cluster's CA, which the device trusts.
        let ca = try DevelopmentCluster.certificateAuthority(in: certificates).certificate
        let a = try await TestNode.start("peer-move-a") { c in
            c.nodeID = Self.nodeA.rawValue
            c.peers = try! DevelopmentCluster.settings(for: Self.nodeA, port: 0, peers: [], in: certificates)
            (c.certificatePath, c.privateKeyPath) = (c.peers.certificateFile, c.peers.keyFile)
        }
        let proxy = try await TCPProxy.start(to: a.server.peers!.transport.port)
        let b = try await TestNode.start("peer-move-b") { c in
            c.nodeID = Self.nodeB.rawValue
            c.peers = try! DevelopmentCluster.settings(
                for: Self.nodeB, port: 0, peers: ["https://127.0.0.1:\(proxy.port)"], in: certificates)
            c.peers.reconnectMinimumMilliseconds = 20
            c.peers.reconnectMaximumMilliseconds = 200
            (c.certificatePath, c.privateKeyPath) = (c.peers.certificateFile, c.peers.keyFile)
        }
        let store = Fixtures.temporaryDirectory("peer-move-bob")
        func device(_ user: UserID, on node: TestNode, store: URL? = nil) throws -> LaminaClient {
            try ClientHarness.device(user, on: node) { c in
                if let store { c.dataDirectory = store }
                c.trust = .certificateAuthorities(URL(fileURLWithPath: ca))
            }
        }
        func bobDevice(on node: TestNode) throws -> LaminaClient { try device("bob", on: node, store: store) }
        let alice = try device("alice", on: a)
        let carol = try device("carol", on: b)
        try await ClientHarness.connect(alice, on: a)
        try await ClientHarness.connect(carol, on: b)
        var bob = try bobDevice(on: b)
        try await ClientHarness.connect(bob, on: b)

        proxy.cut()
        let fromCarol = try carol.newConversation(participants: ["bob"]).id
        var carolSent: [MessageID] = []
        for i in 0..<5 {
            carolSent.append(
                try carol.send(carol.newMessage(parts: [MessagePart.with(text: "c\(i)")]), in: fromCarol).id)
        }
        for id in carolSent { _ = try await bob.waitForCreation(of: id, timeout: .seconds(30)) }
        let fromAlice = try alice.newConversation(participants: ["bob"]).id
        let aliceSent = try (0..<2).map {
            try alice.send(alice.newMessage(parts: [MessagePart.with(text: "a\($0)")]), in: fromAlice).id
        }
        for id in aliceSent {
            try await ClientHarness.waitUntil(alice, "alice's send acknowledged") { try alice.isSent(id) }
        }
        try await bob.close()

        // The same device (same store) now on node A, still cut off from B.
        bob = try bobDevice(on: a)
        try await ClientHarness.connect(bob, on: a)
        for id in aliceSent { _ = try await bob.waitForCreation(of: id, timeout: .seconds(30)) }
        #expect(try carolSent.allSatisfy { try bob.message($0) != nil }, "what the device held from B stays")

        proxy.heal()
        #expect(try await Self.converged([a, b], within: .seconds(60)))
        for client in [alice, carol, bob] { try await client.close() }
        await b.stop()
        await a.stop()
        await proxy.stop()
    }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for element in self { out.append(try await transform(element)) }
        return out
    }
}
