import LaminaWire

/// Where the engine sends frames for one session. Implemented by the server's sync-stream
/// bridge (encodes, writes to the HTTP/2 stream with a bounded outbound queue) and by tests.
public protocol SessionOutbound: AnyObject, Sendable {
    /// Queues frames for the client, in order. Never blocks. When the session's outbound bound
    /// is exceeded the implementation closes the session itself (slow consumer).
    func send(_ frames: [Frame])
    /// Sends `error` (if any) as the last frame, then ends the stream.
    func close(with error: ErrorFrame?)
    /// Suspends until the outbound queue is short enough for the next frame of a large answer
    /// (history, a SYNC backlog), so such answers are produced as the client reads instead of
    /// all at once. Returns false once the stream is closed (the answer stops there). An
    /// implementation resets a client that takes nothing for a bounded time.
    func roomForPacedAnswer() async -> Bool
    /// Like ``roomForPacedAnswer()``, but returns once the queue is (nearly) empty: a page of
    /// a large answer has left the node. False once the stream is closed.
    func pacedAnswerDrained() async -> Bool
    /// The session's answer starts (`true`) or stops (`false`) waiting for a lease of the
    /// node's ``AnswerBudget``. An implementation watches the client meanwhile: a stream
    /// whose connection reads nothing of what it was sent is reset within the stall timeout
    /// even though it holds no answer bytes of its own yet.
    func waitsForAnswerBudget(_ waiting: Bool)
    /// The connection the stream travels on (nonces are tied to it, SPEC §5.2); nil when
    /// there is none (tests): the session's nonces are then its own.
    var connectionID: UInt64? { get }
}

extension SessionOutbound {
    /// Outbounds without a bounded queue (tests) always have room.
    public func roomForPacedAnswer() async -> Bool { true }
    /// Outbounds that do not say otherwise: as ``roomForPacedAnswer()``.
    public func pacedAnswerDrained() async -> Bool { await roomForPacedAnswer() }
    /// Outbounds without a transport to watch (tests) do nothing.
    public func waitsForAnswerBudget(_ waiting: Bool) {}
    /// No connection: the session's nonces are its own.
    public var connectionID: UInt64? { nil }
}
