import LaminaModel
import LaminaWire
import Testing

@testable import LaminaNode

/// The node's table of running typing indicators (SPEC §6.1: not refreshed for 6 s is finished).
@Suite struct TypingTimeoutsTests {
    /// A manual clock's instant: milliseconds from an arbitrary origin.
    struct Instant: InstantProtocol {
        var ms: Int64
        func advanced(by duration: Duration) -> Instant {
            Instant(
                ms: ms + duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
        }
        func duration(to other: Instant) -> Duration { .milliseconds(other.ms - ms) }
        static func < (a: Instant, b: Instant) -> Bool { a.ms < b.ms }
    }

    typealias Table = TypingTimeouts<Instant>
    let c1 = ConversationID.random()
    let c2 = ConversationID.random()

    @Test func anIndicatorEndsSixSecondsAfterItsLastRefresh() {
        var t = Table()
        let r1 = t.record(.started, of: "alice", in: c1, at: Instant(ms: 0))
        #expect(r1)
        #expect(t.nextDeadline == Instant(ms: 6_000))
        let r2 = t.expire(at: Instant(ms: 5_999))
        #expect(r2.isEmpty)
        let r3 = t.record(.started, of: "alice", in: c1, at: Instant(ms: 2_500))
        #expect(r3)
        // The first deadline comes, but the refresh moved it: nothing ends, the next one waits.
        let r4 = t.expire(at: Instant(ms: 6_000))
        #expect(r4.isEmpty)
        #expect(t.nextDeadline == Instant(ms: 8_500))
        let r5 = t.expire(at: Instant(ms: 8_499))
        #expect(r5.isEmpty)
        let r6 = t.expire(at: Instant(ms: 8_500))
        #expect(r6 == [Table.Key(conversation: c1, user: "alice")])
        #expect(t.count == 0)
        #expect(t.nextDeadline == nil)
    }

    @Test func pausedExpiresAndFinishedEndsAtOnce() {
        var t = Table()
        let r7 = t.record(.paused, of: "alice", in: c1, at: Instant(ms: 0))
        #expect(r7)
        let r8 = t.record(.started, of: "bob", in: c1, at: Instant(ms: 1_000))
        #expect(r8)
        let r9 = t.record(.finished, of: "bob", in: c1, at: Instant(ms: 2_000))
        #expect(r9)
        // Bob finished himself: only Alice's paused indicator ends on time.
        let r10 = t.expire(at: Instant(ms: 60_000))
        #expect(r10 == [Table.Key(conversation: c1, user: "alice")])
        // A finished without a running indicator changes nothing.
        let r11 = t.record(.finished, of: "carol", in: c2, at: Instant(ms: 61_000))
        #expect(r11)
        #expect(t.count == 0)
        #expect(t.nextDeadline == nil)
    }

    @Test func indicatorsEndInDeadlineOrderPerConversationAndUser() {
        var t = Table()
        let r12 = t.record(.started, of: "alice", in: c1, at: Instant(ms: 0))
        #expect(r12)
        let r13 = t.record(.started, of: "alice", in: c2, at: Instant(ms: 100))
        #expect(r13)
        let r14 = t.record(.started, of: "bob", in: c1, at: Instant(ms: 200))
        #expect(r14)
        let r15 = t.expire(at: Instant(ms: 6_150))
        #expect(r15 == [Table.Key(conversation: c1, user: "alice"), Table.Key(conversation: c2, user: "alice")])
        let r16 = t.expire(at: Instant(ms: 6_200))
        #expect(r16 == [Table.Key(conversation: c1, user: "bob")])
    }

    @Test func aFullTableRefusesNewIndicatorsButKeepsRefreshingRunningOnes() throws {
        var t = Table()
        var accepted = 0
        for i in 0..<Table.maxIndicators where t.record(.started, of: try UserID("u\(i)"), in: c1, at: Instant(ms: 0)) {
            accepted += 1
        }
        #expect(accepted == Table.maxIndicators)
        let r18 = t.record(.started, of: "late", in: c1, at: Instant(ms: 1))
        #expect(!r18)
        let r19 = t.record(.started, of: "u0", in: c1, at: Instant(ms: 1))
        #expect(r19)
        #expect(t.count == Table.maxIndicators)
        let r20 = t.expire(at: Instant(ms: 6_000))
        #expect(r20.count == Table.maxIndicators - 1)
        let r21 = t.record(.started, of: "late", in: c1, at: Instant(ms: 6_000))
        #expect(r21)
    }

    @Test func aFloodOfRefreshesIsBoundedByTheQueue() {
        var t = Table()
        var accepted = 0
        for i in 0..<(Table.maxQueued + 10) {
            if t.record(.started, of: "alice", in: c1, at: Instant(ms: Int64(i / 1000))) { accepted += 1 }
        }
        #expect(accepted == Table.maxQueued)
        #expect(t.count == 1)
        // Once superseded deadlines pass, the queue has room again.
        let r22 = t.expire(at: Instant(ms: 6_000))
        #expect(r22.isEmpty)
        let r23 = t.record(.started, of: "alice", in: c1, at: Instant(ms: 7_000))
        #expect(r23)
    }
}
