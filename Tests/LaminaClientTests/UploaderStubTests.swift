import Foundation
import LaminaModel
import LaminaTransport
import Testing

@testable import LaminaClient

/// The uploader and downloader against `StubContentServer`: the connection is lent by hand
/// (as the sync connector does once its stream is authenticated).
@Suite struct UploaderStubTests {
    private func withStubClient(_ body: (LaminaClient, StubContentServer, ConversationID) async throws -> Void)
        async throws
    {
        try await withTemporaryDirectory { dir in
            let stub = try await StubContentServer.start(in: dir)
            let config = LaminaConfiguration(
                nodeURL: URL(string: stub.url)!, trust: .certificateAuthorities(URL(fileURLWithPath: stub.certificate)),
                dataDirectory: dir)
            let client = try LaminaClient(configuration: config, user: alice)
            let c = try client.newConversation(participants: [bob], options: ConversationOptions(isDistinct: false)).id
            do {
                try await body(client, stub, c)
            } catch {
                client.transfers.stop()
                await stub.stop()
                throw error
            }
            client.transfers.stop()
            await stub.stop()
        }
    }

    /// Lends a new stub connection with `token` to the client's transfers.
    @discardableResult
    private func lend(_ client: LaminaClient, _ stub: StubContentServer, token: String = "good") async throws
        -> TransportConnection
    {
        let connection = try await stub.connect()
        client.transfers.link.start()
        client.transfers.link.connected(connection)
        client.transfers.link.authenticated(token: token, on: connection)
        return connection
    }

    private func sendRich(_ client: LaminaClient, _ c: ConversationID, _ data: Data) throws -> (
        StoredMessage, MessagePartID, ContentReference
    ) {
        let rich = try MessagePart.with(mimeType: "application/octet-stream", data: data, staging: client.staging)
        guard case .external(let ref) = rich.content else { throw ClientError(.invalidObject, "not rich") }
        let message = try client.send(client.newMessage(parts: [rich]), in: c)
        return (message, message.message.identifier(of: rich), ref)
    }

    @Test func anUploadPausesAfterAChunkAndResumesFromTheNodesOffset() async throws {
        try await withStubClient { client, stub, c in
            let data = patternBytes(1 << 20 | 5)
            let (message, part, ref) = try sendRich(client, c, data)
            let progress = try #require(client.uploadProgress(for: part))
            client.transfers.uploader.chunkHook = { _, sent in
                if sent >= 300_000, !progress.isPaused, progress.completedUnitCount < 600_000 { progress.pause() }
            }
            let events = client.contentTransferEvents()
            try await lend(client, stub)
            client.transfers.uploader.start()
            let paused = try await firstEvent(events) { if case .paused(part, .upload, _) = $0 { true } else { false } }
            guard case .paused(_, _, let offset) = paused else { return }
            #expect(offset > 0 && offset < UInt64(data.count))
            #expect(stub.upload(ref.id)?.bytes.count == Int(offset))  // what the node holds
            #expect(progress.completedUnitCount == Int64(offset))
            #expect(try client.store.dequeueOutbox(limit: 10).allSatisfy { $0.id != message.id.uuid })  // still held

            client.transfers.uploader.chunkHook = nil
            progress.resume()
            _ = try await firstEvent(events) { if case .completed(part, .upload) = $0 { true } else { false } }
            #expect(client.transfers.uploader.uploadStarts(of: part) == [0, offset])
            #expect(stub.upload(ref.id)?.bytes == [UInt8](data))
            #expect(stub.upload(ref.id)?.complete == true)
            #expect(try client.store.transferStatus(of: part) == .complete)
            #expect(client.uploadProgress(for: part) == nil)
            #expect(progress.completedUnitCount == progress.totalUnitCount)
            #expect(try client.store.dequeueOutbox(limit: 10).contains { $0.id == message.id.uuid })
        }
    }

    @Test func aResetStreamResumesWithoutSendingAgainWhatTheNodeHolds() async throws {
        try await withStubClient { client, stub, c in
            let data = patternBytes(800_000, seed: 9)
            let (_, part, ref) = try sendRich(client, c, data)
            stub.resetNextPut(after: 400_000)
            let events = client.contentTransferEvents()
            try await lend(client, stub)
            client.transfers.uploader.start()
            _ = try await firstEvent(events) { if case .completed(part, .upload) = $0 { true } else { false } }
            let starts = client.transfers.uploader.uploadStarts(of: part)
            #expect(starts.count == 2)
            #expect(starts.first == 0)
            #expect((starts.last ?? 0) >= 400_000)
            #expect(stub.requests.filter { $0.hasPrefix("HEAD") }.count == 2)
            #expect(stub.upload(ref.id)?.bytes == [UInt8](data))
        }
    }

    @Test func aDigestMismatchRestartsOnceThenFailsTheMessage() async throws {
        try await withStubClient { client, stub, c in
            let (message, part, _) = try sendRich(client, c, patternBytes(10_000))
            let later = try client.send(client.newMessage(parts: [try MessagePart.with(text: "after")]), in: c)
            // The staged file changes after staging: the bytes no longer match the reference.
            let file = client.store.contentFileURL(for: part)
            try patternBytes(10_000, seed: 1).write(to: file)
            let events = client.contentTransferEvents()
            try await lend(client, stub)
            client.transfers.uploader.start()
            let failed = try await firstEvent(events) { if case .failed(part, .upload, _) = $0 { true } else { false } }
            guard case .failed(_, _, let error) = failed else { return }
            #expect(error.code == .contentRefused)
            #expect(client.transfers.uploader.uploadStarts(of: part) == [0, 0])
            let failure = try #require(try client.sendFailure(of: message.id))
            #expect(failure.code == 602)
            #expect(failure.reason.hasPrefix("content-digest-mismatch"))
            #expect(try client.store.dequeueOutbox(limit: 10).map(\.id).contains(later.id.uuid))
        }
    }

    @Test func anExpiredSessionIsForgottenAndTheUploadGoesOnWithTheNextToken() async throws {
        try await withStubClient { client, stub, c in
            let (_, part, ref) = try sendRich(client, c, patternBytes(50_000))
            try client.store.setSessionToken("stale")
            let events = client.contentTransferEvents()
            let first = try await lend(client, stub, token: "stale")
            client.transfers.uploader.start()
            try await first.closeFuture.get()  // the uploader closed it after the 401
            #expect(try client.store.sessionToken() == nil)  // authenticate anew, not resume
            try await lend(client, stub, token: "good")
            _ = try await firstEvent(events) { if case .completed(part, .upload) = $0 { true } else { false } }
            #expect(stub.upload(ref.id)?.complete == true)
        }
    }

    @Test func anUploadResumesFromTheNodesOffsetAfterTheAppRestarts() async throws {
        try await withTemporaryDirectory { dir in
            let stub = try await StubContentServer.start(in: dir)
            defer { Task { await stub.stop() } }
            let config = LaminaConfiguration(
                nodeURL: URL(string: stub.url)!, trust: .certificateAuthorities(URL(fileURLWithPath: stub.certificate)),
                dataDirectory: dir)
            let data = patternBytes(1 << 20, seed: 2)
            var first: LaminaClient? = try LaminaClient(configuration: config, user: alice)
            let c = try first!.newConversation(participants: [bob], options: ConversationOptions(isDistinct: false)).id
            let (message, part, ref) = try sendRich(first!, c, data)
            let progress = try #require(first!.uploadProgress(for: part))
            first!.transfers.uploader.chunkHook = { _, sent in
                if sent >= 300_000, !progress.isPaused { progress.pause() }
            }
            let events = first!.contentTransferEvents()
            try await lend(first!, stub)
            first!.transfers.uploader.start()
            let paused = try await firstEvent(events) { if case .paused(part, .upload, _) = $0 { true } else { false } }
            guard case .paused(_, _, let offset) = paused else { return }
            first!.transfers.stop()
            try first!.store.close()
            first = nil

            // The app starts again: the upload is found in the store and goes on from the node's bytes.
            let second = try LaminaClient(configuration: config, user: alice)
            #expect(try second.store.pendingUploads().map(\.part) == [part])
            let again = second.contentTransferEvents()
            try await lend(second, stub)
            second.transfers.uploader.start()
            _ = try await firstEvent(again) { if case .completed(part, .upload) = $0 { true } else { false } }
            #expect(second.transfers.uploader.uploadStarts(of: part) == [offset])
            #expect(stub.upload(ref.id)?.bytes == [UInt8](data))
            #expect(try second.store.dequeueOutbox(limit: 10).contains { $0.id == message.id.uuid })
            second.transfers.stop()
        }
    }

    @Test func aDownloadContinuesFromThePartialFileAndChecksTheDigest() async throws {
        try await withStubClient { client, stub, c in
            let bytes = [UInt8](patternBytes(300_000, seed: 5))
            let id = ContentID.random()
            try stub.store(bytes, as: id)
            let good = ContentReference(id: id, size: UInt64(bytes.count), sha256: try SHA256Hasher.hash(bytes))
            var m = try remoteMessage(in: c, at: 100)
            m.parts = [
                MessagePart(mimeType: "image/png", content: .external(good)),
                MessagePart(
                    mimeType: "image/png",
                    content: .external(
                        ContentReference(id: id, size: good.size, sha256: [UInt8](repeating: 0, count: 32)))),
            ]
            try client.store.apply([.message(m, receivedAt: received)])
            let part = m.identifier(of: m.parts[0])
            // an interrupted download
            try Data(bytes.prefix(100_000)).write(to: client.store.contentFileURL(for: part))
            try await lend(client, stub)

            let url = try await client.downloadedContent(of: part)
            #expect(try Data(contentsOf: url) == Data(bytes))
            #expect(stub.requests.contains("GET bytes=100000-"))
            guard case .file(let file) = try client.content(of: part) else {
                Issue.record("not a file")
                return
            }
            #expect(file == url)

            let bad = m.identifier(of: m.parts[1])
            let error = await #expect(throws: ClientError.self) { try await client.downloadedContent(of: bad) }
            #expect(error?.reason.contains("content-digest-mismatch") == true)
            #expect(!FileManager.default.fileExists(atPath: client.store.contentFileURL(for: bad).path))
            #expect(try client.store.transferStatus(of: bad) == .readyForDownload)
        }
    }
}
