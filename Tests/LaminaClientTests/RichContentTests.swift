import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire
import Testing

@testable import LaminaClient

/// Bytes 0, 1, 2, ... 250, 0, 1, ... (a pattern that notices shifted or missing chunks).
func patternBytes(_ count: Int, seed: UInt8 = 0) -> Data {
    let pattern = (0..<251).map { UInt8($0) &+ seed }
    var out = Data(capacity: count)
    while out.count < count { out.append(contentsOf: pattern.prefix(count - out.count)) }
    return out
}

@Suite struct ContentHTTPTests {
    @Test func requestsFollowContentMD() {
        let id = ContentID(uuid: UUID(uuidString: "5F0C2B7A-1D2E-4C3B-9A8F-0123456789AB")!)
        #expect(ContentHTTP.path(id) == "/v1/content/5f0c2b7a-1d2e-4c3b-9a8f-0123456789ab")
        let ref = ContentReference(id: id, size: 10, sha256: [UInt8](repeating: 0xab, count: 32))
        let first = ContentHTTP.putHeaders(ref, offset: 0, token: "t0k")
        #expect(first["authorization"] == "Bearer t0k")
        #expect(first["lamina-content-size"] == "10")
        #expect(first["lamina-content-sha256"] == String(repeating: "ab", count: 32))
        #expect(first["lamina-upload-offset"] == nil)
        #expect(first["content-length"] == nil)  // a paused body ends early
        #expect(ContentHTTP.putHeaders(ref, offset: 4, token: "t").values("lamina-upload-offset") == ["4"])
        #expect(ContentHTTP.getHeaders(from: 0, token: "t")["range"] == nil)
        #expect(ContentHTTP.getHeaders(from: 1_000, token: "t")["range"] == "bytes=1000-")
        #expect(Hex.encode([0x00, 0x0f, 0xf0, 0xff]) == "000ff0ff")
    }

    @Test func headerNumbersAndRangesAreStrict() {
        #expect(ContentHTTP.number("0") == 0)
        #expect(ContentHTTP.number("2147483648") == 2_147_483_648)
        for bad in [nil, "", "+1", "-1", " 1", "1 ", "0x10", "1e3", String(repeating: "9", count: 21)] as [String?] {
            #expect(ContentHTTP.number(bad) == nil, "\(bad ?? "nil")")
        }
        #expect(ContentHTTP.contentRange("bytes 100-199/200")! == (100, 199, 200))
        for bad in ["bytes 100-99/200", "bytes 0-200/200", "bytes */200", "100-199/200", "bytes 1-2", "bytes a-b/c"] {
            #expect(ContentHTTP.contentRange(bad) == nil, "\(bad)")
        }
    }

    @Test func errorAnswersAreReadAndClassified() {
        let body = Array(#"{"code": 602, "name": "content-digest-mismatch", "reason": "the bytes hash to 3f"}"#.utf8)
        let e = ContentHTTPError(
            status: 422, headers: [("lamina-error", "content-digest-mismatch"), ("lamina-upload-offset", "0")],
            body: body)
        #expect(e.code == 602)
        #expect(e.name == "content-digest-mismatch")
        #expect(e.reason == "the bytes hash to 3f")
        #expect(e.heldOffset == 0)
        #expect(e.uploadOutcome == .digestMismatch)
        let garbled = ContentHTTPError(
            status: 403, headers: [("lamina-error", "forbidden")], body: Array("<html>".utf8))
        #expect(garbled.code == 0 && garbled.name == "forbidden" && garbled.uploadOutcome == .fail)
        func outcome(_ status: Int, _ code: UInt16 = 0, _ name: String = "") -> ContentHTTPError.UploadOutcome {
            ContentHTTPError(status: status, code: code, name: name, reason: "").uploadOutcome
        }
        #expect(outcome(409, 603, "upload-offset-mismatch") == .resume)
        #expect(outcome(408, 606, "upload-stalled") == .resume)
        #expect(outcome(409, 604, "upload-mismatch") == .fail)
        #expect(outcome(409, 600, "content-not-ready") == .fail)
        #expect(outcome(401, 210) == .reauthenticate)
        #expect(outcome(429, 701) == .retryLater)
        #expect(outcome(500, 900) == .retryLater)
        #expect(outcome(503, 901) == .retryLater)
        #expect(outcome(507, 700) == .fail)
        #expect(outcome(413, 406) == .fail)
        let retry = ContentHTTPError(status: 429, headers: [("retry-after", "3")], body: [])
        #expect(retry.retryAfterSeconds == 3 && retry.isTransient)
        // A node still fetching a peer's content (CONTENT.md §9): retried when it says when.
        let fetching = Array(#"{"code": 600, "name": "content-not-ready", "reason": "still fetching"}"#.utf8)
        #expect(
            ContentHTTPError(
                status: 409, headers: [("lamina-error", "content-not-ready"), ("retry-after", "1")], body: fetching
            ).isTransient)
        #expect(
            !ContentHTTPError(status: 409, headers: [("lamina-error", "content-not-ready")], body: fetching).isTransient
        )
        // The JSON error's fields are read one by one: a malformed one is left out, the others kept.
        let parsed = ContentHTTPError(status: 409, headers: [], body: fetching)
        #expect(parsed.code == 600 && parsed.name == "content-not-ready" && parsed.reason == "still fetching")
        let odd = ContentHTTPError(
            status: 413, headers: [], body: Array(#"{"code": "x", "name": "too-large", "reason": 5}"#.utf8))
        #expect(odd.code == 0 && odd.name == "too-large" && odd.reason == "the node answered 413")
        let garbage = ContentHTTPError(
            status: 502, headers: [("lamina-error", "bad-gateway")], body: Array("<html>".utf8))
        #expect(garbage.code == 0 && garbage.name == "bad-gateway" && garbage.reason == "the node answered 502")
    }
}

@Suite struct ContentStagingTests {
    @Test func dataOverTwoKiBIsStagedWithItsSizeAndDigest() async throws {
        try await withTemporaryDirectory { dir in
            let staging = ContentStaging(directory: dir.appendingPathComponent("staging"))
            let inline = try MessagePart.with(mimeType: "image/png", data: patternBytes(2_048), staging: staging)
            #expect(inline.inlineBytes?.count == 2_048)
            let empty = try MessagePart.with(mimeType: "image/png", data: Data(), staging: staging)
            #expect(empty.inlineBytes == [])

            let data = patternBytes(2_049)
            let part = try MessagePart.with(mimeType: "image/png", data: data, staging: staging)
            guard case .external(let ref) = part.content else {
                Issue.record("not rich content")
                return
            }
            #expect(ref.size == 2_049)
            #expect(ref.sha256 == (try SHA256Hasher.hash([UInt8](data))))
            let staged = try #require(staging.stagedFile(for: ref.id))
            #expect(try Data(contentsOf: staged) == data)
            #expect(staging.discard(ref.id))
            #expect(!FileManager.default.fileExists(atPath: staged.path))
            #expect(!staging.discard(ref.id))
            // Another client's staging does not hold it.
            let other = ContentStaging(directory: dir.appendingPathComponent("other"))
            let again = try MessagePart.with(mimeType: "image/png", data: data, staging: staging)
            guard case .external(let againRef) = again.content else {
                Issue.record("not rich content")
                return
            }
            #expect(other.stagedFile(for: againRef.id) == nil && !other.discard(againRef.id))
            #expect(staging.discard(againRef.id))
        }
    }

    @Test func filesAreCopiedInChunksAndLaterChangesDoNotLeak() async throws {
        try await withTemporaryDirectory { dir in
            let source = dir.appendingPathComponent("video.bin")
            let staging = ContentStaging(directory: dir.appendingPathComponent("staging"))
            let data = patternBytes(3 * ContentStaging.chunkBytes + 17, seed: 3)
            try data.write(to: source)
            let part = try MessagePart.with(mimeType: "video/mp4", fileURL: source, staging: staging)
            guard case .external(let ref) = part.content else {
                Issue.record("not rich content")
                return
            }
            #expect(ref.size == UInt64(data.count))
            #expect(ref.sha256 == (try SHA256Hasher.hash([UInt8](data))))
            try Data([1, 2, 3]).write(to: source)  // the app changes its file afterwards
            let staged = try #require(staging.stagedFile(for: ref.id))
            #expect(try Data(contentsOf: staged) == data)
            staging.discard(ref.id)

            let small = dir.appendingPathComponent("small.txt")
            try Data("hello".utf8).write(to: small)
            #expect(
                try MessagePart.with(mimeType: "text/plain", fileURL: small, staging: staging).inlineBytes
                    == Array("hello".utf8))
            expectCode(.notFound) {
                _ = try MessagePart.with(
                    mimeType: "text/plain", fileURL: dir.appendingPathComponent("missing"), staging: staging)
            }
            expectCode(.invalidMIMEType) { _ = try MessagePart.with(mimeType: "bad", fileURL: small, staging: staging) }
        }
    }
}

@Suite struct UploadGatingTests {
    /// A client of alice with a local conversation with bob.
    private func conversation(_ client: LaminaClient) throws -> ConversationID {
        try client.newConversation(participants: [bob], options: ConversationOptions(isDistinct: false)).id
    }

    @Test func sendMovesTheStagedFileAndTheOutboxHoldsTheMessageUntilItsContentIsUp() async throws {
        try await withClient { client in
            let c = try conversation(client)
            let data = patternBytes(5_000)
            let rich = try MessagePart.with(mimeType: "image/png", data: data, staging: client.staging)
            guard case .external(let ref) = rich.content else {
                Issue.record("not rich")
                return
            }
            let staged = try #require(client.staging.stagedFile(for: ref.id))
            let first = try client.send(client.newMessage(parts: [try MessagePart.with(text: "caption"), rich]), in: c)
            let part = first.message.identifier(of: rich)
            let later = try client.send(client.newMessage(parts: [try MessagePart.with(text: "after")]), in: c)
            // Another conversation is not held back by this one's upload.
            let elsewhere = try client.newConversation(
                participants: [carol], options: ConversationOptions(isDistinct: false)
            ).id
            let other = try client.send(
                client.newMessage(parts: [try MessagePart.with(text: "elsewhere")]), in: elsewhere)

            // The bytes moved under the content directory; staging forgot them.
            #expect(!FileManager.default.fileExists(atPath: staged.path))
            #expect(client.staging.stagedFile(for: ref.id) == nil)
            #expect(try Data(contentsOf: client.store.contentFileURL(for: part)) == data)
            #expect(try client.store.transferStatus(of: part) == .awaitingUpload)
            let pending = try client.store.pendingUploads()
            #expect(pending.map(\.part) == [part])
            #expect(pending.first?.reference == ref)
            #expect(pending.first?.file == client.store.contentFileURL(for: part))
            let progress = try #require(client.uploadProgress(for: part))
            #expect(progress.totalUnitCount == 5_000 && progress.completedUnitCount == 0)
            #expect(progress.isPausable && progress.isCancellable)

            // The conversations' creations go; the rich message and what follows it in its
            // conversation wait; the other conversation's message and a receipt go on.
            try client.store.enqueue(
                try OutboxEncoder.entry(
                    for: .deliveryReceipt(
                        DeliveryReceipt(
                            requestID: UUID(), conversationID: c, upTo: position(10)))))
            let out = try client.store.dequeueOutbox(limit: 100)
            #expect(
                out.map(\.kind) == [
                    OutboxCommandKind.createConversation.rawValue, OutboxCommandKind.createConversation.rawValue,
                    OutboxCommandKind.sendMessage.rawValue, OutboxCommandKind.deliveryReceipt.rawValue,
                ])
            #expect(out[2].id == other.id.uuid)
            for entry in out { try client.store.markSent(entry.id) }
            #expect(try client.store.dequeueOutbox(limit: 100).isEmpty)

            #expect(try client.store.finishUpload(of: part))
            #expect(try client.store.pendingUploads().isEmpty)
            let released = try client.store.dequeueOutbox(limit: 100)
            #expect(released.map(\.id) == [first.id.uuid, later.id.uuid])
            // The sent message's content counts as cached content of this device.
            #expect(try client.currentDiskUtilization().contentBytes == 5_000)
        }
    }

    @Test func aRichPartThatWasNotStagedIsRefused() async throws {
        try await withClient { client in
            let c = try conversation(client)
            let part = MessagePart(
                mimeType: "image/png",
                content: .external(
                    ContentReference(id: .random(), size: 4_000, sha256: [UInt8](repeating: 1, count: 32))))
            expectCode(.contentUnavailable) { _ = try client.send(client.newMessage(parts: [part]), in: c) }
            #expect(try client.store.outboxEntries().isEmpty)
        }
    }

    @Test func cancellingAQueuedUploadFailsTheMessageAndReleasesTheOutbox() async throws {
        try await withClient { client in
            let c = try conversation(client)
            let rich = try MessagePart.with(mimeType: "image/png", data: patternBytes(3_000), staging: client.staging)
            let message = try client.send(client.newMessage(parts: [rich]), in: c)
            let later = try client.send(client.newMessage(parts: [try MessagePart.with(text: "after")]), in: c)
            let part = message.message.identifier(of: rich)
            let events = client.contentTransferEvents()
            let progress = try #require(client.uploadProgress(for: part))
            progress.cancel()
            let failed = try await firstEvent(events) { if case .failed(part, .upload, _) = $0 { true } else { false } }
            guard case .failed(_, _, let error) = failed else { return }
            #expect(error.code == .cancelled)
            let failure = try #require(try client.sendFailure(of: message.id))
            #expect(failure.isCancelled && failure.code == OutboxFailure.cancelledCode)
            #expect(try client.store.pendingUploads().isEmpty)
            let out = try client.store.dequeueOutbox(limit: 100).map(\.id)
            #expect(out.contains(later.id.uuid) && !out.contains(message.id.uuid))
        }
    }
}

/// The first event matching `predicate`, or a `.timedOut` error after `timeout`.
func firstEvent(
    _ events: AsyncStream<ContentTransferEvent>, timeout: Duration = .seconds(60),
    where predicate: @escaping @Sendable (ContentTransferEvent) -> Bool
) async throws -> ContentTransferEvent {
    try await withThrowingTaskGroup(of: ContentTransferEvent?.self) { group in
        group.addTask {
            for await event in events where predicate(event) { return event }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw ClientError(.timedOut, "no matching transfer event within \(timeout)")
        }
        defer { group.cancelAll() }
        guard let event = try await group.next() ?? nil else {
            throw ClientError(.timedOut, "the transfer events ended")
        }
        return event
    }
}
