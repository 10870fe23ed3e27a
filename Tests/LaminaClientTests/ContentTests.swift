import Foundation
import LaminaModel
import Testing

@testable import LaminaClient

/// Writes `reference.size` bytes to the destination, as a download would.
struct FakeTransfer: ContentTransferring {
    var failing: Set<ContentID> = []
    /// Content whose file ends one byte short (a download that lies about its end).
    var short: Set<ContentID> = []
    func download(
        _ reference: ContentReference, of part: MessagePartID, to destination: URL,
        progress: @escaping @Sendable (UInt64, UInt64) -> Void
    ) async throws {
        if failing.contains(reference.id) { throw ClientError(.contentUnavailable, "fake failure") }
        let half = reference.size / 2
        progress(half, reference.size)
        try Data(repeating: 0xAB, count: Int(reference.size) - (short.contains(reference.id) ? 1 : 0)).write(
            to: destination)
        progress(reference.size, reference.size)
    }
}

final class ProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [UInt64] = []
    func add(_ v: UInt64) { lock.withLock { values.append(v) } }
    var all: [UInt64] { lock.withLock { values } }
}

@Suite struct ContentPolicyTests {
    private func auto(
        _ mime: MIMEType, _ size: UInt64, purged: Bool = false, _ settings: ContentSettings = ContentSettings()
    ) -> Bool {
        ContentPolicy.shouldAutoDownload(mimeType: mime, size: size, wasPurged: purged, settings: settings)
    }

    @Test func defaults() {
        let s = ContentSettings()
        #expect(s.autoDownloadMaximumContentSize == 2_048)
        #expect(s.autoDownloadMIMETypes == [.textPlain])
        #expect(s.diskCapacity == 0)
        #expect(auto("text/plain", 5_000_000))  // text/plain downloads whatever its size
        #expect(auto("image/png", 2_048))  // anything of 2 KB or less
        #expect(!auto("image/png", 2_049))
        #expect(!auto("text/plain", 10, purged: true))  // purged content never comes back by itself
    }

    @Test func customSettings() {
        let big = ContentSettings(autoDownloadMaximumContentSize: 100 * 1_024, autoDownloadMIMETypes: ["image/jpeg"])
        #expect(auto("image/jpeg", 50_000_000, big))
        #expect(auto("video/mp4", 100 * 1_024, big))
        #expect(!auto("video/mp4", 100 * 1_024 + 1, big))
        #expect(!auto("text/plain", 200_000, big))
        let all = ContentSettings(autoDownloadMIMETypes: nil)
        #expect(auto("video/mp4", 1_000_000_000, all))
        #expect(!auto("video/mp4", 10, purged: true, all))
        let none = ContentSettings(autoDownloadMaximumContentSize: 0, autoDownloadMIMETypes: [])
        #expect(!auto("text/plain", 3_000, none))
        #expect(!auto("image/png", 1, none))
        #expect(throws: ClientError.self) {
            try ContentSettings(diskCapacity: ContentPolicy.maxDiskCapacity + 1).validate()
        }
        #expect(throws: ClientError.self) {
            try ContentSettings(autoDownloadMaximumContentSize: Limits.maxPartBytes + 1).validate()
        }
    }

    @Test func purgePlanTakesLeastRecentlyAccessedDownToEightyPercent() {
        let m = MessageID.random()
        let items = (0..<10).map { i in
            CachedContent(
                part: MessagePartID(message: m, part: UUID()), size: 100,
                lastAccess: Timestamp(millisecondsSince1970: Int64(1_000 - i * 10)))
        }
        // 1,000 bytes against a 900-byte cap: purge to at most 720, i.e. three files, oldest first.
        let plan = ContentPolicy.purgePlan(items.shuffled(), capacity: 900)
        #expect(plan.map(\.part) == [items[9], items[8], items[7]].map(\.part))
        #expect(ContentPolicy.purgePlan(items, capacity: 1_000).isEmpty)  // at the cap is not over it
        #expect(ContentPolicy.purgePlan(items, capacity: 0).isEmpty)  // 0 = unlimited
        #expect(ContentPolicy.purgeTarget(capacity: 900) == 720)
        #expect(ContentPolicy.purgeTarget(capacity: 7) == 5)  // floor(80%)
        #expect(ContentPolicy.purgeTarget(capacity: UInt64.max) == UInt64.max / 5 * 4)  // no overflow
    }
}

@Suite struct ContentStoreTests {
    /// A conversation with one message holding rich parts of the given types and sizes.
    private func seed(_ store: LocalStore, _ parts: [(MIMEType, UInt64)]) throws -> Message {
        let c = try conversation([alice, bob])
        var m = try remoteMessage(in: c.id, at: 1)
        m.parts = parts.map { richPart($0.0, size: $0.1) }
        try store.apply([.conversation(c), .message(m, receivedAt: received)])
        return m
    }

    @Test func autoDownloadFetchesWhatTheRulesAllowAndRecordsFiles() async throws {
        try await withStore { store in
            let m = try seed(store, [("text/plain", 5_000), ("image/png", 50_000), ("image/gif", 2_000)])
            let manager = try ContentManager(store: store, transfer: FakeTransfer())
            // text/plain by type; the 2,000-byte GIF by size; the 50 KB PNG stays.
            let done = try await manager.runAutoDownloads()
            #expect(done == [m.identifier(of: m.parts[0]), m.identifier(of: m.parts[2])])
            let stored = try #require(try store.message(m.id))
            #expect(stored.partStates.map(\.transferStatus) == [.complete, .readyForDownload, .complete])
            #expect(stored.partStates[0].autoDownloaded)
            let file = store.contentFileURL(for: m.identifier(of: m.parts[0]))
            #expect(file.path.hasPrefix(store.location.contentDirectory.path))
            #expect((try Data(contentsOf: file)).count == 5_000)
            #expect(try store.currentDiskUtilization().contentBytes == 7_000)
            #expect(try store.currentDiskUtilization().databaseBytes > 0)
            // Nothing is left to fetch by itself.
            #expect(try await manager.runAutoDownloads().isEmpty)
        }
    }

    @Test func manualDownloadReportsProgressAndAccessIsRecorded() async throws {
        try await withStore { store in
            let m = try seed(store, [("image/png", 50_000)])
            let part = m.identifier(of: m.parts[0])
            let manager = try ContentManager(store: store, transfer: FakeTransfer())
            #expect(try store.accessContent(of: part) == .unavailable(.readyForDownload))
            let log = ProgressLog()
            let url = try await manager.downloadContent(of: part) { received, _ in log.add(received) }
            #expect(log.all == [25_000, 50_000])
            #expect(try store.accessContent(of: part, now: Timestamp(millisecondsSince1970: 9_999)) == .file(url))
            #expect(try store.cachedContent().first?.lastAccess == Timestamp(millisecondsSince1970: 9_999))
            // Already complete: a second download is refused with a clear error.
            let again = await #expect(throws: ClientError.self) { try await manager.downloadContent(of: part) }
            #expect(again?.code == .contentUnavailable)
        }
    }

    @Test func failedDownloadGoesBackToReady() async throws {
        try await withStore { store in
            let m = try seed(store, [("image/png", 50_000)])
            guard case .external(let ref) = m.parts[0].content else {
                Issue.record("not rich")
                return
            }
            let manager = try ContentManager(store: store, transfer: FakeTransfer(failing: [ref.id]))
            await #expect(throws: ClientError.self) {
                try await manager.downloadContent(of: m.identifier(of: m.parts[0]))
            }
            #expect(try store.message(m.id)?.partStates[0].transferStatus == .readyForDownload)
        }
    }

    /// The size check's put-back is committed (it was rolled back with the error once, which left
    /// the part "downloading" for good), and a later download of it can start.
    @Test func aDownloadOfTheWrongSizeFailsAndGoesBackToReady() async throws {
        try await withStore { store in
            let m = try seed(store, [("image/png", 50_000)])
            guard case .external(let ref) = m.parts[0].content else {
                Issue.record("not rich")
                return
            }
            let part = m.identifier(of: m.parts[0])
            let manager = try ContentManager(store: store, transfer: FakeTransfer(short: [ref.id]))
            let error = await #expect(throws: ClientError.self) { try await manager.downloadContent(of: part) }
            #expect(error?.code == .contentUnavailable)
            #expect(error?.description.contains("49999 bytes, expected 50000") == true, "\(String(describing: error))")
            #expect(try store.message(m.id)?.partStates[0].transferStatus == .readyForDownload)
            let fixed = try ContentManager(store: store, transfer: FakeTransfer())
            let url = try await fixed.downloadContent(of: part)
            #expect((try Data(contentsOf: url)).count == 50_000)
        }
    }

    @Test func purgedContentIsNotAutoDownloadedAgain() async throws {
        try await withStore { store in
            let m = try seed(store, [("text/plain", 5_000)])
            let part = m.identifier(of: m.parts[0])
            let manager = try ContentManager(store: store, transfer: FakeTransfer())
            #expect(try await manager.runAutoDownloads() == [part])
            let file = store.contentFileURL(for: part)
            #expect(try manager.purgeContent(of: part))
            #expect(!FileManager.default.fileExists(atPath: file.path))
            #expect(try !manager.purgeContent(of: part))
            let state = try #require(try store.message(m.id)?.partStates[0])
            #expect(state.purged && state.transferStatus == .readyForDownload && state.localPath == nil)
            #expect(try await manager.runAutoDownloads().isEmpty)
            #expect(try store.currentDiskUtilization().contentBytes == 0)
            // A manual download still works.
            try await manager.downloadContent(of: part)
            #expect(FileManager.default.fileExists(atPath: file.path))
        }
    }

    @Test func overCapacityPurgesLeastRecentlyAccessedFirstDownToEightyPercent() async throws {
        try await withStore { store in
            let m = try seed(store, (0..<5).map { _ in ("image/png", 1_000) })
            let parts = m.parts.map(m.identifier(of:))
            let manager = try ContentManager(store: store, transfer: FakeTransfer())
            for part in parts { try await manager.downloadContent(of: part) }
            #expect(try store.currentDiskUtilization().contentBytes == 5_000)
            // Access order, oldest first: 3, 0, 4, 1, 2.
            for (i, index) in [3, 0, 4, 1, 2].enumerated() {
                _ = try store.accessContent(of: parts[index], now: Timestamp(millisecondsSince1970: Int64(100 + i)))
            }
            // Cap 4,500: over it; purge to at most 3,600 -> two files, 3 then 0.
            try manager.updateSettings(ContentSettings(diskCapacity: 4_500))
            let states = try #require(try store.message(m.id)).partStates
            #expect(states.map(\.purged) == [true, false, false, true, false])
            #expect(try store.currentDiskUtilization().contentBytes == 3_000)
            #expect(!FileManager.default.fileExists(atPath: store.contentFileURL(for: parts[3]).path))
            #expect(FileManager.default.fileExists(atPath: store.contentFileURL(for: parts[4]).path))
            // Under the cap: nothing more goes.
            #expect(try store.enforceDiskCapacity(4_500).isEmpty)
            // Back to 4,000 bytes: under the cap, nothing goes.
            try await manager.downloadContent(of: parts[3])
            #expect(try store.currentDiskUtilization().contentBytes == 4_000)
            #expect(try store.message(m.id)?.partStates.filter(\.purged).count == 1)  // part 0 only
            // 5,000 bytes: over it again; the least recently accessed go, 4 then 1.
            try await manager.downloadContent(of: parts[0])
            let after = try #require(try store.message(m.id)).partStates
            #expect(after.map(\.localPath).map { $0 != nil } == [true, false, true, true, false])
            #expect(try store.currentDiskUtilization().contentBytes == 3_000)
        }
    }

    @Test func deletingAMessageRemovesItsContentFiles() async throws {
        try await withStore { store in
            let m = try seed(store, [("text/plain", 4_000)])
            let manager = try ContentManager(store: store, transfer: FakeTransfer())
            try await manager.runAutoDownloads()
            let file = store.contentFileURL(for: m.identifier(of: m.parts[0]))
            #expect(FileManager.default.fileExists(atPath: file.path))
            try store.apply([.messageDeleted(m.id)])
            #expect(!FileManager.default.fileExists(atPath: file.path))
            #expect(try store.currentDiskUtilization().contentBytes == 0)
        }
    }
}
