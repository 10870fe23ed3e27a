/// The one error type of `LaminaTransport`: a stable code, a human-readable reason
/// (for OpenSSL and nghttp2 failures, the library's own reason string) and the
/// place in the source that raised it.
public struct TransportError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A stable, machine-readable code. Extensible: new codes may be added.
    public struct Code: Hashable, Sendable, RawRepresentable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// A TLS configuration could not be applied (bad PEM file, key mismatch, cipher list…).
        public static let tlsConfiguration = Code(rawValue: "tls-configuration")
        /// The TLS handshake failed (protocol version, certificate verification, alert…).
        public static let tlsHandshake = Code(rawValue: "tls-handshake")
        /// The peer did not agree on ALPN `h2`.
        public static let alpnRefused = Code(rawValue: "alpn-refused")
        /// A TLS failure after the handshake (bad record, unexpected EOF…).
        public static let tlsFailure = Code(rawValue: "tls-failure")
        /// The TLS handshake did not finish in time.
        public static let handshakeTimeout = Code(rawValue: "handshake-timeout")
        /// nghttp2 reported a protocol error or the peer violated HTTP/2.
        public static let http2Protocol = Code(rawValue: "http2-protocol")
        /// The stream was reset (by either side); the reason carries the HTTP/2 error code.
        public static let streamReset = Code(rawValue: "stream-reset")
        /// The connection closed before the stream finished.
        public static let connectionClosed = Code(rawValue: "connection-closed")
        /// The connection is shutting down (GOAWAY) and takes no new streams.
        public static let goingAway = Code(rawValue: "going-away")
        /// A configured limit was exceeded (header list size, concurrent streams…).
        public static let limitExceeded = Code(rawValue: "limit-exceeded")
        /// An operation was used in the wrong state (e.g. writing after finish).
        public static let invalidState = Code(rawValue: "invalid-state")
        /// A URL or host could not be used.
        public static let invalidURL = Code(rawValue: "invalid-url")
        /// A cryptographic helper failed (bad key, bad signature encoding…).
        public static let crypto = Code(rawValue: "crypto")
        /// A file could not be read or written.
        public static let io = Code(rawValue: "io")
        /// A TCP connection could not be made (refused, unreachable, connect timeout).
        public static let connectFailed = Code(rawValue: "connect-failed")
        /// The peer did not answer in time.
        public static let timeout = Code(rawValue: "timeout")
        /// The peer's answer is not valid HTTP or exceeds a limit.
        public static let badResponse = Code(rawValue: "bad-response")
    }

    public var code: Code
    public var reason: String
    public var file: String
    public var line: Int

    public init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    public var description: String { "\(code): \(reason)" }

    /// Equality ignores the source location.
    public static func == (lhs: TransportError, rhs: TransportError) -> Bool {
        lhs.code == rhs.code && lhs.reason == rhs.reason
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(reason)
    }
}
