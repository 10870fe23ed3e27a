import Foundation
import LaminaClient
import LaminaWire
import NIOConcurrencyHelpers

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

    init(
        inner: any FrameChannel, onReceive: @escaping @Sendable () -> Void,
        onSyncRefused: @escaping @Sendable (ErrorFrame) -> Void
    ) {
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
private final class SyncRequests: Sendable {
    private let ids = NIOLockedValueBox<Set<UUID>>([])

    func insert(_ id: UUID) { _ = ids.withLockedValue { $0.insert(id) } }
    func contains(_ id: UUID) -> Bool { ids.withLockedValue { $0.contains(id) } }
}

/// Wakes every waiter whenever the session has handled a frame. Subscribers get a stream of wake-ups
/// (coalesced: at most one pending each).
final class FrameSignal: Sendable {
    private struct Waiters {
        var next = 0
        var byToken: [Int: AsyncStream<Void>.Continuation] = [:]
    }
    private let waiters = NIOLockedValueBox(Waiters())

    func subscribe() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let token = waiters.withLockedValue { w -> Int in
            w.next += 1
            w.byToken[w.next] = continuation
            return w.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.waiters.withLockedValue { $0.byToken.removeValue(forKey: token) }
        }
        return stream
    }

    func fire() {
        for continuation in waiters.withLockedValue({ Array($0.byToken.values) }) { continuation.yield() }
    }
}
