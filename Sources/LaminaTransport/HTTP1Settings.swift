import NIOCore

/// Limits of the HTTP/1.1 side of a ``TransportServer`` (ALPN `http/1.1`).
public struct HTTP1Settings: Sendable {
    /// The longest a request may take from its first byte to its last; then 408 and close.
    public var requestTimeout: TimeAmount = .seconds(30)
    /// A keep-alive connection with no request in progress for this long is closed.
    public var idleTimeout: TimeAmount = .seconds(60)
    /// The largest request header field (name and value), in bytes.
    public var maxHeaderFieldSize = 8 * 1024
    /// The largest request header block, in bytes.
    public var maxHeaderListSize = 64 * 1024
    /// The most request header fields.
    public var maxHeaderFieldCount = 100

    public init() {}
}
