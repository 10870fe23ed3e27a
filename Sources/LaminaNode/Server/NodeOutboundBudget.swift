import Atomics

/// The node's outbound memory: bytes queued for clients over every sync stream (encoded and
/// not yet taken by HTTP/2 framing), against one budget. While the total is over the budget,
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
