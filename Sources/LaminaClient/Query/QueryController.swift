import Foundation
import LaminaModel

/// One refresh of a live query: the new results and how they differ from the previous ones.
public struct QueryUpdate<Object: QueryableObject>: Sendable {
    public var objects: [Object]
    public var changes: QueryChanges
}

/// A live query: runs once on `start()`, then again after every committed change that can
/// affect it, and reports inserts, deletes, moves and updates against the previous results.
public final class QueryController<Object: QueryableObject>: @unchecked Sendable {
    public let query: Query<Object>
    private let store: LocalStore
    private let lock = NSLock()
    private var current: [Object] = []
    private var task: Task<Void, Never>?
    private let continuation: AsyncThrowingStream<QueryUpdate<Object>, any Error>.Continuation
    /// Every refresh that changed the results, in order. Ends when the controller stops;
    /// fails with `ClientError` when a refresh cannot run (e.g. the store closed) or when the
    /// consumer falls `QueryController.maxPendingUpdates` updates behind.
    public let updates: AsyncThrowingStream<QueryUpdate<Object>, any Error>
    /// Updates waiting for the consumer before the stream ends.
    public static var maxPendingUpdates: Int { 1_000 }

    /// Checks the query; nothing runs until `start()`.
    public init(store: LocalStore, query: Query<Object>) throws(ClientError) {
        try query.validate()
        self.store = store
        self.query = query
        (updates, continuation) = AsyncThrowingStream.makeStream(bufferingPolicy: .bufferingOldest(Self.maxPendingUpdates))
    }

    deinit {
        task?.cancel()
        continuation.finish()
    }

    /// The latest results.
    public var objects: [Object] { lock.withLock { current } }

    /// Subscribes to the store's changes, runs the query and returns the first results.
    @discardableResult
    public func start() throws(ClientError) -> [Object] {
        let stream = store.changes()   // subscribe before the first run: no change is missed
        let first = try store.execute(query)
        lock.withLock {
            current = first
            task?.cancel()
            task = Task { [weak self] in
                for await batch in stream {
                    guard let self, !Task.isCancelled else { return }
                    if self.isRelevant(batch) { self.refresh() }
                }
            }
        }
        return first
    }

    /// Stops following changes and ends `updates`.
    public func stop() {
        lock.withLock { task?.cancel(); task = nil }
        continuation.finish()
    }

    private func isRelevant(_ batch: [ObjectChange]) -> Bool {
        switch Object.queryTarget {
        // Conversation properties derive from messages (last message, counts), so any change counts.
        case .conversations: return !batch.isEmpty
        case .messages: return batch.contains { if case .message = $0.object { true } else { false } }
        }
    }

    /// Re-runs the query and reports the difference, if any.
    private func refresh() {
        let next: [Object]
        do { next = try store.execute(query) } catch {
            continuation.finish(throwing: error)
            stop()
            return
        }
        let update: QueryUpdate<Object>? = lock.withLock {
            let previous = current
            current = next
            let before = Dictionary(previous.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
            let changed = Set(next.filter { obj in before[obj.id].map { $0 != obj } ?? false }.map(\.id))
            let changes = QueryDiff.diff(old: previous.map(\.id), new: next.map(\.id), changed: changed)
            return changes.isEmpty ? nil : QueryUpdate(objects: next, changes: changes)
        }
        if let update, case .dropped = continuation.yield(update) {
            continuation.finish(throwing: ClientError(.queryTooComplex, "the consumer fell \(Self.maxPendingUpdates) updates behind; restart the controller"))
        }
    }
}
