import Foundation
import LaminaModel
import LaminaNode
import LaminaTransport
import LaminaWire
import NIOCore
import Testing

/// Rich content transfer (Protocol/CONTENT.md) against a real node over TLS + HTTP/2 on loopback.
@Suite struct ContentEndpointTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"
    static let carol: UserID = "carol"

    /// A sync session (authenticated, synced) and a content client with its session token.
    static func login(_ node: TestNode, _ user: UserID) async throws -> (SyncTestClient, ContentTestClient) {
        let sync = try await node.connect()
        _ = try await sync.hello()
        let authenticated = try await sync.authenticate(user: user, device: UUID(), dev: node.dev)
        _ = try await sync.sync(from: 0)
        return (sync, try await ContentTestClient.connect(node, token: authenticated.sessionToken))
    }

    static func reference(_ id: ContentID, _ bytes: [UInt8]) -> ContentReference {
        ContentReference(id: id, size: UInt64(bytes.count), sha256: ContentTestClient.sha256(bytes))
    }

    static func part(_ reference: ContentReference) -> MessagePart {
        MessagePart(mimeType: "application/octet-stream", content: .external(reference))
    }

    // MARK: upload and download

    @Test func uploadsAndDownloadsZeroSmallAndTenMegabytes() async throws {
        let node = try await TestNode.start("content-sizes")
        let (sync, content) = try await Self.login(node, Self.alice)
        for size in [0, 2_048, 2_049, 10 * 1024 * 1024] {
            let bytes = ContentTestClient.bytes(size, seed: UInt64(size + 1))
            let id = ContentID.random()
            let put = try await content.upload(id, bytes)
            #expect(put.status == 201, "\(size): \(put)")
            #expect(put.json["contentID"] as? String == id.url)
            #expect((put.json["size"] as? Int) == size)
            #expect(put.json["sha256"] as? String == ContentTestClient.hex(ContentTestClient.sha256(bytes)))
            #expect(put.offset == UInt64(size))
            let head = try await content.head(id)
            #expect(head.status == 200)
            #expect(head.headers["lamina-upload-complete"] == "true")
            #expect(head.headers["lamina-content-size"] == "\(size)")
            let get = try await content.get(id)
            #expect(get.status == 200)
            #expect(get.headers["content-length"] == "\(size)")
            #expect(get.headers["etag"] == "\"\(ContentTestClient.hex(ContentTestClient.sha256(bytes)))\"")
            #expect(get.body == bytes)
            let file = node.server.content.files.completePath(id)
            #expect(FileManager.default.fileExists(atPath: file))
            #expect(!FileManager.default.fileExists(atPath: node.server.content.files.partialPath(id)))
            // Retrying a finished upload is harmless: 200 with the same answer.
            let again = try await content.upload(id, bytes)
            #expect(again.status == 200)
            #expect(again.json["contentID"] as? String == id.url)
        }
        await content.close()
        await sync.close()
        await node.stop()
    }

    @Test func uploadEndingShortIsResumedFromTheOffsetTheNodeHolds() async throws {
        let node = try await TestNode.start("content-resume")
        let (sync, content) = try await Self.login(node, Self.alice)
        let bytes = ContentTestClient.bytes(3 * 1024 * 1024 + 17)
        let digest = ContentTestClient.sha256(bytes)
        let id = ContentID.random()
        let half = 1_500_000
        let first = try await content.put(id, size: UInt64(bytes.count), sha256: digest, body: Array(bytes[0..<half]))
        #expect(first.status == 202, "\(first)")
        #expect(first.offset == UInt64(half))
        let head = try await content.head(id)
        #expect(head.status == 200)
        #expect(head.offset == UInt64(half))
        #expect(head.headers["lamina-upload-complete"] == "false")
        // Not complete: nobody downloads it yet.
        #expect(try await content.get(id).errorName == "content-not-ready")
        // Offset mismatch: 409 with what the node holds.
        let wrong = try await content.put(
            id, size: UInt64(bytes.count), sha256: digest, offset: 0, body: Array(bytes[0..<10]))
        #expect(wrong.status == 409)
        #expect(wrong.errorName == "upload-offset-mismatch")
        #expect(wrong.offset == UInt64(half))
        // Another size or digest: upload-mismatch.
        let other = try await content.put(
            id, size: UInt64(bytes.count + 1), sha256: digest, offset: UInt64(half), body: [])
        #expect(other.status == 409)
        #expect(other.errorName == "upload-mismatch")
        // The rest from the offset completes it.
        let rest = try await content.put(
            id, size: UInt64(bytes.count), sha256: digest, offset: UInt64(half), body: Array(bytes[half...]))
        #expect(rest.status == 201, "\(rest)")
        #expect(try await content.get(id).body == bytes)
        await content.close()
        await sync.close()
        await node.stop()
    }

    @Test func uploadResetMidBodyKeepsTheDurableBytesAndResumes() async throws {
        let node = try await TestNode.start("content-reset")
        let (sync, content) = try await Self.login(node, Self.alice)
        let bytes = ContentTestClient.bytes(5 * 1024 * 1024)
        let digest = ContentTestClient.sha256(bytes)
        let id = ContentID.random()
        let sent = 3 * 1024 * 1024
        try await content.putThenReset(id, size: UInt64(bytes.count), sha256: digest, body: Array(bytes[0..<sent]))
        // The node makes what it received durable, records it, then lets the content go.
        await node.server.content.waitUntilIdle(id)
        let head = try await content.head(id)
        #expect(head.status == 200)
        let held = try #require(head.offset)
        #expect(held <= UInt64(sent))
        #expect(head.headers["lamina-upload-complete"] == "false")
        let record = try await node.server.store.read { try $0.upload(id) }
        #expect(record?.receivedBytes == held)
        let size =
            try FileManager.default.attributesOfItem(atPath: node.server.content.files.partialPath(id))[.size] as? Int
        #expect(size.map(UInt64.init) == held)
        let rest = try await content.put(
            id, size: UInt64(bytes.count), sha256: digest, offset: held, body: Array(bytes[Int(held)...]))
        #expect(rest.status == 201, "\(rest)")
        #expect(try await content.get(id).body == bytes)
        await content.close()
        await sync.close()
        await node.stop()
    }

    /// CONTENT.md §4: a HEAD right after an upload stream was reset (on the same connection)
    /// answers the durable offset the node settles on, never an earlier one.
    @Test func headRightAfterAResetAnswersTheDurableOffset() async throws {
        let node = try await TestNode.start("content-reset-head")
        let (sync, content) = try await Self.login(node, Self.alice)
        let bytes = ContentTestClient.bytes(2 * 1024 * 1024)
        let digest = ContentTestClient.sha256(bytes)
        for round in 0..<3 {
            let id = ContentID.random()
            let sent = 1024 * 1024 + round * 64 * 1024
            try await content.putThenReset(id, size: UInt64(bytes.count), sha256: digest, body: Array(bytes[0..<sent]))
            let head = try await content.head(id)  // no wait on the node: the HEAD itself waits
            #expect(head.status == 200)
            let record = try await node.server.store.read { try $0.upload(id) }
            #expect(head.offset == record?.receivedBytes, "round \(round)")
            #expect(head.offset.map { $0 > 0 } == true, "round \(round): \(String(describing: head.offset))")
            let rest = try await content.put(
                id, size: UInt64(bytes.count), sha256: digest, offset: head.offset ?? 0,
                body: Array(bytes[Int(head.offset ?? 0)...]))
            #expect(rest.status == 201, "\(rest)")
        }
        await content.close()
        await sync.close()
        await node.stop()
    }

    @Test func corruptedUploadIsRefusedAndDeleted() async throws {
        let node = try await TestNode.start("content-corrupt")
        let (sync, content) = try await Self.login(node, Self.alice)
        let bytes = ContentTestClient.bytes(300_000)
        var corrupted = bytes
        corrupted[123_456] ^= 0xFF
        let id = ContentID.random()
        let put = try await content.put(
            id, size: UInt64(bytes.count), sha256: ContentTestClient.sha256(bytes), body: corrupted)
        #expect(put.status == 422, "\(put)")
        #expect(put.errorName == "content-digest-mismatch")
        #expect(put.json["code"] as? Int == 602)
        #expect(
            (put.json["reason"] as? String)?.contains(ContentTestClient.hex(ContentTestClient.sha256(corrupted)))
                == true)
        #expect(try await content.head(id).status == 404)
        #expect(!FileManager.default.fileExists(atPath: node.server.content.files.partialPath(id)))
        #expect(!FileManager.default.fileExists(atPath: node.server.content.files.completePath(id)))
        // The client starts again from 0 and succeeds.
        #expect(try await content.upload(id, bytes).status == 201)
        await content.close()
        await sync.close()
        await node.stop()
    }

    @Test func headersAreCheckedBeforeAnyBody() async throws {
        let node = try await TestNode.start("content-headers")
        let (sync, content) = try await Self.login(node, Self.alice)
        let digest = ContentTestClient.hex([UInt8](repeating: 7, count: 32))
        // Over 2 GiB: 413 while the request body is still open (never sent).
        let stream = try await content.connection.openStream(
            method: "PUT", path: ContentTestClient.path(.random()),
            headers: [
                ("authorization", "Bearer \(content.token!)"), ("lamina-content-size", "\((1 << 31) + 1)"),
                ("lamina-content-sha256", digest),
            ],
            endStream: false)
        let (headers, body) = try await stream.collect(maxBytes: 4096).get()
        #expect(headers?[":status"] == "413")
        #expect(headers?["lamina-error"] == "part-too-large")
        #expect(String(buffer: body).contains("\"code\":406"))
        // Missing or malformed headers: 400 invalid-argument.
        for extra in [
            [("lamina-content-sha256", digest)],
            [("lamina-content-size", "12"), ("lamina-content-sha256", "xyz")],
            [("lamina-content-size", "-1"), ("lamina-content-sha256", digest)],
            [("lamina-content-size", "12"), ("lamina-content-sha256", digest), ("lamina-upload-offset", "13")],
        ] {
            let answer = try await content.request("PUT", .random(), headers: extra, body: [1, 2, 3])
            #expect(answer.status == 400, "\(extra): \(answer)")
            #expect(answer.errorName == "invalid-argument")
        }
        // A body past the declared size: 400 upload-too-long, the bytes up to the size kept.
        let bytes = ContentTestClient.bytes(1000)
        let id = ContentID.random()
        let long = try await content.put(
            id, size: 1000, sha256: ContentTestClient.sha256(bytes), body: bytes + [1, 2, 3])
        #expect(long.status == 400, "\(long)")
        #expect(long.errorName == "upload-too-long")
        #expect(try await content.get(id).body == bytes)
        // Other methods, other paths.
        #expect(try await content.request("POST", .random(), body: []).status == 405)
        #expect(try await content.request("GET", .random(), path: "/v1/content/not-a-uuid").status == 400)
        // Without or with a bad token: 401.
        let anonymous = try await ContentTestClient.connect(node, token: nil)
        let noToken = try await anonymous.get(id)
        #expect(noToken.status == 401)
        #expect(noToken.errorName == "authentication-required")
        let badToken = try await ContentTestClient.connect(node, token: "not-a-session")
        #expect(try await badToken.get(id).status == 401)
        await anonymous.close()
        await badToken.close()
        await content.close()
        await sync.close()
        await node.stop()
    }

    @Test func quotaAndConcurrentUploadsAreEnforced() async throws {
        let node = try await TestNode.start("content-quota") {
            $0.content.quotaBytes = 1_000_000
            $0.content.maxConcurrentUploadsPerUser = 1
        }
        let (sync, content) = try await Self.login(node, Self.alice)
        let first = ContentTestClient.bytes(600_000)
        #expect(try await content.upload(.random(), first).status == 201)
        let second = ContentTestClient.bytes(600_000, seed: 9)
        let over = try await content.upload(.random(), second)
        #expect(over.status == 507, "\(over)")
        #expect(over.errorName == "quota-exceeded")
        // One upload open at a time: a second is 429 with retry-after.
        let openID = ContentID.random()
        let open = try await content.connection.openStream(
            method: "PUT", path: ContentTestClient.path(openID),
            headers: [
                ("authorization", "Bearer \(content.token!)"), ("lamina-content-size", "100"),
                (
                    "lamina-content-sha256",
                    ContentTestClient.hex(ContentTestClient.sha256(ContentTestClient.bytes(100)))
                ),
            ],
            endStream: false)
        let openAnswer = open.collect(maxBytes: 4096)
        try await open.write(ByteBuffer(bytes: ContentTestClient.bytes(100)[0..<50])).get()
        // The node records an upload only after admitting it: once HEAD knows it, it holds the slot.
        try await content.awaitAdmitted(openID)
        let busy = try await content.upload(.random(), ContentTestClient.bytes(10))
        #expect(busy.status == 429, "\(busy)")
        #expect(busy.errorName == "overloaded")
        #expect(busy.headers["retry-after"] != nil)
        try await open.write(ByteBuffer(bytes: ContentTestClient.bytes(100)[50...])).get()
        open.finish()
        #expect(try await openAnswer.get().headers?[":status"] == "201")
        await content.close()
        await sync.close()
        await node.stop()
    }

    /// Issue 15, item 9: a declared upload that stops sending is answered `408 upload-stalled`
    /// and from then on holds only its bytes against the quota; while it streams it reserves
    /// its declared size.
    @Test func aStalledUploadIsAnsweredAndReservesOnlyWhatItHolds() async throws {
        let node = try await TestNode.start("content-stall") {
            $0.content.quotaBytes = 1_000_000
            $0.content.maxConcurrentUploadsPerUser = 2
            // Long enough that a loaded machine never stalls the uploads that keep sending.
            $0.content.uploadStallTimeoutSeconds = 5
        }
        let (sync, content) = try await Self.login(node, Self.alice)
        // Two other users keep talking on the same node while the upload stalls.
        let healthy = try await ResourceLimitTests.HealthyPair.start(node)
        let big = ContentTestClient.bytes(600_000)
        let bigID = ContentID.random()
        let open = try await content.connection.openStream(
            method: "PUT", path: ContentTestClient.path(bigID),
            headers: [
                ("authorization", "Bearer \(content.token!)"), ("lamina-content-size", "600000"),
                ("lamina-content-sha256", ContentTestClient.hex(ContentTestClient.sha256(big))),
            ],
            endStream: false)
        let answer = open.collect(maxBytes: 4096)
        try await open.write(ByteBuffer(bytes: big[0..<1_000])).get()
        try await content.awaitAdmitted(bigID)
        // While it streams, its 600,000 declared bytes are reserved.
        let other = ContentTestClient.bytes(600_000, seed: 9)
        let over = try await content.upload(.random(), other)
        #expect(over.status == 507, "\(over)")
        #expect(over.errorName == "quota-exceeded")

        // Then it sends nothing: answered 408 with the bytes the node holds. Meanwhile the
        // healthy pair's messages go through in bounded time.
        try await healthy.expectHealthy()
        let (headers, body) = try await answer.get()
        #expect(headers?[":status"] == "408")
        #expect(headers?["lamina-upload-offset"] == "1000")
        #expect(String(buffer: body).contains("upload-stalled"))
        // Left behind, it counts its 1,000 bytes: the other upload fits now...
        #expect(try await content.upload(.random(), other).status == 201)
        // ...and resuming it would go over the quota (1,000,000 < 600,000 + 600,000).
        let resumed = try await content.put(
            bigID, size: 600_000, sha256: ContentTestClient.sha256(big), offset: 1_000, body: Array(big[1_000...]))
        #expect(resumed.status == 507, "\(resumed)")
        #expect(resumed.headers["lamina-upload-offset"] == "1000")
        try await healthy.expectHealthy()
        await healthy.close()
        await content.close()
        await sync.close()
        await node.stop()
    }

    @Test func byteRanges() async throws {
        let node = try await TestNode.start("content-ranges")
        let (sync, content) = try await Self.login(node, Self.alice)
        let bytes = ContentTestClient.bytes(10_000)
        let id = ContentID.random()
        #expect(try await content.upload(id, bytes).status == 201)
        let cases: [(String, Int, Range<Int>)] = [
            ("bytes=0-99", 206, 0..<100), ("bytes=9990-", 206, 9990..<10_000), ("bytes=-10", 206, 9990..<10_000),
            ("bytes=5000-20000", 206, 5000..<10_000), ("bytes=0-0", 206, 0..<1), ("bytes=1-2,5-6", 200, 0..<10_000),
        ]
        for (range, status, slice) in cases {
            let answer = try await content.get(id, range: range)
            #expect(answer.status == status, "\(range)")
            #expect(answer.body == Array(bytes[slice]), "\(range)")
            if status == 206 {
                #expect(answer.headers["content-range"] == "bytes \(slice.lowerBound)-\(slice.upperBound - 1)/10000")
            }
            #expect(answer.headers["accept-ranges"] == "bytes")
        }
        let unsatisfiable = try await content.get(id, range: "bytes=10000-")
        #expect(unsatisfiable.status == 416)
        #expect(unsatisfiable.headers["content-range"] == "bytes */10000")
        await content.close()
        await sync.close()
        await node.stop()
    }

    // MARK: authorization and messages

    @Test func downloadsOnlyForTheUploaderAndWhoMaySeeTheMessage() async throws {
        let node = try await TestNode.start("content-authz")
        let (aliceSync, alice) = try await Self.login(node, Self.alice)
        let (bobSync, bob) = try await Self.login(node, Self.bob)
        let (carolSync, carol) = try await Self.login(node, Self.carol)
        let bytes = ContentTestClient.bytes(50_000)
        let id = ContentID.random()
        #expect(try await alice.upload(id, bytes).status == 201)
        // Before any message: only the uploader.
        #expect(try await bob.get(id).status == 403)
        #expect(try await bob.head(id).status == 403)
        let conversation = try await MessagingTests.conversation(aliceSync, with: [Self.alice, Self.bob])
        _ = try await MessagingTests.send(aliceSync, conversation, "", parts: [Self.part(Self.reference(id, bytes))])
        #expect(try await alice.get(id).body == bytes)
        let bobs = try await bob.get(id)
        #expect(bobs.status == 200)
        #expect(bobs.body == bytes)
        #expect(try await bob.head(id).headers["lamina-upload-complete"] == "true")
        let carols = try await carol.get(id)
        #expect(carols.status == 403)
        #expect(carols.errorName == "forbidden")
        // Only the owner may upload to or abandon it.
        #expect(try await bob.upload(id, bytes).status == 403)
        #expect(try await bob.delete(id).status == 403)
        // Referenced: not even the owner deletes it.
        #expect(try await alice.delete(id).status == 403)
        for c in [alice, bob, carol] { await c.close() }
        for s in [aliceSync, bobSync, carolSync] { await s.close() }
        await node.stop()
    }

    @Test func aRemovedParticipantSeesOnlyContentFromBeforeTheRemoval() async throws {
        let node = try await TestNode.start("content-removed")
        let (aliceSync, alice) = try await Self.login(node, Self.alice)
        let (bobSync, bob) = try await Self.login(node, Self.bob)
        let conversation = try await MessagingTests.conversation(aliceSync, with: [Self.alice, Self.bob])
        let before = ContentTestClient.bytes(5_000, seed: 1)
        let after = ContentTestClient.bytes(5_000, seed: 2)
        let beforeID = ContentID.random()
        let afterID = ContentID.random()
        #expect(try await alice.upload(beforeID, before).status == 201)
        #expect(try await alice.upload(afterID, after).status == 201)
        _ = try await MessagingTests.send(
            aliceSync, conversation, "", parts: [Self.part(Self.reference(beforeID, before))])
        let removal = UUID()
        try await aliceSync.command(
            .removeParticipants(
                ParticipantsUpdate(requestID: removal, conversationID: conversation, users: [Self.bob])), id: removal)
        _ = try await MessagingTests.send(
            aliceSync, conversation, "", parts: [Self.part(Self.reference(afterID, after))])
        #expect(try await bob.get(beforeID).body == before)
        #expect(try await bob.get(afterID).status == 403)
        #expect(try await alice.get(afterID).status == 200)
        for c in [alice, bob] { await c.close() }
        for s in [aliceSync, bobSync] { await s.close() }
        await node.stop()
    }

    @Test func messagesReferenceOnlyTheSendersCompleteContent() async throws {
        let node = try await TestNode.start("content-send")
        let (aliceSync, alice) = try await Self.login(node, Self.alice)
        let (bobSync, bob) = try await Self.login(node, Self.bob)
        let conversation = try await MessagingTests.conversation(aliceSync, with: [Self.alice, Self.bob])
        let bytes = ContentTestClient.bytes(100_000)
        let bobsID = ContentID.random()
        #expect(try await bob.upload(bobsID, bytes).status == 201)
        await #expect {
            try await MessagingTests.send(
                aliceSync, conversation, "", parts: [Self.part(Self.reference(bobsID, bytes))])
        } throws: { ($0 as? CommandFailed)?.error.code == .forbidden }
        let partialID = ContentID.random()
        let partial = try await alice.put(
            partialID, size: UInt64(bytes.count), sha256: ContentTestClient.sha256(bytes), body: Array(bytes[0..<1000]))
        #expect(partial.status == 202)
        await #expect {
            try await MessagingTests.send(
                aliceSync, conversation, "", parts: [Self.part(Self.reference(partialID, bytes))])
        } throws: { ($0 as? CommandFailed)?.error.code == .contentNotReady }
        await #expect {
            try await MessagingTests.send(
                aliceSync, conversation, "", parts: [Self.part(Self.reference(.random(), bytes))])
        } throws: { ($0 as? CommandFailed)?.error.code == .contentNotReady }
        let ownID = ContentID.random()
        #expect(try await alice.upload(ownID, bytes).status == 201)
        let wrongSize = ContentReference(id: ownID, size: 99, sha256: ContentTestClient.sha256(bytes))
        await #expect {
            try await MessagingTests.send(aliceSync, conversation, "", parts: [Self.part(wrongSize)])
        } throws: { ($0 as? CommandFailed)?.error.code == .invalidContentReference }
        let (sent, _) = try await MessagingTests.send(
            aliceSync, conversation, "", parts: [Self.part(Self.reference(ownID, bytes))])
        let received = try await bobSync.message(sent)
        #expect(received.parts.first?.content == .external(Self.reference(ownID, bytes)))
        for c in [alice, bob] { await c.close() }
        for s in [aliceSync, bobSync] { await s.close() }
        await node.stop()
    }

    // MARK: collection, deletion, restart

    @Test func collectionTakesAbandonedUnreferencedAndDeletedContent() async throws {
        let node = try await TestNode.start("content-gc") { $0.content.sweepIntervalSeconds = 0 }
        let (aliceSync, alice) = try await Self.login(node, Self.alice)
        let (bobSync, bob) = try await Self.login(node, Self.bob)
        let service = node.server.content
        let bytes = ContentTestClient.bytes(40_000)
        let abandoned = ContentID.random()
        #expect(
            try await alice.put(
                abandoned, size: 40_000, sha256: ContentTestClient.sha256(bytes), body: Array(bytes[0..<100])
            ).status == 202)
        let unreferenced = ContentID.random()
        #expect(try await alice.upload(unreferenced, bytes).status == 201)
        let referenced = ContentID.random()
        #expect(try await alice.upload(referenced, bytes).status == 201)
        let deletedLater = ContentID.random()
        #expect(try await alice.upload(deletedLater, bytes).status == 201)
        let conversation = try await MessagingTests.conversation(aliceSync, with: [Self.alice, Self.bob])
        _ = try await MessagingTests.send(
            aliceSync, conversation, "", parts: [Self.part(Self.reference(referenced, bytes))])
        let (doomed, _) = try await MessagingTests.send(
            aliceSync, conversation, "", parts: [Self.part(Self.reference(deletedLater, bytes))])

        // Now: nothing is old enough, nothing deleted.
        let now = try await service.collect()
        #expect(now.all.isEmpty)
        // A day and an hour later: the abandoned upload and the unreferenced content go.
        let later = Timestamp(millisecondsSince1970: Timestamp.now().millisecondsSince1970 + 25 * 3600 * 1000)
        let swept = try await service.collect(at: later)
        #expect(swept.abandoned == [abandoned])
        #expect(swept.unreferenced == [unreferenced])
        #expect(swept.deletedMessages.isEmpty)
        #expect(try await alice.head(abandoned).status == 404)
        #expect(try await alice.get(unreferenced).errorName == "content-not-found")
        #expect(!FileManager.default.fileExists(atPath: service.files.partialPath(abandoned)))
        #expect(!FileManager.default.fileExists(atPath: service.files.completePath(unreferenced)))
        #expect(try await bob.get(referenced).status == 200)
        // Deleted for all participants: its content goes with the next sweep.
        let request = UUID()
        try await aliceSync.command(
            .deleteMessage(
                DeleteMessage(
                    requestID: request, conversationID: conversation, messageID: doomed, mode: .allParticipants)),
            id: request)
        #expect(try await bob.get(deletedLater).status == 403)  // no visible message references it any more
        let third = try await service.collect()
        #expect(third.deletedMessages == [deletedLater])
        #expect(try await alice.get(deletedLater).status == 404)
        #expect(!FileManager.default.fileExists(atPath: service.files.completePath(deletedLater)))
        #expect(try await bob.get(referenced).status == 200)
        // Collected content no longer counts against the quota.
        let used = try await node.server.store.read { try $0.contentBytes(of: Self.alice) }
        #expect(used == 40_000)
        for c in [alice, bob] { await c.close() }
        for s in [aliceSync, bobSync] { await s.close() }
        await node.stop()
    }

    @Test func ownerAbandonsAnUpload() async throws {
        let node = try await TestNode.start("content-delete")
        let (sync, content) = try await Self.login(node, Self.alice)
        let bytes = ContentTestClient.bytes(10_000)
        let id = ContentID.random()
        #expect(
            try await content.put(
                id, size: 10_000, sha256: ContentTestClient.sha256(bytes), body: Array(bytes[0..<5000])
            ).status == 202)
        #expect(try await content.delete(id).status == 204)
        #expect(try await content.head(id).status == 404)
        #expect(try await content.delete(id).status == 404)
        #expect(!FileManager.default.fileExists(atPath: node.server.content.files.partialPath(id)))
        await content.close()
        await sync.close()
        await node.stop()
    }

    @Test func restartKeepsCompleteContentAndCutsPartialFilesBack() async throws {
        let node = try await TestNode.start("content-restart")
        var (sync, content) = try await Self.login(node, Self.alice)
        let bytes = ContentTestClient.bytes(200_000)
        let complete = ContentID.random()
        #expect(try await content.upload(complete, bytes).status == 201)
        let partial = ContentID.random()
        #expect(
            try await content.put(
                partial, size: 200_000, sha256: ContentTestClient.sha256(bytes), body: Array(bytes[0..<70_000])
            ).status == 202)
        await content.close()
        await sync.close()
        // Bytes written after the last fsync are not trusted; a file without a record is an orphan.
        let files = node.server.content.files
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: files.partialPath(partial)))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(repeating: 0xAB, count: 5000))
        try handle.close()
        let orphan = files.partialDirectory + "/" + UUID().uuidString.lowercased()
        #expect(FileManager.default.createFile(atPath: orphan, contents: Data([1, 2, 3])))

        try await node.restart()
        let recovery = node.server.content.lastRecovery
        #expect(recovery.truncated == 1)
        #expect(recovery.orphansDeleted == 1)
        #expect(!FileManager.default.fileExists(atPath: orphan))
        let size = try FileManager.default.attributesOfItem(atPath: files.partialPath(partial))[.size] as? Int
        #expect(size == 70_000)
        (sync, content) = try await Self.login(node, Self.alice)
        #expect(try await content.get(complete).body == bytes)
        #expect(try await content.head(partial).offset == 70_000)
        let rest = try await content.put(
            partial, size: 200_000, sha256: ContentTestClient.sha256(bytes), offset: 70_000,
            body: Array(bytes[70_000...]))
        #expect(rest.status == 201, "\(rest)")
        #expect(try await content.get(partial).body == bytes)
        await content.close()
        await sync.close()
        await node.stop()
    }

    @Test func uploadCutByAShutdownIsRecordedBeforeTheStoreCloses() async throws {
        let node = try await TestNode.start("content-shutdown")
        let (sync, content) = try await Self.login(node, Self.alice)
        let bytes = ContentTestClient.bytes(4 * 1024 * 1024)
        let digest = ContentTestClient.sha256(bytes)
        let id = ContentID.random()
        let sent = 1024 * 1024
        let stream = try await content.connection.openStream(
            method: "PUT", path: ContentTestClient.path(id),
            headers: [
                ("authorization", "Bearer \(content.token!)"), ("lamina-content-size", "\(bytes.count)"),
                ("lamina-content-sha256", ContentTestClient.hex(digest)),
            ],
            endStream: false)
        for start in stride(from: 0, to: sent, by: 64 * 1024) {
            try await stream.write(ByteBuffer(bytes: bytes[start..<(start + 64 * 1024)])).get()
        }
        try await content.awaitAdmitted(id)
        // The body never ends: the node's shutdown cuts the stream, the upload makes its bytes
        // durable and records them before the store closes.
        try await node.restart()
        await content.close()
        await sync.close()
        let (sync2, content2) = try await Self.login(node, Self.alice)
        let head = try await content2.head(id)
        let held = try #require(head.offset)
        #expect(held > 0)
        #expect(held <= UInt64(sent))
        let size =
            try FileManager.default.attributesOfItem(atPath: node.server.content.files.partialPath(id))[.size] as? Int
        #expect(size.map(UInt64.init) == held)
        let rest = try await content2.put(
            id, size: UInt64(bytes.count), sha256: digest, offset: held, body: Array(bytes[Int(held)...]))
        #expect(rest.status == 201, "\(rest)")
        await content2.close()
        await sync2.close()
        await node.stop()
    }

    // MARK: a client nobody here wrote

    @Test func curlUploadsAndDownloadsOverHTTP2() async throws {
        let node = try await TestNode.start("content-curl")
        let (sync, content) = try await Self.login(node, Self.alice)
        let directory = Fixtures.temporaryDirectory("curl")
        let input = directory.appendingPathComponent("in.bin").path
        let output = directory.appendingPathComponent("out.bin").path
        let bytes = ContentTestClient.bytes(3 * 1024 * 1024 + 5)
        try Data(bytes).write(to: URL(fileURLWithPath: input))
        let id = ContentID.random()
        let url = node.server.url + ContentTestClient.path(id)
        let common = [
            "--http2", "-sS", "--cacert", node.server.prepared.certificatePath, "-H",
            "authorization: Bearer \(content.token!)",
        ]
        let put = try await ExternalProgram.run(
            "/usr/bin/curl",
            common + [
                "-X", "PUT", "--data-binary", "@" + input, "-H", "content-type: application/octet-stream",
                "-H", "lamina-content-size: \(bytes.count)", "-H",
                "lamina-content-sha256: \(ContentTestClient.hex(ContentTestClient.sha256(bytes)))",
                "-w", "\n%{http_version} %{http_code}", url,
            ])
        #expect(put.status == 0, "\(put.stderr)")
        #expect(put.stdout.hasSuffix("\n2 201"), "\(put.stdout)")
        #expect(put.stdout.contains(id.url))
        let get = try await ExternalProgram.run(
            "/usr/bin/curl", common + ["-o", output, "-w", "%{http_version} %{http_code}", url])
        #expect(get.stdout == "2 200", "\(get.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == Data(bytes))
        let range = try await ExternalProgram.run(
            "/usr/bin/curl", common + ["-r", "100-199", "-o", output, "-w", "%{http_code}", url])
        #expect(range.stdout == "206")
        #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == Data(bytes[100..<200]))
        // A wrong digest, seen by curl: 422 with the JSON error.
        let bad = try await ExternalProgram.run(
            "/usr/bin/curl",
            common + [
                "-X", "PUT", "--data-binary", "@" + input, "-H", "lamina-content-size: \(bytes.count)",
                "-H", "lamina-content-sha256: \(String(repeating: "0", count: 64))", "-w", "\n%{http_code}",
                node.server.url + ContentTestClient.path(.random()),
            ])
        #expect(bad.stdout.hasSuffix("\n422"), "\(bad.stdout)")
        #expect(bad.stdout.contains("content-digest-mismatch"))
        try? FileManager.default.removeItem(at: directory)
        await content.close()
        await sync.close()
        await node.stop()
    }
}
