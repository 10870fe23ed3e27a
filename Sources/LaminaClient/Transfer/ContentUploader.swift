import Foundation
import LaminaModel

/// Uploads the rich content of queued messages, one part at a time in outbox order, on
/// the connection the `NodeLink` lends (Protocol/CONTENT.md §3–§6). Each upload asks the
/// node what it holds (HEAD) and continues from there, so it resumes after a dropped
/// connection, a pause or an app restart without sending again what the node has. When a
/// message's parts are all up, the outbox may send it (`LocalStore.dequeueOutbox` holds it
/// back until then).
///
/// - 422 (digest mismatch): the node deleted the upload; it starts again from 0 once, then
///   the message fails with code 602.
/// - 401: the session token is forgotten and the connection closed; the sync engine
///   authenticates anew and the upload continues with the new token.
/// - 429/500/503 and dropped connections: retried after a delay.
/// - Any other refusal fails the message with the node's code (`OutboxFailure`).
final class ContentUploader: @unchecked Sendable {
    /// Bytes per write on an upload stream: 256 KiB.
    static let chunkBytes = 256 * 1_024
    /// The longest wait between retries of a failing upload.
    static let maxRetryDelay: Duration = .seconds(10)

    let store: LocalStore
    let link: NodeLink
    let events: TransferEventHub
    let environment: SyncEnvironment
    /// Called when a message may be sent (its uploads finished) or left the outbox (failed).
    let outboxChanged: @Sendable () -> Void
    /// Called when a message fails for good.
    let messageFailed: @Sendable (OutboxFailure) -> Void
    /// Tests: awaited after each chunk is handed to HTTP/2, with the bytes sent so far.
    var chunkHook: (@Sendable (MessagePartID, UInt64) async -> Void)? {
        get { lock.withLock { hook } }
        set { lock.withLock { hook = newValue } }
    }

    private let lock = NSLock()
    private var hook: (@Sendable (MessagePartID, UInt64) async -> Void)?
    private var progresses: [MessagePartID: Progress] = [:]
    private var cancelledMessages: Set<MessageID> = []
    /// The part the worker is uploading now.
    private var active: MessagePartID?
    /// Cancellations that came while their message's upload ran: the worker deletes the
    /// node's copies once its stream has ended, then reports them.
    private var deferredCancels: [MessageID: (part: MessagePartID, ids: [ContentID], reason: String)] = [:]
    private var digestRestarts: [MessagePartID: Int] = [:]
    private var starts: [MessagePartID: [UInt64]] = [:]
    private var worker: Task<Void, Never>?
    private var workerID = UUID()
    /// Cancellations reporting themselves outside the worker (`abandon`), until they end;
    /// `stop` cancels them.
    private var abandons: [UUID: Task<Void, Never>] = [:]
    private var signal: AsyncStream<Void>.Continuation?

    /// `outboxChanged` and `messageFailed` are fixed here, before any upload can run.
    init(
        store: LocalStore, link: NodeLink, events: TransferEventHub, environment: SyncEnvironment,
        outboxChanged: @escaping @Sendable () -> Void = {},
        messageFailed: @escaping @Sendable (OutboxFailure) -> Void = { _ in }
    ) {
        self.store = store
        self.link = link
        self.events = events
        self.environment = environment
        self.outboxChanged = outboxChanged
        self.messageFailed = messageFailed
    }

    // MARK: running

    /// Starts the worker (no-op when it runs), or wakes it.
    func start() {
        let started: Bool = lock.withLock {
            guard worker == nil else { return false }
            let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
            let id = UUID()
            signal = continuation
            workerID = id
            worker = Task { [weak self] in
                await self?.run(signals: stream)
                self?.finishWorker(id)
            }
            return true
        }
        if !started { kick() }
    }

    /// Stops the worker (a running upload ends; the node keeps what it got).
    func stop() {
        let running = lock.withLock { () -> [Task<Void, Never>] in
            defer {
                worker = nil
                signal?.finish()
                signal = nil
                abandons.removeAll()
            }
            return [worker].compactMap { $0 } + abandons.values
        }
        for task in running { task.cancel() }
    }

    /// New uploads may be waiting, or a paused one was resumed.
    func kick() { _ = lock.withLock { signal?.yield() } }

    private func run(signals: AsyncStream<Void>) async {
        var wake = signals.makeAsyncIterator()
        var failures = 0
        while !Task.isCancelled {
            let next: PendingUpload?
            do {
                next = try await store.pendingUploadsAsync(limit: 1_000).first { !shouldStop($0.part) }
            } catch {
                next = nil
            }
            guard let next else {
                if await wake.next() == nil { break }
                continue
            }
            do {
                try await upload(next)
                failures = 0
            } catch let error as ClientError where error.code == .notConnected || error.code == .cancelled {
                break  // disconnected or stopped: `start` runs a new worker after the next connect
            } catch {
                failures += 1
                let delay = min(Self.maxRetryDelay, .milliseconds(100 << min(failures, 7)))
                do { try await environment.sleep(delay) } catch { break }
            }
        }
    }

    private func finishWorker(_ id: UUID) {
        lock.withLock {
            guard workerID == id else { return }
            worker = nil
            signal?.finish()
            signal = nil
        }
    }

    // MARK: progress, pause, cancel

    /// The progress of a part's upload while it waits or runs (created on first ask);
    /// nil once the part is up or when it is not waiting for upload.
    func progress(for part: MessagePartID) -> Progress? {
        if let existing = lock.withLock({ progresses[part] }) { return existing }
        guard let pending = try? store.pendingUpload(of: part) else { return nil }
        return progress(for: pending)
    }

    private func progress(for pending: PendingUpload) -> Progress {
        lock.withLock {
            if let existing = progresses[pending.part] { return existing }
            let progress = Progress(totalUnitCount: Int64(pending.reference.size))
            progress.kind = .file
            progress.isPausable = true
            progress.isCancellable = true
            let part = pending.part
            // `pause()` and `cancel()` set their flags at once, and the upload loop reads them
            // before each chunk; Foundation calls the handlers later, in no set order.
            progress.resumingHandler = { [weak self, weak progress] in
                if progress?.isPaused == false { self?.kick() }
            }
            progress.cancellationHandler = { [weak self] in self?.cancel(part) }
            progresses[part] = progress
            return progress
        }
    }

    /// Cancels the upload: the message fails with `OutboxFailure.cancelledCode` at once and
    /// a running upload stops; the node's copies of the message's content are deleted (best
    /// effort: when connected) before the `.failed` event.
    func cancel(_ part: MessagePartID) {
        let first = lock.withLock { cancelledMessages.insert(part.message).inserted }
        guard first else { return }
        let reason = "cancelled: the upload of \(part) was cancelled"
        let rich = ((try? store.message(part.message))?.message.parts ?? []).compactMap { p -> ContentID? in
            if case .external(let ref) = p.content { return ref.id } else { return nil }
        }
        fail(part, code: OutboxFailure.cancelledCode, reason: reason, error: nil)
        let deferred = lock.withLock { () -> Bool in
            guard active?.message == part.message else { return false }
            deferredCancels[part.message] = (part, rich, reason)
            return true
        }
        guard !deferred else { return }
        let id = UUID()
        lock.withLock {
            abandons[id] = Task { [weak self] in
                await self?.abandon(part, rich, reason)
                _ = self?.lock.withLock { self?.abandons.removeValue(forKey: id) }
            }
        }
    }

    /// Deletes the node's copies of a cancelled message's content (when connected; else the
    /// node collects them later), then reports the cancellation.
    private func abandon(_ part: MessagePartID, _ ids: [ContentID], _ reason: String) async {
        if let lease = link.current {
            for id in ids { try? await ContentStreams.delete(id, on: lease) }
        }
        events.emit(.failed(part, .upload, ClientError(.cancelled, reason)))
    }

    /// The worker leaves `part`: a cancellation that waited for its stream is carried out.
    private func leave(_ part: MessagePartID) async {
        let deferred = lock.withLock { () -> (part: MessagePartID, ids: [ContentID], reason: String)? in
            active = nil
            return deferredCancels.removeValue(forKey: part.message)
        }
        if let deferred { await abandon(deferred.part, deferred.ids, deferred.reason) }
    }

    /// Fails the message (it leaves the outbox, so later commands go on); emits `.failed`
    /// with `error` when given.
    private func fail(_ part: MessagePartID, code: UInt16, reason: String, error: ClientError?) {
        let now = environment.now()
        failed(
            part, code: code, reason: reason, error: error, at: now,
            stored: (try? store.markFailed(part.message.uuid, code: code, reason: reason, at: now)) == true)
    }

    /// As `fail`, from the worker: the store is written through GRDB's async API.
    private func failAsync(_ part: MessagePartID, code: UInt16, reason: String, error: ClientError?) async {
        let now = environment.now()
        let stored = (try? await store.markFailedAsync(part.message.uuid, code: code, reason: reason, at: now)) == true
        failed(part, code: code, reason: reason, error: error, at: now, stored: stored)
    }

    private func failed(
        _ part: MessagePartID, code: UInt16, reason: String, error: ClientError?, at now: Timestamp, stored: Bool
    ) {
        if stored {
            messageFailed(
                OutboxFailure(
                    id: part.message.uuid, kind: OutboxCommandKind.sendMessage.rawValue, objectID: part.message.uuid,
                    code: code, reason: reason, failedAt: now))
        }
        _ = lock.withLock { progresses.removeValue(forKey: part) }
        if let error { events.emit(.failed(part, .upload, error)) }
        outboxChanged()
    }

    /// The offsets each PUT of `part` started from, oldest first (diagnostics and tests).
    func uploadStarts(of part: MessagePartID) -> [UInt64] { lock.withLock { starts[part] ?? [] } }

    /// Whether `part`'s upload must not go on: paused, cancelled, or its message failed.
    private func shouldStop(_ part: MessagePartID) -> Bool {
        lock.withLock {
            if cancelledMessages.contains(part.message) { return true }
            guard let progress = progresses[part] else { return false }
            return progress.isPaused || progress.isCancelled
        }
    }

    private func isPaused(_ part: MessagePartID) -> Bool {
        lock.withLock { progresses[part].map { $0.isPaused && !$0.isCancelled } ?? false }
    }

    // MARK: one upload

    private func upload(_ pending: PendingUpload) async throws {
        let part = pending.part
        let progress = progress(for: pending)
        guard let file = pending.file, FileManager.default.fileExists(atPath: file.path) else {
            let reason = "content-missing: the staged content of \(part) is not on this device"
            await failAsync(
                part, code: OutboxFailure.contentMissingCode, reason: reason,
                error: ClientError(.contentUnavailable, reason))
            return
        }
        try await store.beginUploadAsync(of: part)
        lock.withLock { active = part }
        do {
            try await uploadLoop(pending, file: file, progress: progress)
        } catch {
            await leave(part)
            throw error
        }
        await leave(part)
    }

    private func uploadLoop(_ pending: PendingUpload, file: URL, progress: Progress) async throws {
        let part = pending.part
        let reference = pending.reference
        while true {
            if shouldStop(part) { return }
            let lease = try await link.lease()
            if shouldStop(part) { return }
            do {
                var offset: UInt64 = 0
                if let held = try await ContentStreams.head(reference.id, on: lease) {
                    if held.isComplete { return await finish(part, progress) }
                    offset = min(held.offset, reference.size)
                }
                progress.completedUnitCount = Int64(offset)
                lock.withLock { starts[part, default: []].append(offset) }
                events.emit(.started(part, .upload, offset: offset))
                let events = self.events
                let hook = chunkHook
                let total = reference.size
                let answer = try await ContentStreams.put(
                    reference, from: file, offset: offset, on: lease, chunkBytes: Self.chunkBytes,
                    shouldStop: { [weak self] in self?.shouldStop(part) ?? true },
                    onSent: { sent in
                        progress.completedUnitCount = Int64(sent)
                        events.emit(.progressed(part, .upload, completed: sent, total: total))
                        await hook?(part, sent)
                    })
                switch answer {
                case .complete:
                    return await finish(part, progress)
                case .held(let held):
                    progress.completedUnitCount = Int64(held)
                    if isPaused(part) {
                        events.emit(.paused(part, .upload, offset: held))
                        return
                    }
                case .refused(let error):
                    if try await handle(error, part: part, lease: lease) { return }
                }
            } catch let error as ContentHTTPError {
                if try await handle(error, part: part, lease: lease) { return }
            }
        }
    }

    private func finish(_ part: MessagePartID, _ progress: Progress) async {
        progress.completedUnitCount = progress.totalUnitCount
        _ = try? await store.finishUploadAsync(of: part)
        lock.withLock {
            _ = progresses.removeValue(forKey: part)
            digestRestarts[part] = nil
        }
        events.emit(.completed(part, .upload))
        outboxChanged()
    }

    /// What to do after the node refused a request of `part`'s upload; true when the
    /// upload is over (the message failed).
    private func handle(_ error: ContentHTTPError, part: MessagePartID, lease: NodeLease) async throws -> Bool {
        switch error.uploadOutcome {
        case .resume:
            return false  // the loop asks HEAD and continues from there
        case .digestMismatch:
            let restarts = lock.withLock { () -> Int in
                digestRestarts[part, default: 0] += 1
                return digestRestarts[part]!
            }
            if restarts <= 1 { return false }  // the node deleted the upload: HEAD finds nothing, start at 0
            await failAsync(
                part, code: error.code == 0 ? 602 : error.code,
                reason:
                    "content-digest-mismatch: the staged bytes of \(part) do not hash to its SHA-256, twice: \(error.reason)",
                error: ClientError(.contentRefused, error.description))
            return true
        case .reauthenticate:
            await link.reject(lease.token, store: store)
            return false
        case .retryLater:
            let seconds = min(error.retryAfterSeconds ?? 1, 60)
            try await environment.sleep(.seconds(Int64(seconds)))
            return false
        case .fail:
            await failAsync(
                part, code: error.code == 0 ? 400 : error.code,
                reason: "\(error.name.isEmpty ? "refused" : error.name): \(error.reason)",
                error: ClientError(.contentRefused, error.description))
            return true
        }
    }
}

extension ClientError.Code {
    /// The node refused a content request (the reason carries its HTTP status and error).
    public static let contentRefused = ClientError.Code(rawValue: "content-refused")
}
