import Foundation
import LaminaModel
import LaminaTransport
import NIOCore
import NIOPosix
import Testing

@testable import LaminaClient
@testable import LaminaNode

/// Rich content across peer nodes (CONTENT.md §9): content uploaded through one node is fetched
/// by the peers that replicate its message, so a recipient on another node downloads it through
/// the SDK's normal path, and keeps doing so once the uploader's node is gone.
@Suite struct PeerContentTests {
    @Test func contentUploadedOnOneNodeDownloadsOnAnother() async throws {
        let (a, b, _) = try await PeerReplicationTests.cluster("peer-content")
        let alice = try ClientHarness.device("alice", on: a)
        let bob = try ClientHarness.device("bob", on: b)
        try await ClientHarness.connect(alice, on: a)
        try await ClientHarness.connect(bob, on: b)

        let conversation = try alice.newConversation(
            participants: ["bob"], options: ConversationOptions(isDistinct: false)
        ).id
        // Over 2 KB, so rich content; a few chunks of the node's download path.
        let small = RichContentTests.bytes(3_000, seed: 5)
        let large = RichContentTests.bytes(3 << 20, seed: 11)
        let (smallPart, smallReference) = try RichContentTests.richPart("application/octet-stream", small, by: alice)
        let (largePart, largeReference) = try RichContentTests.richPart("application/octet-stream", large, by: alice)
        let sent = try alice.send(alice.newMessage(parts: [smallPart, largePart]), in: conversation)
        try await ClientHarness.waitUntil(alice, "alice's message to be sent", timeout: .seconds(60)) {
            try alice.isSent(sent.id)
        }

        let received = try await bob.waitForCreation(of: sent.id, timeout: .seconds(60))
        #expect(received.message.parts.map(\.content) == [.external(smallReference), .external(largeReference)])
        // The download through B right away: B fetches from A (the download waits for it).
        let smallFile = try await bob.downloadedContent(of: received.message.identifier(of: received.message.parts[0]))
        #expect(try Data(contentsOf: smallFile) == small)

        // B fetched both by itself, verified, and holds them complete.
        let deadline = ContinuousClock.now + .seconds(60)
        func heldOnB() async throws -> Bool {
            try await b.server.store.read { r in
                try [smallReference.id, largeReference.id].allSatisfy { try r.upload($0)?.state == .complete }
            }
        }
        while try await !heldOnB(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(try await heldOnB())
        #expect(try await b.server.store.read { r in try r.upload(largeReference.id)?.owner } == "alice")

        // A goes away: the content stays available on B (replicated, not borrowed).
        try await alice.close()
        await a.stop()
        let largeFile = try await bob.downloadedContent(of: received.message.identifier(of: received.message.parts[1]))
        #expect(try Data(contentsOf: largeFile) == large)

        try await bob.close()
        await b.stop()
    }

    /// The node that only accepts peer links (A dials no one) fetches content uploaded on the
    /// node that dialed it: B names its peer listener when it dials, and A asks it.
    @Test func theAcceptingNodeFetchesContentUploadedOnTheNodeThatDialedIt() async throws {
        let (a, b, _) = try await PeerReplicationTests.cluster("peer-content-accepting")
        let alice = try ClientHarness.device("alice", on: a)
        let bob = try ClientHarness.device("bob", on: b)
        try await ClientHarness.connect(alice, on: a)
        try await ClientHarness.connect(bob, on: b)

        let conversation = try bob.newConversation(
            participants: ["alice"], options: ConversationOptions(isDistinct: false)
        ).id
        let data = RichContentTests.bytes(40_000, seed: 41)
        let (part, reference) = try RichContentTests.richPart("application/octet-stream", data, by: bob)
        let sent = try bob.send(bob.newMessage(parts: [part]), in: conversation)
        try await ClientHarness.waitUntil(bob, "bob's message to be sent", timeout: .seconds(60)) {
            try bob.isSent(sent.id)
        }

        let received = try await alice.waitForCreation(of: sent.id, timeout: .seconds(60))
        #expect(received.message.parts.map(\.content) == [.external(reference)])
        let file = try await alice.downloadedContent(of: received.message.identifier(of: received.message.parts[0]))
        #expect(try Data(contentsOf: file) == data)
        #expect(try await a.server.store.read { r in try r.upload(reference.id)?.state } == .complete)
        #expect(a.server.peers?.contentFetched == 1)
        // A learned B's listener from B's request (A's configuration names no peer).
        let sources = a.server.peers?.contentSources(origin: PeerReplicationTests.nodeB) ?? []
        #expect(sources == ["https://127.0.0.1:\(b.server.peers!.transport.port)"], "\(sources)")

        try await alice.close()
        try await bob.close()
        await b.stop()
        await a.stop()
    }

    /// A fetch cut part way (as by a lost connection) keeps the bytes it made durable and the
    /// next attempt asks the peer for the rest only (`range: bytes=<held>-`); the content is
    /// whole and verified at the end.
    @Test func aFetchCutPartWayResumesFromTheBytesHeld() async throws {
        let (a, b, _) = try await PeerReplicationTests.cluster("peer-content-resume")
        let fetcher = try #require(b.server.peers?.contentFetcher)
        let cuts = Counter()
        fetcher.testHooks.withLockedValue { hooks in
            hooks.afterChunk = { _, held in
                guard held >= 1 << 20, cuts.value == 0 else { return true }
                cuts.increment()
                return false
            }
        }
        let alice = try ClientHarness.device("alice", on: a)
        let bob = try ClientHarness.device("bob", on: b)
        try await ClientHarness.connect(alice, on: a)
        try await ClientHarness.connect(bob, on: b)
        let conversation = try alice.newConversation(
            participants: ["bob"], options: ConversationOptions(isDistinct: false)
        ).id
        let data = RichContentTests.bytes(5 << 20, seed: 23)
        let (part, reference) = try RichContentTests.richPart("application/octet-stream", data, by: alice)
        let sent = try alice.send(alice.newMessage(parts: [part]), in: conversation)
        let received = try await bob.waitForCreation(of: sent.id, timeout: .seconds(60))
        let file = try await bob.downloadedContent(of: received.message.identifier(of: received.message.parts[0]))
        #expect(try Data(contentsOf: file) == data)

        #expect(cuts.value == 1)
        let starts = fetcher.testHooks.withLockedValue { $0.starts[reference.id] ?? [] }
        #expect(starts.count == 2, "\(starts)")
        #expect(starts.first == 0)
        // Resumed past the start, at most where it was cut (what was synced and recorded).
        #expect((starts.last ?? 0) > 0 && (starts.last ?? 0) < UInt64(data.count), "\(starts)")
        #expect(try await b.server.store.read { r in try r.upload(reference.id)?.state } == .complete)

        try await alice.close()
        try await bob.close()
        await b.stop()
        await a.stop()
    }

    /// `GET /v1/peer/content/<uuid>` on the peer listener: a node of the cluster gets complete
    /// content that a message references (ranges too); unknown content is 404; a path that is
    /// no content id is 400; other methods are 405.
    @Test func thePeerContentResourceServesReferencedContentToPeers() async throws {
        let (a, b, certificates) = try await PeerReplicationTests.cluster("peer-content-resource")
        let alice = try ClientHarness.device("alice", on: a)
        try await ClientHarness.connect(alice, on: a)
        let conversation = try alice.newConversation(
            participants: ["bob"], options: ConversationOptions(isDistinct: false)
        ).id
        let data = RichContentTests.bytes(100_000, seed: 31)
        let (part, reference) = try RichContentTests.richPart("application/octet-stream", data, by: alice)
        let sent = try alice.send(alice.newMessage(parts: [part]), in: conversation)
        try await ClientHarness.waitUntil(alice, "alice's message to be sent", timeout: .seconds(60)) {
            try alice.isSent(sent.id)
        }

        // Node C of the same cluster CA (it need not be linked to fetch).
        let nodeC = NodeID(0xC3)
        let files = try DevelopmentCluster.nodeCertificate(for: nodeC, in: certificates)
        let ca = try DevelopmentCluster.certificateAuthority(in: certificates).certificate
        let tls = try TLSContext(
            .client(trust: .caFile(ca), certificateChainFile: files.certificate, privateKeyFile: files.key))
        let connection = try await TransportConnection.connect(
            to: "https://127.0.0.1:\(a.server.peers!.transport.port)", tls: tls,
            group: MultiThreadedEventLoopGroup.singleton)
        func get(_ path: String, method: String = "GET", range: String? = nil) async throws -> (
            status: String, body: [UInt8]
        ) {
            var headers = HeaderFields()
            if let range { headers.append("range", range) }
            let stream = try await connection.openStream(method: method, path: path, headers: headers, endStream: true)
            let (response, body) = try await stream.collect(maxBytes: 1 << 20).get()
            return (response?[":status"] ?? "?", Array(body.readableBytesView))
        }
        let path = PeerContentEndpoint.pathPrefix + reference.id.uuid.uuidString.lowercased()
        let whole = try await get(path)
        #expect(whole.status == "200")
        #expect(whole.body == [UInt8](data))
        let tail = try await get(path, range: "bytes=99000-")
        #expect(tail.status == "206")
        #expect(tail.body == [UInt8](data.suffix(1_000)))
        #expect(try await get(PeerContentEndpoint.pathPrefix + UUID().uuidString.lowercased()).status == "404")
        #expect(try await get(PeerContentEndpoint.pathPrefix + "not-a-uuid").status == "400")
        #expect(try await get(path, method: "DELETE").status == "405")
        try await connection.close()

        try await alice.close()
        await b.stop()
        await a.stop()
    }
}
