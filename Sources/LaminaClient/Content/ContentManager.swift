import Foundation
import LaminaModel

/// Applies the content rules: downloads content on request (with progress) and by itself
/// as the settings allow, keeps cached content under the disk capacity, purges on request.
/// The bytes move through a `ContentTransferring` the transfer code provides.
public final class ContentManager: @unchecked Sendable {
    public let store: LocalStore
    private let transfer: any ContentTransferring
    private let lock = NSLock()
    private var _settings: ContentSettings

    public init(store: LocalStore, transfer: any ContentTransferring, settings: ContentSettings = ContentSettings()) throws(ClientError) {
        try settings.validate()
        self.store = store
        self.transfer = transfer
        self._settings = settings
    }

    /// The current rules. Lowering the disk capacity purges at once.
    public var settings: ContentSettings { lock.withLock { _settings } }

    public func updateSettings(_ settings: ContentSettings) throws(ClientError) {
        try settings.validate()
        lock.withLock { _settings = settings }
        try store.enforceDiskCapacity(settings.diskCapacity)
    }

    /// Downloads a part's rich content and returns its file. `progress` gets bytes so far and the total.
    @discardableResult
    public func downloadContent(of part: MessagePartID,
                                progress: @escaping @Sendable (UInt64, UInt64) -> Void = { _, _ in }) async throws(ClientError) -> URL {
        try await download(part, automatic: false, progress: progress)
    }

    /// Downloads, one after another, every part the auto-download rules select. Returns the
    /// parts downloaded; a part whose download fails is put back and left for a later run.
    @discardableResult
    public func runAutoDownloads() async throws(ClientError) -> [MessagePartID] {
        var done: [MessagePartID] = []
        for pending in try store.pendingAutoDownloads(settings: settings) {
            if Task.isCancelled { break }
            if (try? await download(pending.part, automatic: true, progress: { _, _ in })) != nil { done.append(pending.part) }
        }
        return done
    }

    /// Deletes a part's downloaded content from this device; it will not download by itself again.
    @discardableResult
    public func purgeContent(of part: MessagePartID) throws(ClientError) -> Bool { try store.purgeContent(of: part) }

    /// Bytes the store uses on disk.
    public func currentDiskUtilization() throws(ClientError) -> DiskUtilization { try store.currentDiskUtilization() }

    private func download(_ part: MessagePartID, automatic: Bool, progress: @escaping @Sendable (UInt64, UInt64) -> Void) async throws(ClientError) -> URL {
        let pending = try store.beginDownload(of: part)
        let destination = store.contentFileURL(for: part)
        do {
            try await transfer.download(pending.reference, of: part, to: destination, progress: progress)
        } catch {
            try? store.failDownload(of: part)
            throw ClientError(.contentUnavailable, "downloading \(part) failed: \(error)")
        }
        try store.finishDownload(of: part, autoDownloaded: automatic, diskCapacity: settings.diskCapacity)
        return destination
    }
}
