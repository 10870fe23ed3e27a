import NIOCore

/// Limits of the WebSocket routes of a ``TransportServer`` (``TransportRouter/addWebSocket(_:settings:_:)``).
/// Every one is enforced where the input enters, before the work it bounds.
public struct WebSocketSettings: Sendable, Hashable, Codable {
    /// The largest frame payload a client may send; a larger frame's header closes the
    /// connection with 1009 (message too big) before its payload is read.
    public var maxFrameBytes: Int = 1024 * 1024
    /// The largest message (the payloads of a fragmented message together); past it, 1009.
    public var maxMessageBytes: Int = 1024 * 1024
    /// The most fragments one message may arrive in; past it, 1009.
    public var maxFragments: Int = 256
    /// After this many seconds without a frame from the client the server sends a PING.
    public var pingAfterQuietSeconds: Int = 30
    /// A connection with no frame from the client (a PONG counts) for this many seconds is
    /// closed with 1001 (going away).
    public var idleTimeoutSeconds: Int = 75
    /// Bytes queued for the client and not yet written to its socket; past this the client
    /// is a slow reader and the connection is closed with 1008 (policy violation, reason
    /// `slow consumer`).
    public var maxOutboundBytes: Int = 4 * 1024 * 1024
    /// The most WebSockets open at once on one route; an upgrade over it is answered 503.
    public var maxConnections: Int = 10_000
    /// After the server sent its CLOSE, how long the client gets to answer before the
    /// connection is closed anyway.
    public var closeGraceSeconds: Int = 5

    public init() {}

    var pingAfterQuiet: TimeAmount { .seconds(Int64(pingAfterQuietSeconds)) }
    var idleTimeout: TimeAmount { .seconds(Int64(idleTimeoutSeconds)) }
    var closeGrace: TimeAmount { .seconds(Int64(closeGraceSeconds)) }

    /// The settings' problems (empty when valid).
    public var problems: [String] {
        var found: [String] = []
        if maxFrameBytes < 125 || maxFrameBytes > Int(UInt32.max) { found.append("maxFrameBytes must be 125...2^32-1") }
        if maxMessageBytes < maxFrameBytes { found.append("maxMessageBytes must be at least maxFrameBytes") }
        if maxFragments < 1 { found.append("maxFragments must be at least 1") }
        if pingAfterQuietSeconds < 1 { found.append("pingAfterQuietSeconds must be at least 1") }
        if idleTimeoutSeconds <= pingAfterQuietSeconds {
            found.append("idleTimeoutSeconds must exceed pingAfterQuietSeconds")
        }
        if maxOutboundBytes < maxMessageBytes { found.append("maxOutboundBytes must be at least maxMessageBytes") }
        if maxConnections < 1 { found.append("maxConnections must be at least 1") }
        if closeGraceSeconds < 1 { found.append("closeGraceSeconds must be at least 1") }
        return found
    }
}
