import Foundation
import LaminaModel

/// A client's rich-content machinery: the connection it shares with the sync stream
/// (`NodeLink`), the uploader of queued messages' content, the content manager
/// (downloads, auto-download, purge) and the transfer events.
final class ContentTransfers: @unchecked Sendable {
    let link = NodeLink()
    let events = TransferEventHub()
    let uploader: ContentUploader
    let manager: ContentManager
    private let lock = NSLock()
    private var watcher: Task<Void, Never>?

    /// `outboxChanged` and `messageFailed`: the uploader's callbacks (`ContentUploader`).
    init(
        store: LocalStore, environment: SyncEnvironment, outboxChanged: @escaping @Sendable () -> Void = {},
        messageFailed: @escaping @Sendable (OutboxFailure) -> Void = { _ in }
    ) throws(ClientError) {
        uploader = ContentUploader(
            store: store, link: link, events: events, environment: environment,
            outboxChanged: outboxChanged, messageFailed: messageFailed)
        manager = try ContentManager(
            store: store, transfer: LinkedContentTransfer(link: link, store: store),
            settings: ContentSettings(), events: events)
        link.onReady { [weak self] in
            self?.uploader.start()
            self?.manager.scheduleAutoDownloads()
        }
    }

    deinit {
        watcher?.cancel()
        events.finish()
    }

    /// The client connected: uploads resume, auto-downloads run, and run again whenever
    /// messages (of conversations or channels) with rich content arrive.
    func start() {
        let changes = manager.store.changes()
        let manager = self.manager
        let task = Task {
            for await batch in changes {
                let arrived = batch.contains { change in
                    guard change.type == .create else { return false }
                    let parts: [MessagePart]
                    switch change.object {
                    case .message(let m): parts = m.parts
                    case .channelMessage(let m): parts = m.parts
                    default: return false
                    }
                    return parts.contains { if case .external = $0.content { true } else { false } }
                }
                if arrived { manager.scheduleAutoDownloads() }
            }
        }
        let previous = lock.withLock { () -> Task<Void, Never>? in
            defer { watcher = task }
            return watcher
        }
        previous?.cancel()
        uploader.start()
    }

    /// The client closes: transfers stop and the content manager's tasks are cancelled.
    func close() {
        stop()
        manager.close()
    }

    /// The client disconnected: transfers stop (the node keeps what it got).
    func stop() {
        link.stop()
        uploader.stop()
        let previous = lock.withLock { () -> Task<Void, Never>? in
            defer { watcher = nil }
            return watcher
        }
        previous?.cancel()
    }
}
