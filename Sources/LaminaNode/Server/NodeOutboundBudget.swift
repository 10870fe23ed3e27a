import NIOConcurrencyHelpers

/// The node's outbound memory: bytes queued for clients over every sync stream (encoded and
/// not yet taken by HTTP/2 framing), against one budget. While the total is over the budget,
/// a stream that holds more than its fair share (the budget over the open streams, at least
/// ``minimumShare``) is treated as a slow consumer at its next send. A stream's own bound
/// (`maxOutboundBytes`) still applies; this one keeps many slow streams together from
/// exhausting the node.
public final class NodeOutboundBudget: Sendable {
    public let limit: Int
    public let minimumShare: Int
    private let state = NIOLockedValueBox((total: 0, streams: 0, resets: 0))

    public init(limit: Int, minimumShare: Int) {
        self.limit = limit
        self.minimumShare = minimumShare
    }

    /// Bytes queued now over all streams.
    public var total: Int { state.withLockedValue { $0.total } }
    /// Streams reset because they held more than their share while the node was over budget.
    public var resets: Int { state.withLockedValue { $0.resets } }

    func streamOpened() { state.withLockedValue { $0.streams += 1 } }
    func streamClosed() { state.withLockedValue { $0.streams -= 1 } }

    /// Adds `delta` queued bytes of one stream (negative when they leave). Returns whether that
    /// stream, now holding `queued`, is over its share of a node over budget (then counted as reset).
    @discardableResult
    func add(_ delta: Int, queued: Int) -> Bool {
        state.withLockedValue { s in
            s.total += delta
            guard delta > 0, s.total > limit, queued > max(minimumShare, limit / max(1, s.streams)) else { return false }
            s.resets += 1
            return true
        }
    }
}
