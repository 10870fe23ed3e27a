import Foundation
import LaminaClient
import LaminaWire

/// A frame channel that reports each time the session asks for the next frame: the sync
/// session handles frames one at a time, so by then the previous frame (an ACK that
/// emptied the outbox, which commits no object change to wait on) has been handled.
///
/// It also watches the session's SYNC requests: the SDK's session waits for their ACK, so
/// an ERROR answering one (e.g. a cursor beyond the node's feed, when the node's data was
/// reset) is reported through `onSyncRefused` instead of going unnoticed.
struct ObservedChannel: FrameChannel {
    let inner: any FrameChannel
    let onReceive: @Sendable () -> Void
    let onSyncRefused: @Sendable (ErrorFrame) -> Void
    private let syncRequests = SyncRequests()

    init(inner: any FrameChannel, onReceive: @escaping @Sendable () -> Void, onSyncRefused: @escaping @Sendable (ErrorFrame) -> Void) {
        self.inner = inner
        self.onReceive = onReceive
        self.onSyncRefused = onSyncRefused
    }

    func send(_ frame: Frame) async throws(ClientError) {
        if case .sync(let request) = frame { syncRequests.insert(request.requestID) }
        try await inner.send(frame)
    }

    func receive() async throws(ClientError) -> Frame? {
        onReceive()
        let frame = try await inner.receive()
        if case .error(let error)? = frame, let id = error.requestID, syncRequests.contains(id) {
            onSyncRefused(error)
        }
        return frame
    }

    func close() async { await inner.close() }
}

/// The ids of the SYNC requests sent on one channel (one or two per session).
private final class SyncRequests: @unchecked Sendable {
    private let lock = NSLock()
    private var ids: Set<UUID> = []

    func insert(_ id: UUID) { _ = lock.withLock { ids.insert(id) } }
    func contains(_ id: UUID) -> Bool { lock.withLock { ids.contains(id) } }
}

/// Wakes every waiter whenever the session has handled a frame. Subscribers get a stream of wake-ups
/// (coalesced: at most one pending each).
final class FrameSignal: @unchecked Sendable {
    private let lock = NSLock()
    private var next = 0
    private var waiters: [Int: AsyncStream<Void>.Continuation] = [:]

    func subscribe() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let token = lock.withLock { () -> Int in
            next += 1
            waiters[next] = continuation
            return next
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            _ = self.lock.withLock { self.waiters.removeValue(forKey: token) }
        }
        return stream
    }

    func fire() {
        for continuation in lock.withLock({ Array(waiters.values) }) { continuation.yield() }
    }
}
