import Dispatch
import Foundation
import LaminaModel

/// Receives every batch of object changes the local store commits, in commit order, and
/// every operation that failed after it was accepted locally, on a serial queue of the
/// store's (never on the database writer).
public protocol LaminaClientDelegate: AnyObject, Sendable {
    /// One committed transaction's changes, in the order they were made.
    func objectsDidChange(_ changes: [ObjectChange])
    /// An operation the client accepted (and queued) failed for good: the node refused it, or
    /// its content could not be uploaded. It left the outbox; `failure` names it and carries
    /// the node's code and reason (`failure.error`). Layer's `didFailOperationWithError:`.
    /// Called after the objects' changes of the same transaction. Does nothing by default.
    func didFailOperation(_ failure: OutboxFailure)
}

extension LaminaClientDelegate {
    public func didFailOperation(_ failure: OutboxFailure) {}
}

/// Fans committed change batches out to async-sequence subscribers and delegates.
/// Batches are published from the writer's commit hook, so their order is commit order.
final class ChangeHub: @unchecked Sendable {
    private let lock = NSLock()
    private var nextToken: UInt64 = 0
    private var subscribers: [UInt64: AsyncStream<[ObjectChange]>.Continuation] = [:]
    private var delegates: [ObjectIdentifier: WeakDelegate] = [:]
    private let delegateQueue = DispatchQueue(label: "lamina.client.delegate")
    /// The most undelivered batches one subscriber may have; past it the stream ends.
    let bufferLimit: Int

    private struct WeakDelegate { weak var delegate: (any LaminaClientDelegate)? }

    init(bufferLimit: Int) { self.bufferLimit = bufferLimit }

    /// A stream of every batch committed from now on. It ends when the store closes, or
    /// when the subscriber falls `bufferLimit` batches behind (then re-query and resubscribe).
    func subscribe() -> AsyncStream<[ObjectChange]> {
        let (stream, continuation) = AsyncStream<[ObjectChange]>.makeStream(
            bufferingPolicy: .bufferingOldest(bufferLimit))
        let token: UInt64 = lock.withLock {
            nextToken += 1
            subscribers[nextToken] = continuation
            return nextToken
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            _ = self.lock.withLock { self.subscribers.removeValue(forKey: token) }
        }
        return stream
    }

    func addDelegate(_ delegate: any LaminaClientDelegate) {
        lock.withLock { delegates[ObjectIdentifier(delegate)] = WeakDelegate(delegate: delegate) }
    }

    func removeDelegate(_ delegate: any LaminaClientDelegate) {
        _ = lock.withLock { delegates.removeValue(forKey: ObjectIdentifier(delegate)) }
    }

    func publish(_ batch: [ObjectChange]) {
        guard !batch.isEmpty else { return }
        let (streams, targets) = lock.withLock {
            () -> ([AsyncStream<[ObjectChange]>.Continuation], [any LaminaClientDelegate]) in
            delegates = delegates.filter { $0.value.delegate != nil }
            return (Array(subscribers.values), delegates.values.compactMap(\.delegate))
        }
        for continuation in streams {
            if case .dropped = continuation.yield(batch) { continuation.finish() }
        }
        if !targets.isEmpty {
            delegateQueue.async { for target in targets { target.objectsDidChange(batch) } }
        }
    }

    /// Tells the delegates that an operation failed after it was accepted locally.
    func publishFailure(_ failure: OutboxFailure) {
        let targets = lock.withLock { delegates.values.compactMap(\.delegate) }
        guard !targets.isEmpty else { return }
        delegateQueue.async { for target in targets { target.didFailOperation(failure) } }
    }

    /// Ends every subscriber's stream (the store is closing).
    func finishAll() {
        let streams = lock.withLock { () -> [AsyncStream<[ObjectChange]>.Continuation] in
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }
        for continuation in streams { continuation.finish() }
    }
}
