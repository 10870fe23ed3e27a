import NIOCore
import Testing

@testable import LaminaTransport

/// ``ConnectionLiveness``'s steps on a clock the test moves: quiet → PING, ACK → quiet again,
/// late ACK → close, and a PING queued behind output the peer is still taking is not late.
@Suite struct ConnectionLivenessTests {
    static let settings = HTTP2Liveness(pingAfterQuiet: .seconds(1), ackDeadline: .seconds(2))
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
    static func at(_ ms: Int64) -> NIODeadline { start + .milliseconds(ms) }

    @Test func quietThenPingThenAnsweredThenQuietAgain() {
        var liveness = ConnectionLiveness(Self.settings, now: Self.start)
        #expect(liveness.step(now: Self.at(500), outputMovedAt: Self.start) == .wait(until: Self.at(1_000)))
        liveness.received(at: Self.at(800))  // traffic moves the quiet period
        #expect(liveness.step(now: Self.at(1_000), outputMovedAt: Self.start) == .wait(until: Self.at(1_800)))
        #expect(liveness.step(now: Self.at(1_800), outputMovedAt: Self.start) == .ping(checkAt: Self.at(3_800)))
        // Other frames do not answer the PING: only its ACK does.
        liveness.received(at: Self.at(2_000))
        #expect(liveness.step(now: Self.at(2_500), outputMovedAt: Self.start) == .wait(until: Self.at(3_800)))
        liveness.acknowledged(at: Self.at(2_600))
        #expect(liveness.pingsAnswered == 1)
        // Quiet counts again from the ACK.
        #expect(liveness.step(now: Self.at(3_000), outputMovedAt: Self.start) == .wait(until: Self.at(3_600)))
        #expect(liveness.step(now: Self.at(3_600), outputMovedAt: Self.start) == .ping(checkAt: Self.at(5_600)))
    }

    @Test func anUnansweredPingClosesAtItsDeadline() {
        var liveness = ConnectionLiveness(Self.settings, now: Self.start)
        #expect(liveness.step(now: Self.at(1_000), outputMovedAt: Self.start) == .ping(checkAt: Self.at(3_000)))
        #expect(liveness.step(now: Self.at(2_999), outputMovedAt: Self.start) == .wait(until: Self.at(3_000)))
        #expect(liveness.step(now: Self.at(3_000), outputMovedAt: Self.start) == .close)
    }

    @Test func aPingBehindOutputThePeerStillTakesIsNotLate() {
        var liveness = ConnectionLiveness(Self.settings, now: Self.start)
        #expect(liveness.step(now: Self.at(1_000), outputMovedAt: Self.start) == .ping(checkAt: Self.at(3_000)))
        // The peer's TCP acknowledged more of our output at 2.5 s: the deadline counts from there.
        #expect(liveness.step(now: Self.at(3_000), outputMovedAt: Self.at(2_500)) == .wait(until: Self.at(4_500)))
        #expect(liveness.step(now: Self.at(4_500), outputMovedAt: Self.at(2_500)) == .close)
        // An ACK at the last moment would have kept it.
        var answered = ConnectionLiveness(Self.settings, now: Self.start)
        _ = answered.step(now: Self.at(1_000), outputMovedAt: Self.start)
        answered.acknowledged(at: Self.at(4_400))
        #expect(answered.step(now: Self.at(4_500), outputMovedAt: Self.at(2_500)) == .wait(until: Self.at(5_400)))
    }
}
