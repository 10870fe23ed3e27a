import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The node's rich content: files, their records, the uploads in progress, authentication of
/// content requests, collection (Protocol/CONTENT.md). Shared by every content stream.
public final class ContentService: Sendable {
    package let store: NodeStore
    public let files: ContentFiles
    public let settings: ContentServiceSettings
    /// Signs the upload and download URLs the Server API hands out (CONTENT.md §10), with the
    /// store's key once ``start(sweepingOn:)`` has loaded it.
    public var urls: ContentURLSigner { signer.withLockedValue { $0 } }
    private let signer = NIOLockedValueBox(ContentURLSigner())
    let threadPool: NIOThreadPool
    let logger: Logger
    let active = ActiveUploads()
    /// Content being fetched from peers, and the downloads waiting for it.
    public let arrivals: ContentArrivals
    private let sweep = NIOLockedValueBox<RepeatedTask?>(nil)
    private let stopped = NIOLockedValueBox(false)

    /// Opens the content directories and brings the files in line with the records (start-up
    /// recovery, blocking: call before serving, then ``start(sweepingOn:)``). `threads` do the
    /// disk work of uploads and downloads.
    package init(
        store: NodeStore, dataDirectory: URL, settings: ContentServiceSettings, logger: Logger, threads: Int = 2,
        arrivals: ContentArrivals = ContentArrivals()
    ) throws {
        self.store = store
        self.arrivals = arrivals
        self.settings = settings
        self.logger = logger
        let files = try ContentFiles(root: settings.root(dataDirectory: dataDirectory))
        self.files = files
        let shared: Bool
        if case .postgres = store.location { shared = true } else { shared = false }
        self.sharedStore = shared
        let recovery = try files.recover(shared: shared) { try store.readNow { try $0.allUploads() } }
        if shared, !recovery.damaged.isEmpty {
            // Other nodes share the records: a missing file may mean this node has another
            // content directory than they do. Reported, never corrected here.
            logger.warning(
                "content records without their bytes in this node's content directory (nodes on one PostgreSQL store must share --content-dir); left as they are",
                metadata: ["directory": "\(files.root.path)", "count": "\(recovery.damaged.count)"])
        }
        if recovery.truncated > 0 || recovery.orphansDeleted > 0 || !recovery.damaged.isEmpty {
            logger.notice(
                "content recovery",
                metadata: [
                    "truncated": "\(recovery.truncated)", "orphans": "\(recovery.orphansDeleted)",
                    "damaged": "\(recovery.damaged.count)",
                ])
        }
        self.lastRecovery = recovery
        self.threadPool = NIOThreadPool(numberOfThreads: threads)
        threadPool.start()
    }

    /// Corrects the records whose bytes the start-up recovery found missing (a partial file
    /// shorter than recorded: its length; complete content without its file: the record goes),
    /// then starts the periodic collection on `eventLoop` (none when the interval is 0). On a
    /// PostgreSQL store no record is corrected (other nodes share them; see ``sharedStore``).
    public func start(sweepingOn eventLoop: EventLoop) async throws {
        let damaged = sharedStore ? [:] : lastRecovery.damaged
        if !damaged.isEmpty {
            let now = Timestamp.now()
            try await store.write { tx in
                for (id, received) in damaged {
                    if let received {
                        try tx.updateUpload(id, receivedBytes: received, state: .uploading, at: now)
                    } else {
                        try tx.deleteUpload(id)
                    }
                }
            }
        }
        let fresh = ContentURLSigner.newKey()
        let key = try await store.write { tx in
            try tx.setSettingIfAbsent(ContentURLSigner.keySetting, fresh)
            return try tx.read.setting(ContentURLSigner.keySetting) ?? fresh
        }
        signer.withLockedValue { $0 = ContentURLSigner(key: key) }
        startSweeping(on: eventLoop)
    }

    /// What the start-up recovery did (tests, logs).
    public let lastRecovery: ContentFiles.Recovery
    /// The store is PostgreSQL, so other nodes may share the records and the content directory:
    /// the start-up recovery touches only orphans and corrects no record.
    public let sharedStore: Bool

    private func startSweeping(on eventLoop: EventLoop) {
        guard settings.sweepIntervalSeconds > 0 else { return }
        let interval = TimeAmount.seconds(Int64(settings.sweepIntervalSeconds))
        let task = eventLoop.scheduleRepeatedAsyncTask(initialDelay: interval, delay: interval) { _ in
            let promise = eventLoop.makePromise(of: Void.self)
            promise.completeWithTask {
                do { _ = try await self.collect() } catch {
                    self.logger.warning("content collection failed", metadata: ["error": "\(error)"])
                }
            }
            return promise.futureResult
        }
        sweep.withLockedValue { $0 = task }
    }

    /// Refuses new requests, stops the sweep, lets the uploads whose streams closed make their
    /// bytes durable and record them (at most `drainTimeout`), then stops the disk threads.
    /// Call after the transport closed its streams and before the store closes.
    public func shutdown(drainTimeout: Duration = .seconds(5)) async {
        let first = stopped.withLockedValue { v -> Bool in
            defer { v = true }
            return !v
        }
        guard first else { return }
        sweep.withLockedValue {
            $0?.cancel()
            $0 = nil
        }
        let busy = active.ids
        if !busy.isEmpty {
            // Whichever comes first: every busy content idle, or the timeout.
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let pending = NIOLockedValueBox<CheckedContinuation<Void, Never>?>(continuation)
                let resume: @Sendable () -> Void = {
                    pending.withLockedValue { c in
                        defer { c = nil }
                        return c
                    }?.resume()
                }
                Task {
                    for id in busy { await self.active.waitUntilIdle(id) }
                    resume()
                }
                Task {
                    try? await Task.sleep(for: drainTimeout)
                    resume()
                }
            }
            if !active.ids.isEmpty {
                logger.warning("content requests still running at shutdown", metadata: ["count": "\(active.ids.count)"])
            }
        }
        try? await threadPool.shutdownGracefully()
    }

    var isStopped: Bool { stopped.withLockedValue { $0 } }

    /// Returns once no request works on the content (an upload whose stream was reset has made
    /// its bytes durable and recorded them; a DELETE has finished).
    public func waitUntilIdle(_ id: ContentID) async { await active.waitUntilIdle(id) }

    /// Whether a request works on the content now.
    public func isBusy(_ id: ContentID) -> Bool { active.ids.contains(id) }

    // MARK: collection

    /// One collection sweep (CONTENT.md §7) at `now`: abandoned uploads, unreferenced complete
    /// content, content of messages deleted for all. Records go in one transaction, files after it.
    @discardableResult
    public func collect(at now: Timestamp = .now()) async throws -> ContentCollection {
        let busy = active.ids
        let abandonedBefore = Timestamp(
            millisecondsSince1970: now.millisecondsSince1970 - Int64(settings.abandonedUploadAgeSeconds) * 1000)
        let unreferencedBefore = Timestamp(
            millisecondsSince1970: now.millisecondsSince1970 - Int64(settings.unreferencedContentAgeSeconds) * 1000)
        let batch = 1000
        let result = try await store.write { tx -> ContentCollection in
            var out = ContentCollection()
            out.abandoned = try tx.read.abandonedUploads(notWrittenSince: abandonedBefore, limit: batch).filter {
                !busy.contains($0)
            }
            out.unreferenced = try tx.read.unreferencedContent(completedBefore: unreferencedBefore, limit: batch)
            out.deletedMessages = try tx.read.contentOfDeletedMessages(limit: batch).filter { !busy.contains($0) }
            for id in out.all { try tx.deleteUpload(id) }
            return out
        }
        let ids = result.all
        if !ids.isEmpty {
            let files = self.files
            try await threadPool.runIfActive { for id in ids { files.remove(id) } }
            logger.info(
                "content collected",
                metadata: [
                    "abandoned": "\(result.abandoned.count)", "unreferenced": "\(result.unreferenced.count)",
                    "deletedMessages": "\(result.deletedMessages.count)",
                ])
        }
        return result
    }

    // MARK: helpers for the handlers (event loop in, event loop out)

    /// Runs blocking disk work on the content threads; completes on `eventLoop`.
    func io<T: Sendable>(on eventLoop: EventLoop, _ body: @escaping @Sendable () throws -> T) -> EventLoopFuture<T> {
        threadPool.runIfActive(eventLoop: eventLoop, body)
    }

    func read<T: Sendable>(on eventLoop: EventLoop, _ body: @escaping @Sendable (StorageReader) throws -> T)
        -> EventLoopFuture<T>
    {
        let promise = eventLoop.makePromise(of: T.self)
        store.read(body) { promise.completeWith($0) }
        return promise.futureResult
    }

    func write<T: Sendable>(on eventLoop: EventLoop, _ body: @escaping @Sendable (StorageTransaction) throws -> T)
        -> EventLoopFuture<T>
    {
        let promise = eventLoop.makePromise(of: T.self)
        do { try store.submit(body) { promise.completeWith($0) } } catch { promise.fail(error) }
        return promise.futureResult
    }

    /// The user of the request's `authorization: Bearer <session token>` (CONTENT.md §1).
    func authenticate(_ headers: HeaderFields, on eventLoop: EventLoop) -> EventLoopFuture<UserID> {
        guard let value = headers["authorization"] else {
            return eventLoop.makeFailedFuture(ContentFailure(.authenticationRequired, "no authorization header"))
        }
        let prefix = "bearer "
        guard value.count > prefix.count, value.prefix(prefix.count).lowercased() == prefix else {
            return eventLoop.makeFailedFuture(
                ContentFailure(.authenticationRequired, "authorization is not a Bearer token"))
        }
        let token = String(value.dropFirst(prefix.count)).trimmingCharacters(in: .whitespaces)
        guard !token.isEmpty, token.utf8.count <= 4096, let hash = try? SHA256Hasher.hash(Array(token.utf8)) else {
            return eventLoop.makeFailedFuture(ContentFailure(.authenticationRequired, "the session token is malformed"))
        }
        let now = Timestamp.now()
        return read(on: eventLoop) { r in try r.session(tokenHash: hash, at: now).user }
            .flatMapErrorThrowing { error in
                guard let storage = error as? StorageError else { throw error }
                switch storage.code {
                case .sessionExpired: throw ContentFailure(.sessionExpired, storage.reason)
                case .sessionRevoked: throw ContentFailure(.sessionRevoked, storage.reason)
                case .sessionUnknown: throw ContentFailure(.authenticationRequired, "no session has this token")
                default: throw error
                }
            }
    }
}

/// What one collection sweep deleted.
public struct ContentCollection: Sendable, Hashable {
    public var abandoned: [ContentID] = []
    public var unreferenced: [ContentID] = []
    public var deletedMessages: [ContentID] = []
    public var all: [ContentID] { abandoned + unreferenced + deletedMessages }
}

/// The uploads in progress: at most one stream per content, a bounded number per user.
final class ActiveUploads: Sendable {
    enum Admission { case admitted, contentBusy, userBusy }
    private struct State {
        var ids: [ContentID: UserID] = [:]
        var perUser: [UserID: Int] = [:]
        var waiters: [ContentID: [CheckedContinuation<Void, Never>]] = [:]
        /// Uploads whose stream ended or was reset: the node is making their bytes durable.
        var settling: Set<ContentID> = []
        /// The declared size of each upload whose stream is open (reserved against the quota).
        var reserved: [ContentID: UInt64] = [:]
    }
    private let state = NIOLockedValueBox(State())

    /// The upload's stream ended or went away: what it received is being made durable and
    /// recorded (CONTENT.md §4: a HEAD waits for that).
    func settle(_ id: ContentID) {
        state.withLockedValue { s in if s.ids[id] != nil { s.settling.insert(id) } }
    }

    /// Whether `id`'s stream ended and its bytes are not recorded yet.
    func isSettling(_ id: ContentID) -> Bool { state.withLockedValue { $0.settling.contains(id) } }

    func begin(_ id: ContentID, user: UserID, limit: Int) -> Admission {
        state.withLockedValue { s in
            if s.ids[id] != nil { return .contentBusy }
            if s.perUser[user, default: 0] >= limit { return .userBusy }
            s.ids[id] = user
            s.perUser[user, default: 0] += 1
            return .admitted
        }
    }

    func end(_ id: ContentID) {
        let waiters = state.withLockedValue { s -> [CheckedContinuation<Void, Never>] in
            s.settling.remove(id)
            s.reserved.removeValue(forKey: id)
            guard let user = s.ids.removeValue(forKey: id) else { return [] }
            let left = s.perUser[user, default: 1] - 1
            s.perUser[user] = left > 0 ? left : nil
            return s.waiters.removeValue(forKey: id) ?? []
        }
        for waiter in waiters { waiter.resume() }
    }

    var ids: Set<ContentID> { state.withLockedValue { Set($0.ids.keys) } }

    /// Reserves `declaredSize` for the admitted upload `id` until it ends.
    func reserve(_ id: ContentID, declaredSize: UInt64) {
        state.withLockedValue { s in if s.ids[id] != nil { s.reserved[id] = declaredSize } }
    }

    /// The user's other uploads with an open stream and their declared sizes together.
    func reservations(of user: UserID, excluding id: ContentID) -> (ids: Set<ContentID>, bytes: UInt64) {
        state.withLockedValue { s in
            var ids: Set<ContentID> = []
            var bytes: UInt64 = 0
            for (other, size) in s.reserved where other != id && s.ids[other] == user {
                ids.insert(other)
                bytes += size
            }
            return (ids, bytes)
        }
    }

    /// Returns once no stream works on `id` (at once if none does).
    func waitUntilIdle(_ id: ContentID) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle = state.withLockedValue { s -> Bool in
                guard s.ids[id] != nil else { return true }
                s.waiters[id, default: []].append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }
}
