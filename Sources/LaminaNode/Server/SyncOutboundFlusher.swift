import LaminaTransport
import NIOConcurrencyHelpers
import NIOCore

/// Writes the frames the sessions of one event loop queued, in one task of that loop for
/// all of them: a group commit's ACKs and deliveries for many streams cost one task (and at
/// most one wake-up) instead of one per stream, and each connection they travel on is
/// flushed once (one HTTP/2 send, one TLS record run, one socket write), however many of
/// its streams had frames.
final class SyncOutboundFlusher: @unchecked Sendable {
    private let eventLoop: EventLoop
    // Guarded by `lock`: the bridges with frames to write, and whether a task will take them.
    private let lock = NIOLock()
    private var waiting: [SyncStreamBridge] = []
    private var scheduled = false
    // Event loop only: the bridges being flushed (storage reused), and the batch.
    private var running: [SyncStreamBridge] = []
    private var batch = TransportWriteBatch()

    private init(eventLoop: EventLoop) {
        self.eventLoop = eventLoop
    }

    /// The flusher of each event loop that has bridges. Held weakly: the bridges hold their
    /// flusher and it holds its loop, so a loop's entry is live exactly while bridges use it
    /// (and a loop's address cannot be taken by another meanwhile).
    private static let flushers = NIOLockedValueBox([ObjectIdentifier: Weak]())

    private struct Weak {
        weak var flusher: SyncOutboundFlusher?
    }

    static func flusher(for eventLoop: EventLoop) -> SyncOutboundFlusher {
        flushers.withLockedValue { flushers in
            let key = ObjectIdentifier(eventLoop)
            if let flusher = flushers[key]?.flusher { return flusher }
            let flusher = SyncOutboundFlusher(eventLoop: eventLoop)
            if flushers.count >= 64 { flushers = flushers.filter { $0.value.flusher != nil } }
            flushers[key] = Weak(flusher: flusher)
            return flusher
        }
    }

    /// Has `bridge` flushed in the loop's next flush task. A bridge asks at most once until
    /// it is flushed (its own `flushScheduled`), so its frames keep their order.
    func schedule(_ bridge: SyncStreamBridge) {
        let start = lock.withLock { () -> Bool in
            waiting.append(bridge)
            defer { scheduled = true }
            return !scheduled
        }
        if start { eventLoop.execute { self.run() } }
    }

    private func run() {
        lock.withLock {
            swap(&running, &waiting)
            scheduled = false
        }
        for bridge in running { bridge.flush(into: &batch) }
        running.removeAll(keepingCapacity: running.count <= 1_024)
        batch.flush()
    }
}
