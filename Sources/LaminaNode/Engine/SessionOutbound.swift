import LaminaWire

/// Where the engine sends frames for one session. Implemented by the server's sync-stream
/// bridge (encodes, writes to the HTTP/2 stream with a bounded outbound queue) and by tests.
public protocol SessionOutbound: AnyObject, Sendable {
    /// Queues frames for the client, in order. Never blocks. When the session's outbound bound
    /// is exceeded the implementation closes the session itself (slow consumer).
    func send(_ frames: [Frame])
    /// Sends `error` (if any) as the last frame, then ends the stream.
    func close(with error: ErrorFrame?)
}
