import Foundation
import LaminaClient
import LaminaWire

/// A frame channel that reports each time the session asks for the next frame: the sync
/// session handles frames one at a time, so by then the previous frame (an ACK that
/// emptied the outbox, which commits no object change to wait on) has been handled.
struct ObservedChannel: FrameChannel {
    let inner: any FrameChannel
    let onReceive: @Sendable () -> Void

    func send(_ frame: Frame) async throws(ClientError) { try await inner.send(frame) }

    func receive() async throws(ClientError) -> Frame? {
        onReceive()
        return try await inner.receive()
    }

    func close() async { await inner.close() }
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
