import Foundation
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaTestPostgres
import Testing

@testable import LaminaClient

/// Rich content with two nodes on one PostgreSQL (issue 18, item 3): the nodes share the
/// records through the store and the files through one content directory (`--content-dir`),
/// so content uploaded through one node downloads, or resumes, through the other.
@Suite struct SharedPostgresContentTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    /// Two nodes on a fresh database, both with `contentDirectory`.
    static func twoNodes(_ name: String, contentDirectory: URL) async throws -> (TestNode, TestNode) {
        let database = try PostgresTestCluster.newDatabase()
        let first = try await SharedPostgresNodesTests.node("\(name)-a", on: database) {
            $0.content.directory = contentDirectory.path
        }
        let second = try await SharedPostgresNodesTests.node("\(name)-b", on: database, trusting: first) {
            $0.content.directory = contentDirectory.path
        }
        return (first, second)
    }

    @Test func contentUploadedThroughOneNodeDownloadsThroughTheOther() async throws {
        let shared = Fixtures.temporaryDirectory("pg-content-shared")
        let (first, second) = try await Self.twoNodes("pg-content", contentDirectory: shared)
        #expect(first.server.content.files.root.path == shared.standardizedFileURL.path)
        #expect(second.server.content.files.root.path == shared.standardizedFileURL.path)
        #expect(first.server.prepared.dataDirectory != second.server.prepared.dataDirectory)

        let alice = try RichContentTests.client(Self.alice, on: first)
        let bob = try RichContentTests.client(Self.bob, on: second)
        let c = try RichContentTests.conversation(alice, with: [Self.bob])
        let data = RichContentTests.bytes(300 * 1024, seed: 5)
        let (rich, ref) = try RichContentTests.richPart("application/octet-stream", data, by: alice)
        let message = try alice.send(alice.newMessage(parts: [rich]), in: c)
        try await ClientEndToEndTests.connect(alice, on: first)
        try await ClientEndToEndTests.waitUntil(alice, "alice's message to be sent through node 1") {
            try alice.isSent(message.id)
        }
        // The bytes are in the shared directory, not in either node's data directory.
        let name = ref.id.uuid.uuidString.lowercased()
        #expect(FileManager.default.fileExists(atPath: shared.appendingPathComponent("complete/\(name)").path))
        #expect(
            !FileManager.default.fileExists(
                atPath: first.server.prepared.dataDirectory.appendingPathComponent("content/complete/\(name)").path))

        try await ClientEndToEndTests.connect(bob, on: second)
        try await ClientEndToEndTests.waitUntil(bob, "bob to receive the message on node 2") {
            try bob.message(message.id) != nil
        }
        let received = try #require(try bob.message(message.id))
        let part = received.message.identifier(of: received.message.parts[0])
        #expect(try Data(contentsOf: try await bob.downloadedContent(of: part)) == data)

        try await alice.close()
        try await bob.close()
        await first.stop()
        await second.stop()
    }

    /// The control: each node with its own content directory (the default), node 2 has the
    /// record but not the bytes, and bob's download through it fails.
    @Test func withoutASharedDirectoryTheOtherNodeCannotServeTheBytes() async throws {
        let database = try PostgresTestCluster.newDatabase()
        let first = try await SharedPostgresNodesTests.node("pg-content-own-a", on: database)
        let second = try await SharedPostgresNodesTests.node("pg-content-own-b", on: database, trusting: first)
        #expect(first.server.content.files.root != second.server.content.files.root)
        let alice = try RichContentTests.client(Self.alice, on: first)
        let bob = try RichContentTests.client(Self.bob, on: second)
        let c = try RichContentTests.conversation(alice, with: [Self.bob])
        let (rich, _) = try RichContentTests.richPart(
            "application/octet-stream", RichContentTests.bytes(300 * 1024, seed: 6), by: alice)
        let message = try alice.send(alice.newMessage(parts: [rich]), in: c)
        try await ClientEndToEndTests.connect(alice, on: first)
        try await ClientEndToEndTests.waitUntil(alice, "alice's message to be sent through node 1") {
            try alice.isSent(message.id)
        }
        try await ClientEndToEndTests.connect(bob, on: second)
        try await ClientEndToEndTests.waitUntil(bob, "bob to receive the message on node 2") {
            try bob.message(message.id) != nil
        }
        let received = try #require(try bob.message(message.id))
        let part = received.message.identifier(of: received.message.parts[0])
        await #expect(throws: (any Error).self) { _ = try await bob.downloadedContent(of: part) }

        try await alice.close()
        try await bob.close()
        await first.stop()
        await second.stop()
    }

    /// Alice's 12 MiB upload through node 1 is cut at 4 MiB by node 1 stopping; her device
    /// then connects to node 2, which continues from the offset node 1 recorded (not from 0),
    /// and bob, on node 2, downloads the same bytes.
    @Test func anUploadCutOnOneNodeResumesThroughTheOther() async throws {
        let shared = Fixtures.temporaryDirectory("pg-content-resume")
        let (first, second) = try await Self.twoNodes("pg-content-resume", contentDirectory: shared)
        let aliceData = Fixtures.temporaryDirectory("pg-content-resume-alice")
        func alice(on node: TestNode) throws -> LaminaClient {
            let configuration = LaminaConfiguration(
                nodeURL: URL(string: node.server.url)!,
                trust: .certificateAuthorities(URL(fileURLWithPath: node.server.prepared.certificatePath)),
                dataDirectory: aliceData,
                reconnect: ReconnectPolicy(initialDelay: .milliseconds(50), maxDelay: .milliseconds(300)))
            return try LaminaClient(configuration: configuration, user: Self.alice)
        }
        let alice1 = try alice(on: first)
        let c = try RichContentTests.conversation(alice1, with: [Self.bob])
        let data = RichContentTests.bytes(12 << 20, seed: 11)
        let (rich, ref) = try RichContentTests.richPart("video/mp4", data, by: alice1)
        let message = try alice1.send(alice1.newMessage(parts: [rich]), in: c)
        let part = message.message.identifier(of: rich)

        let (cutDone, cutSignal) = AsyncStream<Void>.makeStream()
        let once = Once()
        alice1.transfers.uploader.chunkHook = { _, sent in
            guard sent >= 4 << 20, once.first() else { return }
            await first.stop()
            cutSignal.yield()
            cutSignal.finish()
        }
        try await ClientEndToEndTests.connect(alice1, on: first)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { for await _ in cutDone { return } }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                throw ClientWaitTimeout(waitingFor: "node 1 to stop under the upload")
            }
            defer { group.cancelAll() }
            try await group.next()
        }
        #expect(alice1.transfers.uploader.uploadStarts(of: part) == [0])
        try await alice1.close()

        // What node 1 recorded before it stopped, read through node 2's store.
        let recorded = try #require(try second.server.store.readNow { try $0.upload(ref.id) })
        #expect(recorded.state == .uploading)
        #expect(recorded.receivedBytes > 0 && recorded.receivedBytes < ref.size, "\(recorded.receivedBytes)")

        let alice2 = try alice(on: second)
        let events = alice2.contentTransferEvents()
        try await ClientEndToEndTests.connect(alice2, on: second)
        _ = try await RichContentTests.event(events, timeout: .seconds(90)) {
            if case .completed(part, .upload) = $0 { true } else { false }
        }
        #expect(alice2.transfers.uploader.uploadStarts(of: part) == [recorded.receivedBytes])
        try await ClientEndToEndTests.waitUntil(alice2, "alice's message to be sent through node 2") {
            try alice2.isSent(message.id)
        }

        let bob = try RichContentTests.client(Self.bob, on: second)
        try await ClientEndToEndTests.connect(bob, on: second)
        try await ClientEndToEndTests.waitUntil(bob, "bob to receive the message") {
            try bob.message(message.id) != nil
        }
        #expect(try Data(contentsOf: try await bob.downloadedContent(of: part)) == data)

        try await alice2.close()
        try await bob.close()
        await second.stop()
    }

    /// The start-up recovery of a node on a shared store leaves other nodes' work alone: a
    /// partial file longer than its record (another node writing past its last fsync) is not
    /// cut, a complete file whose record still says uploading (another node between the rename
    /// and the record) is kept, and no record is corrected; a file without any record goes.
    @Test func sharedRecoveryTouchesOnlyOrphans() throws {
        let root = Fixtures.temporaryDirectory("pg-content-recovery")
        let files = try ContentFiles(root: root)
        let writing = ContentUpload(
            id: ContentID(uuid: UUID()), owner: Self.alice, declaredSize: 100, sha256: [UInt8](repeating: 0, count: 32),
            receivedBytes: 10, state: .uploading, createdAt: .now())
        var promoting = writing
        promoting.id = ContentID(uuid: UUID())
        var elsewhere = writing
        elsewhere.id = ContentID(uuid: UUID())
        elsewhere.state = .complete
        let orphan = ContentID(uuid: UUID())
        try Data(count: 40).write(to: URL(fileURLWithPath: files.partialPath(writing.id)))
        try Data(count: 100).write(to: URL(fileURLWithPath: files.completePath(promoting.id)))
        try Data(count: 5).write(to: URL(fileURLWithPath: files.partialPath(orphan)))

        let shared = try files.recover(shared: true) { [writing, promoting, elsewhere] }
        #expect(shared.truncated == 0)
        #expect(shared.orphansDeleted == 1)
        #expect(!FileManager.default.fileExists(atPath: files.partialPath(orphan)))
        #expect(try FileManager.default.attributesOfItem(atPath: files.partialPath(writing.id))[.size] as? Int == 40)
        #expect(FileManager.default.fileExists(atPath: files.completePath(promoting.id)))
        // reported; the service corrects none on a shared store
        #expect(shared.damaged == [elsewhere.id: UInt64?.none])

        // The same files on a single node: cut, and the early complete file deleted.
        let single = try files.recover([writing, promoting, elsewhere])
        #expect(single.truncated == 1)
        #expect(!FileManager.default.fileExists(atPath: files.completePath(promoting.id)))
    }

    @Test func anUnwritableContentDirectoryIsAClearStartupError() throws {
        // A path under a regular file cannot be created (even as root).
        let parent = Fixtures.temporaryDirectory("pg-content-bad")
        let file = parent.appendingPathComponent("a-file")
        try Data("x".utf8).write(to: file)
        #expect {
            _ = try ContentFiles(root: file.appendingPathComponent("content"))
        } throws: { error in
            "\(error)".contains("cannot create the content directory \(file.path)/content/partial")
        }
        // An existing directory without write permission (root writes anywhere: not checkable as root).
        guard getuid() != 0 else { return }
        let existing = parent.appendingPathComponent("ro")
        try FileManager.default.createDirectory(
            at: existing.appendingPathComponent("partial"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(
            at: existing.appendingPathComponent("complete"), withIntermediateDirectories: true)
        try FileManager.default.setAttributes(
            [.posixPermissions: 0o500], ofItemAtPath: existing.appendingPathComponent("partial").path)
        defer {
            try? FileManager.default.setAttributes(
                [.posixPermissions: 0o700], ofItemAtPath: existing.appendingPathComponent("partial").path)
        }
        #expect {
            _ = try ContentFiles(root: existing)
        } throws: { error in
            "\(error)".contains("the content directory \(existing.path)/partial is not writable")
        }
    }
}
