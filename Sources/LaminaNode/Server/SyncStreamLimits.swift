import NIOCore

/// Per-stream limits of the sync-stream bridge. Every one is enforced before the work it bounds.
public struct SyncStreamLimits: Sendable, Hashable, Codable {
    /// The largest frame payload accepted from a client (at most the protocol's 4 MiB).
    public var maxFrameSize: Int = 1 * 1024 * 1024
    /// Encoded bytes queued for a client and not yet taken by HTTP/2 framing; past this the
    /// client is disconnected as a slow consumer instead of growing the node's memory.
    public var maxOutboundBytes: Int = 4 * 1024 * 1024
    /// A large answer (FETCH_HISTORY, a SYNC backlog) adds its next frame only while at most
    /// this many bytes are queued for the client, so it is produced as the client reads and
    /// stays far below ``maxOutboundBytes`` (one frame is at most ~2 MiB: a 1 MiB batch estimate
    /// plus one message). At most half of ``maxOutboundBytes``.
    public var pacedAnswerQueueBytes: Int = 1 * 1024 * 1024
    /// While a large answer waits for the client to read, a client that takes no byte for this
    /// many seconds is reset as a slow consumer (a slow reader is served, a stopped one is not).
    public var stalledReaderTimeoutSeconds: Int = 30
    /// A stream with no inbound frame for this many seconds is closed (PING keeps it alive).
    public var idleTimeoutSeconds: Int = 120
    /// Inbound frames delivered but not yet answered by the session; at this many the
    /// stream stops reading (HTTP/2 flow control then stalls the client).
    public var maxUnansweredFrames: Int = 256
    /// After the node ends its side, how long the client gets to end its own before a reset.
    public var closeGraceSeconds: Int = 5
    /// The largest frame payload accepted before the session is authenticated (AUTHENTICATED
    /// sent): every frame of SPEC §5 fits (AUTHENTICATE and RESUME_SESSION are at most 8,448
    /// bytes), so an unauthenticated stream never buffers more than this plus one DATA chunk.
    public var unauthenticatedMaxFrameSize: Int = 16 * 1024
    /// ``maxUnansweredFrames`` before authentication (HELLO, NONCE_REQUEST, AUTHENTICATE and
    /// a few PINGs are all a client needs to have in flight then).
    public var unauthenticatedMaxUnansweredFrames: Int = 8
    /// Before authentication, answers queued for the client (encoded, not yet taken by HTTP/2
    /// framing) above which the stream stops reading until the client reads: a client that
    /// sends PINGs faster than it reads the PONGs stalls instead of growing the node's memory.
    public var unauthenticatedMaxOutboundBytes: Int = 16 * 1024
    /// Wall time from the stream's opening to AUTHENTICATED; past it the session ends with a
    /// fatal `authentication-required`, whatever frames it sent. While the node itself owes an
    /// answer (a slow store) the deadline moves on, up to three times this in all.
    public var authenticationTimeoutSeconds: Int = 30

    public init() {}

    var idleTimeout: TimeAmount { .seconds(Int64(idleTimeoutSeconds)) }
    var stalledReaderTimeout: TimeAmount { .seconds(Int64(stalledReaderTimeoutSeconds)) }
    var authenticationTimeout: TimeAmount { .seconds(Int64(authenticationTimeoutSeconds)) }
    /// The frame limit before authentication (never above the stream's maximum).
    var unauthenticatedFrameLimit: Int { min(unauthenticatedMaxFrameSize, maxFrameSize) }
}
