import Foundation
import LaminaModel
import LaminaNode
import LaminaTransport
import Testing

@testable import LaminaClient

/// Rich content end to end (Protocol/CONTENT.md): `LaminaClient`s of alice, bob and carol
/// against a real node over TLS + HTTP/2 on loopback. Uploads and downloads share each
/// client's connection with its sync stream.
@Suite struct RichContentTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"
    static let carol: UserID = "carol"

    /// Bytes `(i % 251) + seed`: a pattern that notices shifted or missing chunks.
    static func bytes(_ count: Int, seed: UInt8 = 0) -> Data {
        let pattern = (0..<251).map { UInt8($0) &+ seed }
        var out = Data(capacity: count)
        while out.count < count { out.append(contentsOf: pattern.prefix(count - out.count)) }
        return out
    }

    /// A client of `user` for the node at `url` (fast reconnects, for the restart test).
    static func client(_ user: UserID, url: String, certificate: String) throws -> LaminaClient {
        let configuration = LaminaConfiguration(
            nodeURL: URL(string: url)!, trust: .certificateAuthorities(URL(fileURLWithPath: certificate)),
            dataDirectory: Fixtures.temporaryDirectory("rich-\(user)"),
            reconnect: ReconnectPolicy(initialDelay: .milliseconds(50), maxDelay: .milliseconds(300)))
        return try LaminaClient(configuration: configuration, user: user)
    }

    static func client(_ user: UserID, on node: TestNode) throws -> LaminaClient {
        try client(user, url: node.server.url, certificate: node.server.prepared.certificatePath)
    }

    /// The first transfer event matching `predicate`; throws after `timeout`.
    static func event(
        _ events: AsyncStream<ContentTransferEvent>, timeout: Duration = .seconds(30),
        _ predicate: @escaping @Sendable (ContentTransferEvent) -> Bool
    ) async throws -> ContentTransferEvent {
        try await withThrowingTaskGroup(of: ContentTransferEvent?.self) { group in
            group.addTask {
                for await event in events where predicate(event) { return event }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw ClientWaitTimeout(waitingFor: "a transfer event")
            }
            defer { group.cancelAll() }
            guard let event = try await group.next() ?? nil else {
                throw ClientWaitTimeout(waitingFor: "a transfer event (stream ended)")
            }
            return event
        }
    }

    static func richPart(_ mime: String, _ data: Data, by client: LaminaClient) throws -> (
        MessagePart, ContentReference
    ) {
        let part = try MessagePart.with(mimeType: mime, data: data, staging: client.staging)
        guard case .external(let ref) = part.content else {
            throw ClientError(.invalidObject, "\(data.count) bytes did not become rich content")
        }
        return (part, ref)
    }

    static func conversation(_ client: LaminaClient, with others: Set<UserID>) throws -> ConversationID {
        try client.newConversation(participants: others, options: ConversationOptions(isDistinct: false)).id
    }

    @Test(arguments: StoreBackend.allCases) func partsOfZeroTwoKiBTwoKiBPlusOneAndTenMiBArriveWhole(
        _ backend: StoreBackend
    ) async throws {
        let node = try await TestNode.start("rich-sizes", backend: backend)
        let alice = try Self.client(Self.alice, on: node)
        let bob = try Self.client(Self.bob, on: node)
        let bobEvents = bob.contentTransferEvents()
        try await ClientEndToEndTests.connect(bob, on: node)

        let c = try Self.conversation(alice, with: [Self.bob])
        let payloads = [
            Self.bytes(0), Self.bytes(2_048, seed: 1), Self.bytes(2_049, seed: 2), Self.bytes(10 << 20, seed: 3),
        ]
        let parts = try payloads.map {
            try MessagePart.with(mimeType: "application/octet-stream", data: $0, staging: alice.staging)
        }
        #expect(parts.map { $0.inlineBytes != nil } == [true, true, false, false])
        // A rich text/plain part: bob's default rules download it by themselves.
        let (text, _) = try Self.richPart(
            "text/plain", Data(String(repeating: "lamina ", count: 1_000).utf8), by: alice)
        let message = try alice.send(alice.newMessage(parts: parts + [text]), in: c)
        try await ClientEndToEndTests.connect(alice, on: node)
        try await ClientEndToEndTests.waitUntil(alice, "alice's message to be sent", timeout: .seconds(60)) {
            try alice.isSent(message.id)
        }
        #expect(try alice.store.pendingUploads().isEmpty)

        try await ClientEndToEndTests.waitUntil(bob, "bob to receive the message") {
            try bob.message(message.id) != nil
        }
        let received = try #require(try bob.message(message.id))
        #expect(received.message.parts.map(\.content) == message.message.parts.map(\.content))
        #expect(received.message.parts[0].inlineBytes == [])
        #expect(received.message.parts[1].inlineBytes == [UInt8](payloads[1]))
        for (index, data) in payloads.enumerated().dropFirst(2) {
            let part = received.message.identifier(of: received.message.parts[index])
            #expect(try bob.store.transferStatus(of: part) == .readyForDownload)  // over 2 KB, not text: not by itself
            let url = try await bob.downloadedContent(of: part)
            #expect(try Data(contentsOf: url) == data)
        }
        let textPart = received.message.identifier(of: received.message.parts[4])
        _ = try await Self.event(bobEvents) { if case .completed(textPart, .download) = $0 { true } else { false } }
        guard case .file(let textFile) = try bob.content(of: textPart) else {
            Issue.record("the text part did not auto-download")
            return
        }
        #expect(try String(contentsOf: textFile, encoding: .utf8) == String(repeating: "lamina ", count: 1_000))
        #expect(try bob.currentDiskUtilization().contentBytes == UInt64(2_049 + (10 << 20) + 7_000))

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    @Test func anUploadCutByALostConnectionResumesFromTheNodesOffset() async throws {
        // The upload waits in the hook while the connection closes under it (the client's
        // graceful close gives up on the stalled upload stream after its drain timeout).
        try await uploadCutAt4MiBResumesFromTheNodesOffset("rich-cut", seed: 7) { _, alice in
            await alice.transfers.link.dropConnection()
        }
    }

    @Test func anUploadCutByANodeRestartResumesFromTheBytesTheNodeKept() async throws {
        // The node shuts down under the upload (recording the bytes it made durable) and comes
        // back on the same port; the SDK reconnects and asks where to continue.
        try await uploadCutAt4MiBResumesFromTheNodesOffset("rich-restart", seed: 9) { node, _ in
            await node.stop()
            try? await node.startAgain()
        }
    }

    /// Alice sends a 12 MiB part; `cut` runs once 4 MiB are sent. The upload must then go on
    /// from the node's durable offset (0 < offset ≤ 4 MiB + a chunk), and Bob download the same bytes.
    func uploadCutAt4MiBResumesFromTheNodesOffset(
        _ name: String, seed: UInt8,
        cut: @escaping @Sendable (TestNode, LaminaClient) async -> Void
    ) async throws {
        let node = try await TestNode.start(name)
        let alice = try Self.client(Self.alice, on: node)
        let c = try Self.conversation(alice, with: [Self.bob])
        let data = Self.bytes(12 << 20, seed: seed)
        let (rich, ref) = try Self.richPart("video/mp4", data, by: alice)
        let message = try alice.send(alice.newMessage(parts: [rich]), in: c)
        let part = message.message.identifier(of: rich)

        let once = Once()
        alice.transfers.uploader.chunkHook = { _, sent in
            guard sent >= 4 << 20, once.first() else { return }
            await cut(node, alice)
        }
        let events = alice.contentTransferEvents()
        try await ClientEndToEndTests.connect(alice, on: node)
        _ = try await Self.event(events, timeout: .seconds(90)) {
            if case .completed(part, .upload) = $0 { true } else { false }
        }
        let starts = alice.transfers.uploader.uploadStarts(of: part)
        #expect(starts.first == 0)
        #expect(starts.count == 2, "\(starts)")
        let resumedAt = starts.last ?? 0
        #expect(resumedAt > 0, "the node kept the bytes it received before the cut: \(starts)")
        #expect(resumedAt <= 4 << 20 + ContentUploader.chunkBytes && resumedAt < ref.size)
        try await ClientEndToEndTests.waitUntil(alice, "alice's message to be sent") { try alice.isSent(message.id) }

        let bob = try Self.client(Self.bob, on: node)
        try await ClientEndToEndTests.connect(bob, on: node)
        try await ClientEndToEndTests.waitUntil(bob, "bob to receive the message") {
            try bob.message(message.id) != nil
        }
        #expect(try Data(contentsOf: try await bob.downloadedContent(of: part)) == data)

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    @Test func aCorruptedUploadFailsTheMessageWithTheDigestMismatch() async throws {
        let node = try await TestNode.start("rich-corrupt")
        let alice = try Self.client(Self.alice, on: node)
        let c = try Self.conversation(alice, with: [Self.bob])
        let (rich, _) = try Self.richPart("image/png", Self.bytes(100_000), by: alice)
        let message = try alice.send(alice.newMessage(parts: [rich]), in: c)
        let later = try alice.send(alice.newMessage(parts: [try MessagePart.with(text: "still delivered")]), in: c)
        let part = message.message.identifier(of: rich)
        // The staged file is altered after staging.
        try Self.bytes(100_000, seed: 1).write(to: alice.store.contentFileURL(for: part))

        let events = alice.contentTransferEvents()
        try await ClientEndToEndTests.connect(alice, on: node)
        let failed = try await Self.event(events) { if case .failed(part, .upload, _) = $0 { true } else { false } }
        guard case .failed(_, _, let error) = failed else { return }
        #expect(error.code == .contentRefused)
        #expect(alice.transfers.uploader.uploadStarts(of: part) == [0, 0])  // restarted from 0 once
        let failure = try #require(try alice.sendFailure(of: message.id))
        #expect(failure.code == 602)
        #expect(failure.reason.contains("content-digest-mismatch"))
        #expect(try !alice.isSent(message.id))
        try await ClientEndToEndTests.waitUntil(alice, "the later message to be sent") { try alice.isSent(later.id) }

        try await alice.close()
        await node.stop()
    }

    @Test func aUserOutsideTheConversationCannotDownload() async throws {
        let node = try await TestNode.start("rich-forbidden")
        let alice = try Self.client(Self.alice, on: node)
        let carol = try Self.client(Self.carol, on: node)
        let c = try Self.conversation(alice, with: [Self.bob])
        let (rich, ref) = try Self.richPart("image/png", Self.bytes(50_000), by: alice)
        let message = try alice.send(alice.newMessage(parts: [rich]), in: c)
        try await ClientEndToEndTests.connect(alice, on: node)
        try await ClientEndToEndTests.waitUntil(alice, "alice's message to be sent") { try alice.isSent(message.id) }

        // Carol learns the reference somehow and asks for the bytes.
        let carolsView = try Conversation(
            creator: Self.carol, participants: [Self.carol, Self.alice], options: ConversationOptions(isDistinct: false)
        )
        let forged = Message(
            conversationID: carolsView.id, sender: Self.alice,
            parts: [MessagePart(mimeType: "image/png", content: .external(ref))],
            sentAt: .now(), position: MessagePosition(physical: 1, logical: 0, node: NodeID(1)))
        try carol.store.apply([.conversation(carolsView), .message(forged, receivedAt: .now())])
        try await ClientEndToEndTests.connect(carol, on: node)
        let part = forged.identifier(of: forged.parts[0])
        let error = await #expect(throws: ClientError.self) { try await carol.downloadedContent(of: part) }
        #expect(error?.reason.contains("403") == true)
        #expect(error?.reason.contains("forbidden") == true)
        #expect(try carol.store.transferStatus(of: part) == .readyForDownload)
        guard case .unavailable = try carol.content(of: part) else {
            Issue.record("carol has the content")
            return
        }

        try await alice.close()
        try await carol.close()
        await node.stop()
    }

    @Test func cachedContentIsPurgedLeastRecentlyAccessedFirst() async throws {
        let node = try await TestNode.start("rich-purge")
        let alice = try Self.client(Self.alice, on: node)
        let bob = try Self.client(Self.bob, on: node)
        var settings = bob.contentSettings
        settings.diskCapacity = 25_000
        try bob.updateContentSettings(settings)
        let c = try Self.conversation(alice, with: [Self.bob])
        let messages = try (0..<3).map { i in
            try alice.send(
                alice.newMessage(parts: [
                    try MessagePart.with(
                        mimeType: "image/png", data: Self.bytes(10_000, seed: UInt8(i)), staging: alice.staging)
                ]), in: c)
        }
        try await ClientEndToEndTests.connect(alice, on: node)
        try await ClientEndToEndTests.connect(bob, on: node)
        try await ClientEndToEndTests.waitUntil(bob, "bob to receive three messages") {
            try bob.messages(in: c).count == 3
        }
        let parts = messages.map { $0.message.identifier(of: $0.message.parts[0]) }

        _ = try await bob.downloadedContent(of: parts[0])
        _ = try await bob.downloadedContent(of: parts[1])
        // The first is read after the second was downloaded: the second is now the least recent.
        _ = try bob.store.accessContent(
            of: parts[0], now: Timestamp(millisecondsSince1970: Timestamp.now().millisecondsSince1970 + 60_000))
        _ = try await bob.downloadedContent(of: parts[2])  // 30,000 bytes > 25,000: purge down to 20,000

        #expect(try bob.store.transferStatus(of: parts[1]) == .readyForDownload)
        #expect(!FileManager.default.fileExists(atPath: bob.store.contentFileURL(for: parts[1]).path))
        #expect(try bob.message(parts[1].message)?.partStates.first?.purged == true)
        for kept in [parts[0], parts[2]] {
            guard case .file(let url) = try bob.content(of: kept) else {
                Issue.record("\(kept) was purged")
                continue
            }
            #expect(FileManager.default.fileExists(atPath: url.path))
        }
        #expect(try bob.currentDiskUtilization().contentBytes == 20_000)
        // Purging by hand; purged content does not download by itself again.
        #expect(try bob.purgeContent(of: parts[0]))
        #expect(try !bob.purgeContent(of: parts[0]))
        #expect(try bob.currentDiskUtilization().contentBytes == 10_000)

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    @Test func anUploadPausesResumesAndAnotherIsCancelled() async throws {
        let node = try await TestNode.start("rich-pause")
        let alice = try Self.client(Self.alice, on: node)
        let c = try Self.conversation(alice, with: [Self.bob])
        let (first, firstRef) = try Self.richPart("video/mp4", Self.bytes(6 << 20, seed: 4), by: alice)
        let (second, secondRef) = try Self.richPart("video/mp4", Self.bytes(6 << 20, seed: 5), by: alice)
        let m1 = try alice.send(alice.newMessage(parts: [first]), in: c)
        let m2 = try alice.send(alice.newMessage(parts: [second]), in: c)
        let p1 = m1.message.identifier(of: first)
        let p2 = m2.message.identifier(of: second)
        let progress1 = try #require(alice.uploadProgress(for: p1))
        let progress2 = try #require(alice.uploadProgress(for: p2))
        #expect(progress1.totalUnitCount == 6 << 20)
        alice.transfers.uploader.chunkHook = { part, sent in
            if part == p1, sent >= 2 << 20, !progress1.isPaused, progress1.completedUnitCount < 4 << 20 {
                progress1.pause()
            }
            if part == p2, sent >= 1 << 20, !progress2.isCancelled { progress2.cancel() }
        }
        let events = alice.contentTransferEvents()
        try await ClientEndToEndTests.connect(alice, on: node)

        let paused = try await Self.event(events) { if case .paused(p1, .upload, _) = $0 { true } else { false } }
        guard case .paused(_, _, let offset) = paused else { return }
        #expect(offset >= 2 << 20 && offset < 6 << 20)
        let lease = try #require(alice.transfers.link.current)
        let held = try await ContentStreams.head(firstRef.id, on: lease)
        #expect(held == UploadState(offset: offset, isComplete: false))
        #expect(try !alice.isSent(m1.id))

        // The second upload runs while the first is paused, and is cancelled part way.
        let cancelled = try await Self.event(events) { if case .failed(p2, .upload, _) = $0 { true } else { false } }
        guard case .failed(_, _, let error) = cancelled else { return }
        #expect(error.code == .cancelled)
        #expect(try alice.sendFailure(of: m2.id)?.isCancelled == true)
        #expect(try await ContentStreams.head(secondRef.id, on: lease) == nil)  // deleted before the event

        alice.transfers.uploader.chunkHook = nil
        progress1.resume()
        _ = try await Self.event(events) { if case .completed(p1, .upload) = $0 { true } else { false } }
        #expect(alice.transfers.uploader.uploadStarts(of: p1) == [0, offset])
        try await ClientEndToEndTests.waitUntil(alice, "the resumed message to be sent") { try alice.isSent(m1.id) }
        #expect(progress1.completedUnitCount == progress1.totalUnitCount)

        try await alice.close()
        await node.stop()
    }
}

/// True the first time `first()` is called only.
final class Once: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    func first() -> Bool {
        lock.withLock {
            defer { done = true }
            return !done
        }
    }
}
