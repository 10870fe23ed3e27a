import Foundation
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaTestPostgres
import LaminaWire
import Testing

/// Rich content in channel messages (SPEC §6.8, Protocol/CONTENT.md §5, §7, §9) on real nodes
/// over TLS + HTTP/2: a member sends a message whose part references content they uploaded;
/// members download it, a non-member and a member who left are refused (403 `forbidden`); the
/// content stays while the channel lives and goes at the first collection after its deletion;
/// a peer node fetches it and serves its own members.
@Suite struct ChannelContentTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"
    static let carol: UserID = "carol"

    /// Uploads `bytes` as a new content through `client`; its reference.
    static func upload(_ client: ContentTestClient, _ bytes: [UInt8]) async throws -> ContentReference {
        let id = ContentID.random()
        let put = try await client.upload(id, bytes)
        #expect(put.status == 201, "\(put)")
        return ContentEndpointTests.reference(id, bytes)
    }

    @Test func membersDownloadAChannelMessagesContentAndOthersAreRefused() async throws {
        let node = try await TestNode.start("channel-content")
        let (alice, aliceContent) = try await ContentEndpointTests.login(node, Self.alice)
        let (bob, bobContent) = try await ContentEndpointTests.login(node, Self.bob)
        let (carol, carolContent) = try await ContentEndpointTests.login(node, Self.carol)
        let channel = try await ChannelTests.create(alice, "media")
        try await ChannelTests.join(bob, channel)

        let bytes = ContentTestClient.bytes(50_000, seed: 7)
        let reference = try await Self.upload(aliceContent, bytes)
        let part = ContentEndpointTests.part(reference)
        let (sent, ack) = try await ChannelTests.send(alice, channel, "", parts: [part])
        #expect(ack.cursor == 1)
        // Bob gets the reference live, and in the log.
        let live = try await ChannelsAcrossPeersTests.live(bob, sent)
        guard case .channelMessage(let message) = live.event else { return }
        #expect(message.parts == [part])
        let log = try await ChannelTests.fetch(bob, channel, after: 0, count: 10).messages
        #expect(log.map(\.parts) == [[part]])
        #expect(try await node.server.store.read { r in try r.channelContentReferences(reference.id) }.count == 1)

        // Members download it (the sender too); a non-member is refused.
        let got = try await bobContent.get(reference.id)
        #expect(got.status == 200 && got.body == bytes, "\(got)")
        #expect(try await aliceContent.get(reference.id).status == 200)
        let refused = try await carolContent.get(reference.id)
        #expect(refused.status == 403 && refused.errorName == "forbidden", "\(refused)")
        // The uploader cannot abandon content a channel message references.
        let abandon = try await aliceContent.delete(reference.id)
        #expect(abandon.status == 403, "\(abandon)")

        // A member who left is refused from then on; joining again gives access again.
        try await ChannelTests.leave(bob, channel)
        #expect(try await bobContent.get(reference.id).status == 403)
        try await ChannelTests.join(bob, channel)
        #expect(try await bobContent.get(reference.id).status == 200)

        // What a send may reference, checked where it enters (each refusal non-fatal, coded).
        let partial = ContentID.random()
        let declared = ContentTestClient.bytes(10_000, seed: 9)
        let put = try await aliceContent.put(
            partial, size: UInt64(declared.count), sha256: ContentTestClient.sha256(declared),
            body: Array(declared.prefix(100)))
        #expect(put.status == 202, "\(put)")
        await ChannelTests.expectRefused(.contentNotReady) {
            try await ChannelTests.send(
                alice, channel, "",
                parts: [ContentEndpointTests.part(ContentEndpointTests.reference(partial, declared))])
        }
        let bobs = try await Self.upload(bobContent, ContentTestClient.bytes(3_000, seed: 3))
        await ChannelTests.expectRefused(.forbidden) {
            try await ChannelTests.send(alice, channel, "", parts: [ContentEndpointTests.part(bobs)])
        }
        var wrongSize = reference
        wrongSize.size += 1
        await ChannelTests.expectRefused(.invalidContentReference) {
            try await ChannelTests.send(alice, channel, "", parts: [ContentEndpointTests.part(wrongSize)])
        }
        // Carol, not a member, may not send it either.
        await ChannelTests.expectRefused(.notAParticipant) {
            try await ChannelTests.send(carol, channel, "", parts: [part])
        }
        // A retry of the accepted send is answered as the first time.
        let retry = try await ChannelTests.send(alice, channel, "", id: sent, parts: [part])
        #expect(retry.ack.cursor == 1)

        for client in [aliceContent, bobContent, carolContent] { await client.close() }
        for client in [alice, bob, carol] { await client.close() }
        await node.stop()
    }

    @Test func contentLivesWithItsChannelAndGoesAtTheCollectionAfterItsDeletion() async throws {
        let node = try await TestNode.start("channel-content-collection")
        let (alice, aliceContent) = try await ContentEndpointTests.login(node, Self.alice)
        let channel = try await ChannelTests.create(alice, "archive")
        let kept = try await Self.upload(aliceContent, ContentTestClient.bytes(20_000, seed: 1))
        try await ChannelTests.send(alice, channel, "", parts: [ContentEndpointTests.part(kept)])
        // Unreferenced content of the same age, for contrast.
        let loose = try await Self.upload(aliceContent, ContentTestClient.bytes(4_000, seed: 2))

        // Two days on: the unreferenced content goes, the channel's stays.
        let later = Timestamp(millisecondsSince1970: Timestamp.now().millisecondsSince1970 + 2 * 86_400_000)
        let first = try await node.server.content.collect(at: later)
        #expect(first.unreferenced == [loose.id] && first.deletedMessages.isEmpty, "\(first)")
        #expect(try await node.server.store.read { r in try r.upload(kept.id)?.state } == .complete)

        // The channel is deleted: its content goes at the next collection, file and record.
        try await ChannelTests.delete(alice, channel)
        let second = try await node.server.content.collect()
        #expect(second.deletedMessages == [kept.id], "\(second)")
        #expect(try await node.server.store.read { r in try r.upload(kept.id) } == nil)
        #expect(try await node.server.store.read { r in try r.channelContentReferences(kept.id) }.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: node.server.content.files.completePath(kept.id)))
        #expect(try await aliceContent.get(kept.id).status == 404)

        await aliceContent.close()
        await alice.close()
        await node.stop()
    }

    /// The same links, permission and collection on PostgreSQL, from two nodes sharing it and
    /// one content directory: content uploaded through one is served to a member through the other.
    @Test func onASharedPostgreSQLTheLinksServeMembersAndGoWithTheChannel() async throws {
        let (a, b) = try await SharedPostgresContentTests.twoNodes(
            "pg-channel-content", contentDirectory: Fixtures.temporaryDirectory("pg-channel-content-files"))
        let (alice, aliceContent) = try await ContentEndpointTests.login(a, Self.alice)
        let (bob, bobContent) = try await ContentEndpointTests.login(b, Self.bob)
        let (carol, carolContent) = try await ContentEndpointTests.login(b, Self.carol)
        let channel = try await ChannelTests.create(alice, "pg-media")
        try await ChannelTests.join(bob, channel)
        let bytes = ContentTestClient.bytes(30_000, seed: 31)
        let reference = try await Self.upload(aliceContent, bytes)
        try await ChannelTests.send(alice, channel, "", parts: [ContentEndpointTests.part(reference)])

        let got = try await bobContent.get(reference.id)
        #expect(got.status == 200 && got.body == bytes, "\(got)")
        #expect(try await carolContent.get(reference.id).status == 403)
        let later = Timestamp(millisecondsSince1970: Timestamp.now().millisecondsSince1970 + 2 * 86_400_000)
        #expect(try await a.server.content.collect(at: later).all.isEmpty)

        try await ChannelTests.delete(alice, channel)
        let collected = try await a.server.content.collect()
        #expect(collected.deletedMessages == [reference.id], "\(collected)")
        #expect(try await bobContent.get(reference.id).status == 404)

        for client in [aliceContent, bobContent, carolContent] { await client.close() }
        for client in [alice, bob, carol] { await client.close() }
        await b.stop()
        await a.stop()
    }

    @Test func aPeerFetchesAChannelMessagesContentAndServesItsMembers() async throws {
        let (a, b, _) = try await PeerReplicationTests.cluster("channel-content-peers")
        let (alice, aliceContent) = try await ContentEndpointTests.login(a, Self.alice)
        let (bob, bobContent) = try await ContentEndpointTests.login(b, Self.bob)
        let (carol, carolContent) = try await ContentEndpointTests.login(b, Self.carol)
        let channel = try await ChannelTests.create(alice, "peers-media")
        try await ChannelsAcrossPeersTests.holds(b, channel)
        try await ChannelTests.join(bob, channel)
        try await ChannelsAcrossPeersTests.members(of: channel, on: a, are: [Self.alice, Self.bob])

        let bytes = ContentTestClient.bytes(1 << 20, seed: 13)
        let reference = try await Self.upload(aliceContent, bytes)
        let (sent, _) = try await ChannelTests.send(alice, channel, "", parts: [ContentEndpointTests.part(reference)])
        _ = try await ChannelsAcrossPeersTests.live(bob, sent)

        // Node B fetches the content from A by itself (owner: the sender) and serves bob.
        try await ResourceLimitTests.eventuallyAsync("node B to hold the content", timeout: .seconds(60)) {
            (try? await b.server.store.read { r in try r.upload(reference.id)?.state }) == .complete
        }
        #expect(try await b.server.store.read { r in try r.upload(reference.id)?.owner } == Self.alice)
        let got = try await bobContent.get(reference.id)
        #expect(got.status == 200 && got.body == bytes, "\(got.status)")
        #expect(try await carolContent.get(reference.id).status == 403)
        #expect(try await PeerReplicationTests.converged([a, b], within: .seconds(30)))

        // Deleted on A: B frees its copy at its next collection too.
        try await ChannelTests.delete(alice, channel)
        try await ResourceLimitTests.eventuallyAsync("node B to hold the channel deleted") {
            (try? await b.server.store.read { r in try r.channel(channel)?.isDeleted }) == true
        }
        let collected = try await b.server.content.collect()
        #expect(collected.deletedMessages == [reference.id], "\(collected)")
        #expect(try await bobContent.get(reference.id).status == 404)

        for client in [aliceContent, bobContent, carolContent] { await client.close() }
        for client in [alice, bob, carol] { await client.close() }
        await b.stop()
        await a.stop()
    }
}
