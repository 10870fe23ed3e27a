import Atomics
import LaminaTransport

/// The node's outbound memory: bytes queued for clients over every sync stream (encoded and
/// not yet taken by HTTP/2 framing) and every Client API WebSocket (queued and not yet written
/// to its socket, ``WebSocketAccount``), against one budget. While the total is over the budget,
/// a stream that holds more than its fair share (the budget over the open streams, at least
/// ``minimumShare``) is treated as a slow consumer at its next send. A stream's own bound
/// (`maxOutboundBytes`) still applies; this one keeps many slow streams together from
/// exhausting the node. Every send reports here, so the counters are atomics, not a lock.
public final class NodeOutboundBudget: Sendable {
    public let limit: Int
    public let minimumShare: Int
    private let queued = ManagedAtomic(0)
    private let streams = ManagedAtomic(0)
    private let resetCount = ManagedAtomic(0)

    public init(limit: Int, minimumShare: Int) {
        self.limit = limit
        self.minimumShare = minimumShare
    }

    /// Bytes queued now over all streams.
    public var total: Int { queued.load(ordering: .relaxed) }
    /// Streams reset because they held more than their share while the node was over budget.
    public var resets: Int { resetCount.load(ordering: .relaxed) }
    /// Streams (sync streams and WebSockets) counted now.
    public var openStreams: Int { streams.load(ordering: .relaxed) }

    func streamOpened() { streams.wrappingIncrement(ordering: .relaxed) }
    func streamClosed() { streams.wrappingDecrement(ordering: .relaxed) }

    /// Adds `delta` queued bytes of one stream (negative when they leave). Returns whether that
    /// stream, now holding `queued`, is over its share of a node over budget (then counted as reset).
    @discardableResult
    func add(_ delta: Int, queued stream: Int) -> Bool {
        guard delta != 0 else { return false }
        let total = queued.wrappingIncrementThenLoad(by: delta, ordering: .relaxed)
        guard delta > 0, total > limit,
            stream > max(minimumShare, limit / max(1, streams.load(ordering: .relaxed)))
        else { return false }
        resetCount.wrappingIncrement(ordering: .relaxed)
        return true
    }
}

extension NodeOutboundBudget {
    /// A Client API WebSocket counted in the budget as a sync stream is: one of the open
    /// streams, its queued bytes in the total, closed as a slow consumer (1008) when it holds
    /// more than its share of a node over budget.
    struct WebSocketAccount: WebSocketOutboundAccount {
        let budget: NodeOutboundBudget

        /// Counts one more open stream in `budget`.
        init(opening budget: NodeOutboundBudget) {
            self.budget = budget
            budget.streamOpened()
        }

        func queuedBytesChanged(by delta: Int, queued: Int) -> Bool { budget.add(delta, queued: queued) }

        func closed() { budget.streamClosed() }
    }
}
