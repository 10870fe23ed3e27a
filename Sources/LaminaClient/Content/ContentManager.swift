import Foundation
import LaminaModel

/// Applies the content rules: downloads content on request (with progress) and by itself
/// as the settings allow, keeps cached content under the disk capacity, purges on request.
/// The bytes move through a `ContentTransferring` the transfer code provides.
///
/// Each running download has a Foundation `Progress` (total = the content's size) that is
/// pausable (the partial file is kept; resuming continues from its length) and cancellable
/// (the partial file is deleted).
public final class ContentManager: @unchecked Sendable {
    public let store: LocalStore
    private let transfer: any ContentTransferring
    private let lock = NSLock()
    private var _settings: ContentSettings
    private var running: [MessagePartID: Running] = [:]
    private var autoRunning = false
    private var autoAgain = false
    /// The background auto-download run, while one runs.
    private var autoTask: Task<Void, Never>?
    /// Set by `close`: no task starts after it.
    private var closed = false
    let events: TransferEventHub

    private final class Running: @unchecked Sendable {
        let progress: Progress
        var task: Task<URL, any Error>?
        var waiters: [CheckedContinuation<URL, any Error>] = []
        /// How the download ended, once it is recorded (a waiter that comes later gets it at once).
        var outcome: Result<URL, any Error>?
        var automatic: Bool
        init(progress: Progress, automatic: Bool) {
            self.progress = progress
            self.automatic = automatic
        }
    }

    public convenience init(
        store: LocalStore, transfer: any ContentTransferring, settings: ContentSettings = ContentSettings()
    ) throws(ClientError) {
        try self.init(store: store, transfer: transfer, settings: settings, events: TransferEventHub())
    }

    init(store: LocalStore, transfer: any ContentTransferring, settings: ContentSettings, events: TransferEventHub)
        throws(ClientError)
    {
        try settings.validate()
        self.store = store
        self.transfer = transfer
        self._settings = settings
        self.events = events
    }

    /// The current rules. Lowering the disk capacity purges at once.
    public var settings: ContentSettings { lock.withLock { _settings } }

    public func updateSettings(_ settings: ContentSettings) throws(ClientError) {
        try settings.validate()
        lock.withLock { _settings = settings }
        try store.enforceDiskCapacity(settings.diskCapacity)
    }

    /// Downloads a part's rich content and returns its file. `progress` gets bytes so far and
    /// the total. Joins a download of the part already running.
    @discardableResult
    public func downloadContent(
        of part: MessagePartID,
        progress: @escaping @Sendable (UInt64, UInt64) -> Void = { _, _ in }
    ) async throws(ClientError) -> URL {
        do {
            return try await outcome(of: try await beginAsync(part, automatic: false, observer: progress))
        } catch {
            throw ClientError.wrap(error)
        }
    }

    /// Starts downloading a part's rich content (or joins the running download) and returns
    /// its progress at once (the docs' `downloadContent:`). The file is at
    /// `LocalStore.contentFileURL(for:)` once the progress finishes; `accessContent(of:)` says so.
    /// Marks the part as downloading in the store before it returns (a short write on the
    /// calling thread); async code should use `downloadContent(of:progress:)`.
    @discardableResult
    public func startDownload(of part: MessagePartID) throws(ClientError) -> Progress {
        try begin(part, automatic: false, observer: { _, _ in }).progress
    }

    /// The progress of a part's running (or paused) download, if any.
    public func downloadProgress(for part: MessagePartID) -> Progress? {
        lock.withLock { running[part]?.progress }
    }

    /// Downloads, one after another, every part the auto-download rules select. Returns the
    /// parts downloaded; a part whose download fails is put back and left for a later run.
    @discardableResult
    public func runAutoDownloads() async throws(ClientError) -> [MessagePartID] {
        var done: [MessagePartID] = []
        for pending in try await store.pendingAutoDownloadsAsync(settings: settings) {
            if Task.isCancelled { break }
            guard let running = try? await beginAsync(pending.part, automatic: true, observer: { _, _ in }),
                let task = lock.withLock({ running.task })
            else { continue }
            // Done once recorded in the store, not when the bytes are in (a paused download's
            // task fails; it is not waited for).
            if (try? await task.value) != nil, (try? await outcome(of: running)) != nil { done.append(pending.part) }
        }
        return done
    }

    /// Runs `runAutoDownloads` in the background; calls while one runs make it run once more.
    func scheduleAutoDownloads() {
        lock.withLock {
            guard !closed else { return }
            if autoRunning {
                autoAgain = true
                return
            }
            autoRunning = true
            // Started under the lock, so `close` sees it; it holds the manager only while it runs.
            autoTask = Task { [weak self] in
                while let self, !Task.isCancelled {
                    _ = try? await self.runAutoDownloads()
                    let again = self.lock.withLock { () -> Bool in
                        defer { self.autoAgain = false }
                        if !self.autoAgain || self.closed {
                            self.autoRunning = false
                            self.autoTask = nil
                            return false
                        }
                        return true
                    }
                    if !again { break }
                }
            }
        }
    }

    /// Cancels every task the manager started (the auto-download run, running downloads: their
    /// partial files stay, as after a pause) and starts none after (the client closes).
    func close() {
        let cancels = lock.withLock { () -> [() -> Void] in
            closed = true
            var out: [() -> Void] = []
            if let autoTask { out.append(autoTask.cancel) }
            autoTask = nil
            for entry in running.values {
                if let task = entry.task { out.append(task.cancel) }
            }
            return out
        }
        for cancel in cancels { cancel() }
    }

    /// Deletes a part's downloaded content from this device; it will not download by itself again.
    @discardableResult
    public func purgeContent(of part: MessagePartID) throws(ClientError) -> Bool { try store.purgeContent(of: part) }

    /// Bytes the store uses on disk.
    public func currentDiskUtilization() throws(ClientError) -> DiskUtilization { try store.currentDiskUtilization() }

    // MARK: running downloads

    /// How `entry`'s download ends once recorded: at once when it already has.
    private func outcome(of entry: Running) async throws -> URL {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<URL, any Error>) in
            let ended = lock.withLock { () -> Result<URL, any Error>? in
                if let outcome = entry.outcome { return outcome }
                entry.waiters.append(continuation)
                return nil
            }
            if let ended { continuation.resume(with: ended) }
        }
    }

    /// Starts (or joins) a part's download, marking it as downloading with a synchronous store
    /// write: for the app's synchronous `startDownload`.
    private func begin(_ part: MessagePartID, automatic: Bool, observer: @escaping @Sendable (UInt64, UInt64) -> Void)
        throws(ClientError) -> Running
    {
        if let joined = try join(part, automatic: automatic) { return joined }
        let pending: PendingDownload
        do { pending = try store.beginDownload(of: part) } catch {
            if let joined = try join(part, automatic: automatic) { return joined }  // started meanwhile
            throw error
        }
        return register(part, pending, automatic: automatic, observer: observer)
    }

    /// As `begin`, with the store write through GRDB's async API (no cooperative thread waits on SQLite).
    private func beginAsync(
        _ part: MessagePartID, automatic: Bool, observer: @escaping @Sendable (UInt64, UInt64) -> Void
    ) async throws(ClientError) -> Running {
        if let joined = try join(part, automatic: automatic) { return joined }
        let pending: PendingDownload
        do throws(ClientError) { pending = try await store.beginDownloadAsync(of: part) } catch {
            if let joined = try join(part, automatic: automatic) { return joined }
            throw error
        }
        return register(part, pending, automatic: automatic, observer: observer)
    }

    /// The part's running (or paused: resumed now) download, if there is one.
    private func join(_ part: MessagePartID, automatic: Bool) throws(ClientError) -> Running? {
        let (isClosed, existing) = lock.withLock { () -> (Bool, Running?) in
            guard !closed else { return (true, nil) }
            guard let existing = running[part] else { return (false, nil) }
            if !automatic { existing.automatic = false }
            return (false, existing)
        }
        guard !isClosed else { throw ClientError(.cancelled, "the client is closed: no download starts") }
        if let existing, existing.progress.isPaused { existing.progress.resume() }
        return existing
    }

    /// Tracks a download the store marked as downloading, and starts its task.
    private func register(
        _ part: MessagePartID, _ pending: PendingDownload, automatic: Bool,
        observer: @escaping @Sendable (UInt64, UInt64) -> Void
    ) -> Running {
        let progress = Progress(totalUnitCount: Int64(pending.reference.size))
        progress.kind = .file
        progress.isPausable = true
        progress.isCancellable = true
        let entry = Running(progress: progress, automatic: automatic)
        let raced: Running? = lock.withLock {
            if let other = running[part] { return other }
            running[part] = entry
            return nil
        }
        if let raced { return raced }
        progress.pausingHandler = { [weak self, weak progress] in self?.syncPause(part, progress) }
        progress.resumingHandler = { [weak self, weak progress] in self?.syncPause(part, progress) }
        progress.cancellationHandler = { [weak self] in self?.stopTask(part) }
        launch(part, entry, reference: pending.reference, observer: observer)
        return entry
    }

    /// Starts `entry`'s task. With no `reference` (a resumed download) the task first marks the
    /// part as downloading again, and it starts only if no task runs and the progress is neither
    /// paused nor cancelled (checked under the lock, so two resumes start one task).
    private func launch(
        _ part: MessagePartID, _ entry: Running, reference: ContentReference?,
        observer: @escaping @Sendable (UInt64, UInt64) -> Void
    ) {
        let destination = store.contentFileURL(for: part)
        let transfer = self.transfer
        let events = self.events
        let progress = entry.progress
        let store = self.store
        // One task per download, owned by its entry (cancelled by pause, cancel and `close`):
        // it records its own outcome before it ends.
        lock.withLock {
            guard !closed else { return }
            if reference == nil, entry.task != nil || progress.isPaused || progress.isCancelled { return }
            entry.task = Task<URL, any Error> { [weak self] in
                let result: Result<URL, any Error>
                do {
                    let reference =
                        if let reference { reference } else { try await store.beginDownloadAsync(of: part).reference }
                    events.emit(.started(part, .download, offset: 0))
                    try await transfer.download(reference, of: part, to: destination) { received, total in
                        progress.completedUnitCount = Int64(received)
                        observer(received, total)
                        events.emit(.progressed(part, .download, completed: received, total: total))
                    }
                    result = .success(destination)
                } catch {
                    result = .failure(error)
                }
                await self?.settle(part, entry, result)
                return try result.get()
            }
        }
    }

    /// Ends a download: records it (purging LRU over the capacity) or puts the part back
    /// (a paused one keeps its partial file and waits for `resume`).
    private func settle(_ part: MessagePartID, _ entry: Running, _ result: Result<URL, any Error>) async {
        switch result {
        case .success(let url):
            let automatic = lock.withLock { entry.automatic }
            do {
                try await store.finishDownloadAsync(
                    of: part, autoDownloaded: automatic, diskCapacity: settings.diskCapacity)
                events.emit(.completed(part, .download))
                end(part, entry, .success(url))
            } catch {
                end(part, entry, .failure(error))
            }
        case .failure(let error):
            try? await store.failDownloadAsync(of: part)
            if entry.progress.isPaused && !entry.progress.isCancelled {
                events.emit(.paused(part, .download, offset: UInt64(max(0, entry.progress.completedUnitCount))))
                lock.withLock { entry.task = nil }
                resumeIfUnpaused(part, entry)
                return
            }
            fail(part, entry, error)
        }
    }

    /// Ends a download that failed or was cancelled (a cancelled one loses its partial file).
    private func fail(_ part: MessagePartID, _ entry: Running, _ error: any Error) {
        if entry.progress.isCancelled { try? FileManager.default.removeItem(at: store.contentFileURL(for: part)) }
        let wrapped =
            entry.progress.isCancelled
            ? ClientError(.cancelled, "the download of \(part) was cancelled")
            : ClientError(.contentUnavailable, "downloading \(part) failed: \(error)")
        events.emit(.failed(part, .download, wrapped))
        end(part, entry, .failure(wrapped))
    }

    /// Records how the download ended and wakes its waiters.
    private func end(_ part: MessagePartID, _ entry: Running, _ outcome: Result<URL, any Error>) {
        let waiters = lock.withLock { () -> [CheckedContinuation<URL, any Error>] in
            running[part] = nil
            entry.outcome = outcome
            defer { entry.waiters.removeAll() }
            return entry.waiters
        }
        for waiter in waiters { waiter.resume(with: outcome) }
    }

    private func syncPause(_ part: MessagePartID, _ progress: Progress?) {
        guard let progress, !progress.isCancelled, let entry = lock.withLock({ running[part] }) else { return }
        if progress.isPaused {
            lock.withLock { entry.task }?.cancel()
        } else {
            resumeIfUnpaused(part, entry)
        }
    }

    /// Starts the download again (from the partial file's length) when it is paused in the
    /// store's eyes but its progress is no longer paused.
    private func resumeIfUnpaused(_ part: MessagePartID, _ entry: Running) {
        launch(part, entry, reference: nil, observer: { _, _ in })
    }

    private func stopTask(_ part: MessagePartID) {
        guard let entry = lock.withLock({ running[part] }) else { return }
        if let task = lock.withLock({ entry.task }) {
            task.cancel()
        } else {
            // A paused download: nothing runs, and the store already has it ready for download.
            fail(part, entry, CancellationError())
        }
    }
}
