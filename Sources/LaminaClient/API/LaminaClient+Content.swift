import Foundation
import LaminaModel

/// Rich content (parts over 2 KiB, Protocol/CONTENT.md): uploads before the message goes
/// out, downloads on request or by the content settings, the local cache's bounds.
///
/// Transfers use the client's connection to the node (the one its sync stream runs on)
/// once `connect(identityToken:)` has authenticated; they wait while the client connects,
/// and resume from the node's bytes (uploads) or the partial file (downloads) after a
/// dropped connection or an app restart.
extension LaminaClient {
    /// The progress of a part's upload, while its message waits for it (nil once the content
    /// is on the node, or for a part that is not being uploaded). Pausable: `pause()` stops
    /// after the current chunk, `resume()` continues from the bytes the node holds.
    /// Cancellable: `cancel()` abandons the upload on the node and fails the message
    /// (`sendFailure(of:)` then has `OutboxFailure.cancelledCode`).
    public func uploadProgress(for part: MessagePartID) -> Progress? {
        transfers.uploader.progress(for: part)
    }

    /// Starts downloading a part's rich content (or joins its running download) and returns
    /// the download's progress at once (the docs' `downloadContent:`). Pausable (the partial
    /// file stays; `resume()` continues from its length) and cancellable (the partial file is
    /// deleted). Throws `.contentUnavailable` for a part that is inline, local, or already here.
    @discardableResult
    public func downloadContent(of part: MessagePartID) throws(ClientError) -> Progress {
        try transfers.manager.startDownload(of: part)
    }

    /// Downloads a part's rich content (or joins its running download) and returns the file
    /// once its bytes are here and their SHA-256 checked.
    public func downloadedContent(of part: MessagePartID) async throws(ClientError) -> URL {
        try await transfers.manager.downloadContent(of: part)
    }

    /// The progress of a part's running or paused download, if any (auto-downloads included).
    public func downloadProgress(for part: MessagePartID) -> Progress? {
        transfers.manager.downloadProgress(for: part)
    }

    /// A part's content where it is now (inline bytes, a file, or why it is not here);
    /// reading a file counts as an access for the least-recently-used purge order.
    public func content(of part: MessagePartID) throws(ClientError) -> LocalContent {
        try store.accessContent(of: part)
    }

    /// Every transfer event from now on (progress, pause, completion, failure), for code
    /// that awaits transfers.
    public func contentTransferEvents() -> AsyncStream<ContentTransferEvent> {
        transfers.events.subscribe()
    }

    /// The content rules: auto-download by type and size, the cache's disk capacity.
    public var contentSettings: ContentSettings { transfers.manager.settings }

    /// Changes the content rules; a lower disk capacity purges least-recently-accessed
    /// content at once. New rules apply to the next auto-download run.
    public func updateContentSettings(_ settings: ContentSettings) throws(ClientError) {
        try transfers.manager.updateSettings(settings)
        transfers.manager.scheduleAutoDownloads()
    }

    /// Deletes a part's downloaded content from this device (the node keeps it); it will not
    /// download by itself again. Returns false when there was nothing to purge.
    @discardableResult
    public func purgeContent(of part: MessagePartID) throws(ClientError) -> Bool {
        try transfers.manager.purgeContent(of: part)
    }

    /// Bytes this client's data uses on disk: content files and the database.
    public func currentDiskUtilization() throws(ClientError) -> DiskUtilization {
        try transfers.manager.currentDiskUtilization()
    }

    /// Moves the staged files of `message`'s rich parts under the content directory, where
    /// the store and the uploader find them. Returns what to put back if storing fails.
    func adoptStagedContent(of message: Message) throws(ClientError) -> [(ContentID, URL, URL)] {
        var moved: [(ContentID, URL, URL)] = []
        for part in message.parts {
            guard case .external(let reference) = part.content else { continue }
            let destination = store.contentFileURL(for: message.identifier(of: part))
            guard let staged = staging.take(reference.id) else {
                if FileManager.default.fileExists(atPath: destination.path) { continue }
                restoreStagedContent(moved)
                throw ClientError(
                    .contentUnavailable,
                    "part \(part.id) has no staged content: make rich parts with MessagePart.with(mimeType:data:staging:) or with(mimeType:fileURL:staging:) and this client's staging, and send each once"
                )
            }
            do { try ContentStaging.move(staged, to: destination) } catch {
                staging.putBack(reference.id, staged)
                restoreStagedContent(moved)
                throw error
            }
            moved.append((reference.id, staged, destination))
        }
        return moved
    }

    func restoreStagedContent(_ moved: [(ContentID, URL, URL)]) {
        for (id, staged, destination) in moved {
            if (try? ContentStaging.move(destination, to: staged)) != nil { staging.putBack(id, staged) }
        }
    }
}
