import Foundation
import LaminaModel

/// One refresh of a live query: the new results and how they differ from the previous ones.
public struct QueryUpdate<Object: QueryableObject>: Sendable {
    public var objects: [Object]
    public var changes: QueryChanges
}

/// A live query: runs once on `start()`, then again after every committed change that can
/// affect it, and reports inserts, deletes, moves and updates against the previous results.
///
/// As Layer's `LYRQueryController`: `updatableProperties` limits the updates reported to
/// changes of the listed properties (inserts, deletes and moves are always reported), and a
/// `paginationWindow` holds only the first n (n > 0) or last -n (n < 0) of the query's
/// results, with `totalNumberOfObjects` counting them all.
public final class QueryController<Object: QueryableObject>: @unchecked Sendable {
    public let query: Query<Object>
    private let store: LocalStore
    private let lock = NSLock()
    /// Refreshes asked for, and the latest applied: a refresh applies only when it is newer
    /// than what is shown (one after a change reads asynchronously, one the app asks for
    /// synchronously; either may finish first).
    private var requested: UInt64 = 0
    private var applied: UInt64 = 0
    private var current: [Object] = []
    private var total = 0
    private var window: Int?
    private var updatable: Set<String>?
    private var started = false
    private var task: Task<Void, Never>?
    private let continuation: AsyncThrowingStream<QueryUpdate<Object>, any Error>.Continuation
    /// Every refresh that changed the results, in order. Ends when the controller stops;
    /// fails with `ClientError` when a refresh cannot run (e.g. the store closed) or when the
    /// consumer falls `QueryController.maxPendingUpdates` updates behind.
    public let updates: AsyncThrowingStream<QueryUpdate<Object>, any Error>
    /// Updates waiting for the consumer before the stream ends.
    public static var maxPendingUpdates: Int { 1_000 }

    /// Checks the query, the properties and the window; nothing runs until `start()`.
    public init(
        store: LocalStore, query: Query<Object>, updatableProperties: Set<String>? = nil, paginationWindow: Int? = nil
    ) throws(ClientError) {
        try query.validate()
        try Self.validate(updatableProperties: updatableProperties)
        try Self.validate(paginationWindow: paginationWindow)
        self.store = store
        self.query = query
        self.updatable = updatableProperties
        self.window = paginationWindow
        (updates, continuation) = AsyncThrowingStream.makeStream(
            bufferingPolicy: .bufferingOldest(Self.maxPendingUpdates))
    }

    static func validate(updatableProperties: Set<String>?) throws(ClientError) {
        guard let unknown = updatableProperties?.subtracting(Object.updatableProperties).min() else { return }
        throw ClientError(
            .unknownProperty, "\(Object.queryTarget.rawValue) have no updatable property '\(unknown.prefix(200))'")
    }

    static func validate(paginationWindow: Int?) throws(ClientError) {
        guard let window = paginationWindow else { return }
        guard window != 0, window.magnitude <= UInt(QueryLimits.maxLimit) else {
            throw ClientError(
                .invalidArgument,
                "a pagination window is 1...\(QueryLimits.maxLimit) objects from the start or the end, not \(window)")
        }
    }

    /// The properties whose changes are reported as updates; nil: every change.
    public var updatableProperties: Set<String>? { lock.withLock { updatable } }

    /// Reports from the next refresh on only updates of these properties (nil: every change).
    public func setUpdatableProperties(_ properties: Set<String>?) throws(ClientError) {
        try Self.validate(updatableProperties: properties)
        lock.withLock { updatable = properties }
    }

    /// The first n (n > 0) or the last -n (n < 0) of the query's results are held; nil: all.
    public var paginationWindow: Int? { lock.withLock { window } }

    /// Moves or resizes the window (e.g. one page more of older messages: a larger negative
    /// window). Once started, the results are re-read at once and the difference reported.
    public func setPaginationWindow(_ paginationWindow: Int?) throws(ClientError) {
        try Self.validate(paginationWindow: paginationWindow)
        let running = lock.withLock { () -> Bool in
            window = paginationWindow
            return started
        }
        if running { refresh() }
    }

    /// How many objects the query returns, the window aside (as of the latest refresh).
    public var totalNumberOfObjects: Int { lock.withLock { total } }

    deinit {
        task?.cancel()
        continuation.finish()
    }

    /// The latest results.
    public var objects: [Object] { lock.withLock { current } }

    /// Subscribes to the store's changes, runs the query and returns the first results.
    @discardableResult
    public func start() throws(ClientError) -> [Object] {
        let stream = store.changes()  // subscribe before the first run: no change is missed
        let (generation, window) = nextRefresh()
        let (first, count) = try store.execute(query, window: window)
        lock.withLock {
            applied = max(applied, generation)
            current = first
            total = count
            started = true
            task?.cancel()
            task = Task { [weak self] in
                for await batch in stream {
                    guard let self, !Task.isCancelled else { return }
                    if self.isRelevant(batch) { await self.refreshAsync() }
                }
            }
        }
        return first
    }

    /// Stops following changes and ends `updates`.
    public func stop() {
        lock.withLock {
            task?.cancel()
            task = nil
            started = false
        }
        continuation.finish()
    }

    private func isRelevant(_ batch: [ObjectChange]) -> Bool {
        switch Object.queryTarget {
        // Conversation properties derive from messages (last message, counts), so any change counts.
        case .conversations: return !batch.isEmpty
        case .messages: return batch.contains { if case .message = $0.object { true } else { false } }
        case .channels: return batch.contains { if case .channel = $0.object { true } else { false } }
        case .channelMessages:
            return batch.contains { if case .channelMessage = $0.object { true } else { false } }
        case .identities: return batch.contains { if case .identity = $0.object { true } else { false } }
        }
    }

    /// A number for a refresh about to read, and the window it reads.
    private func nextRefresh() -> (UInt64, Int?) {
        lock.withLock {
            requested += 1
            return (requested, window)
        }
    }

    /// Re-runs the query (on the caller's thread: the app asked) and reports the difference.
    private func refresh() {
        let (generation, window) = nextRefresh()
        do { apply(try store.execute(query, window: window), generation) } catch { fail(error) }
    }

    /// Re-runs the query after a change, reading through GRDB's async API (this runs on the
    /// cooperative pool), and reports the difference.
    private func refreshAsync() async {
        let (generation, window) = nextRefresh()
        do { apply(try await store.executeAsync(query, window: window), generation) } catch { fail(error) }
    }

    private func fail(_ error: ClientError) {
        continuation.finish(throwing: error)
        stop()
    }

    /// Shows a refresh's results unless a newer one is shown already; reports the difference
    /// (in the order the results are shown).
    private func apply(_ result: (objects: [Object], total: Int), _ generation: UInt64) {
        let next = result.objects
        let dropped = lock.withLock { () -> Bool in
            guard generation > applied else { return false }
            applied = generation
            let previous = current
            current = next
            total = result.total
            let before = Dictionary(previous.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
            let changed = Set(
                next.filter { obj in
                    before[obj.id].map { Self.isUpdate(from: $0, to: obj, reporting: updatable) } ?? false
                }.map(\.id))
            let changes = QueryDiff.diff(old: previous.map(\.id), new: next.map(\.id), changed: changed)
            guard !changes.isEmpty else { return false }
            if case .dropped = continuation.yield(QueryUpdate(objects: next, changes: changes)) { return true }
            return false
        }
        if dropped {
            continuation.finish(
                throwing: ClientError(
                    .queryTooComplex,
                    "the consumer fell \(Self.maxPendingUpdates) updates behind; restart the controller"))
        }
    }

    /// Whether an object held before and after a refresh is reported as updated: its value
    /// changed, in one of `properties` when they are given.
    static func isUpdate(from old: Object, to new: Object, reporting properties: Set<String>?) -> Bool {
        guard old != new else { return false }
        guard let properties else { return true }
        return !new.changedProperties(since: old).isDisjoint(with: properties)
    }
}
