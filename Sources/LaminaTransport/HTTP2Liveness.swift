import NIOCore

/// When an HTTP/2 connection proves its peer is still there (``HTTP2Settings/liveness``):
/// after ``pingAfterQuiet`` with nothing received, a PING; if its ACK does not arrive within
/// ``ackDeadline``, the connection is closed (its streams end with a `timeout` error). A
/// connection whose peer vanished without a reset (packets dropped, a host gone) is then
/// noticed within `pingAfterQuiet + ackDeadline` instead of TCP's retransmission timeout.
///
/// While our output waits for the socket and the peer's TCP keeps acknowledging it, the PING
/// queued behind that output is not late: the deadline counts from the last such progress.
public struct HTTP2Liveness: Sendable, Hashable, CustomStringConvertible {
    /// Nothing received for this long: send a PING.
    public var pingAfterQuiet: TimeAmount
    /// A PING not acknowledged within this long closes the connection.
    public var ackDeadline: TimeAmount

    public init(pingAfterQuiet: TimeAmount, ackDeadline: TimeAmount) {
        (self.pingAfterQuiet, self.ackDeadline) = (pingAfterQuiet, ackDeadline)
    }

    /// The longest a dead peer goes unnoticed.
    public var detectionBound: TimeAmount { pingAfterQuiet + ackDeadline }

    public var description: String {
        "PING after \(Self.format(pingAfterQuiet)) quiet, ACK within \(Self.format(ackDeadline))"
    }

    /// `2 s`, `1.5 s` or `300 ms`.
    public static func format(_ amount: TimeAmount) -> String {
        let ms = amount.nanoseconds / 1_000_000
        if ms < 1_000 { return "\(ms) ms" }
        return ms % 1_000 == 0 ? "\(ms / 1_000) s" : "\(Double(ms) / 1_000) s"
    }
}

/// One connection's liveness bookkeeping (``HTTP2Liveness``): when it last heard from its
/// peer, the PING in flight, and what to do when its timer fires. Pure: the caller passes the
/// clock and carries out the step.
struct ConnectionLiveness {
    let settings: HTTP2Liveness
    private(set) var lastInbound: NIODeadline
    /// When the unanswered PING was sent (nil: none in flight).
    private(set) var pingSentAt: NIODeadline?
    private(set) var pingsAnswered = 0

    init(_ settings: HTTP2Liveness, now: NIODeadline) {
        self.settings = settings
        lastInbound = now
    }

    enum Step: Equatable {
        /// Submit a PING now, then check again at the deadline.
        case ping(checkAt: NIODeadline)
        /// Nothing to do before then.
        case wait(until: NIODeadline)
        /// The PING went unanswered: close the connection.
        case close
    }

    /// Bytes arrived from the peer.
    mutating func received(at now: NIODeadline) { lastInbound = now }

    /// A PING ACK arrived: the PING in flight (if any) is answered.
    mutating func acknowledged(at now: NIODeadline) {
        lastInbound = now
        if pingSentAt != nil {
            pingSentAt = nil
            pingsAnswered += 1
        }
    }

    /// What to do at `now`; `outputMovedAt` is the last time the peer was seen taking our
    /// output while it waited for the socket.
    mutating func step(now: NIODeadline, outputMovedAt: NIODeadline) -> Step {
        if let sent = pingSentAt {
            let deadline = max(sent, outputMovedAt) + settings.ackDeadline
            return now >= deadline ? .close : .wait(until: deadline)
        }
        let quietUntil = lastInbound + settings.pingAfterQuiet
        guard now >= quietUntil else { return .wait(until: quietUntil) }
        pingSentAt = now
        return .ping(checkAt: now + settings.ackDeadline)
    }
}
