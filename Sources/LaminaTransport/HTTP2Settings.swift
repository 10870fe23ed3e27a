import NIOCore

/// Limits and window sizes of one HTTP/2 connection (both roles). Every limit is enforced
/// before the work it bounds is done.
public struct HTTP2Settings: Sendable, Hashable {
    /// SETTINGS_MAX_CONCURRENT_STREAMS we advertise; nghttp2 refuses streams beyond it.
    public var maxConcurrentStreams: UInt32 = 100
    /// SETTINGS_INITIAL_WINDOW_SIZE: the most inbound bytes one stream may have buffered
    /// and not yet taken by the layer above (the backpressure bound per stream).
    public var initialStreamWindow: Int32 = 256 * 1024
    /// The window a stream gets when the layer above opens it (``TransportStream/openReceiveWindow()``),
    /// e.g. once the stream's client has authenticated. A server that announces a small
    /// ``initialStreamWindow`` bounds what an unknown client can make it buffer.
    public var openedStreamWindow: Int32 = 256 * 1024
    /// The connection-level receive window (all streams together). It reopens as bytes
    /// arrive; only the stream windows wait for the layer above, so one stalled stream
    /// never blocks the others.
    public var connectionWindow: Int32 = 1024 * 1024
    /// SETTINGS_MAX_HEADER_LIST_SIZE: a request or response whose header list is larger
    /// (RFC 9113 §6.5.2 counting) resets the stream.
    public var maxHeaderListSize: UInt32 = 16 * 1024
    /// A stream reports not writable once this many outbound bytes wait in its queue.
    public var streamOutboundHighWater: Int = 64 * 1024
    /// Writes to the socket are issued in batches of at most this size; serialisation stops
    /// while the channel is not writable.
    public var connectionFlushHighWater: Int = 64 * 1024
    /// How long a graceful shutdown (GOAWAY) waits for open streams before closing.
    public var drainTimeout: TimeAmount = .seconds(10)
    /// Server role: a connection with no open stream for this long (counted from the TLS
    /// handshake, then from its last stream's close) gets GOAWAY (NO_ERROR) and is closed.
    /// nil keeps idle connections open.
    public var idleConnectionTimeout: TimeAmount? = nil
    /// Frames that make no progress (DATA without payload or END_STREAM, PRIORITY, PING and
    /// SETTINGS that are not ACKs, WINDOW_UPDATE of less than 1 KiB) a peer may send in one second; one more and the connection
    /// ends with GOAWAY ENHANCE_YOUR_CALM. nghttp2 bounds what such frames make it queue
    /// (ACKs, RST_STREAM), not the frames themselves (CVE-2019-9518 "empty frames flood").
    /// 0 disables the check.
    public var maxUnproductiveFramesPerSecond: Int = 1_000
    /// A connection whose socket takes no byte for this long (the channel stays unwritable:
    /// the peer reads nothing) is closed, and everything queued for its streams released.
    /// nil waits for ever.
    public var stalledWriteTimeout: TimeAmount? = .seconds(30)
    /// Both roles: PING a connection that has been quiet, close it when the ACK is late
    /// (``HTTP2Liveness``). nil never pings (a vanished peer is then noticed only by TCP).
    public var liveness: HTTP2Liveness? = nil

    public init() {}
}
