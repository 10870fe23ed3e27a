import LaminaClient
import LaminaModel
import LaminaWire
import Testing

/// Others' typing state in the SDK (SPEC §6.1: an indicator not refreshed for 6 s is finished).
@Suite struct TypingIndicatorsTests {
    let c1 = ConversationID.random()
    let c2 = ConversationID.random()

    func ms(_ value: Int64) -> Timestamp { Timestamp(millisecondsSince1970: value) }
    func typing(_ user: UserID, _ state: TypingState, in c: ConversationID) -> TypingChanged {
        TypingChanged(conversationID: c, user: user, state: state)
    }

    @Test func changesAreReportedOnceAndRefreshesKeepAnIndicatorRunning() {
        var t = TypingIndicators()
        let r1 = t.receive(typing("bob", .started, in: c1), now: ms(0))
        #expect(r1 == typing("bob", .started, in: c1))
        let r2 = t.receive(typing("bob", .started, in: c1), now: ms(2_500))
        #expect(r2 == nil)
        #expect(t.nextDeadline == ms(8_500))
        let r3 = t.expire(now: ms(8_499))
        #expect(r3.isEmpty)
        #expect(t.states(in: c1) == ["bob": .started])
        let r4 = t.receive(typing("bob", .paused, in: c1), now: ms(3_000))
        #expect(r4 == typing("bob", .paused, in: c1))
        let r5 = t.receive(typing("bob", .finished, in: c1), now: ms(4_000))
        #expect(r5 == typing("bob", .finished, in: c1))
        #expect(t.states(in: c1).isEmpty)
        // A finished with nothing running (e.g. the node's, after the SDK ended it) is not reported.
        let r6 = t.receive(typing("bob", .finished, in: c1), now: ms(5_000))
        #expect(r6 == nil)
        #expect(t.nextDeadline == nil)
    }

    @Test func anIndicatorNotRefreshedForSixSecondsEnds() {
        var t = TypingIndicators()
        _ = t.receive(typing("bob", .started, in: c1), now: ms(0))
        _ = t.receive(typing("carol", .paused, in: c1), now: ms(1_000))
        _ = t.receive(typing("bob", .started, in: c2), now: ms(2_000))
        let r7 = t.expire(now: ms(5_999))
        #expect(r7.isEmpty)
        let r8 = t.expire(now: ms(6_000))
        #expect(r8 == [typing("bob", .finished, in: c1)])
        #expect(t.states(in: c1) == ["carol": .paused])
        #expect(t.nextDeadline == ms(7_000))
        let r9 = t.expire(now: ms(9_000))
        #expect(Set(r9) == [typing("carol", .finished, in: c1), typing("bob", .finished, in: c2)])
        #expect(t.states(in: c1).isEmpty && t.states(in: c2).isEmpty)
        let r10 = t.receive(typing("bob", .finished, in: c1), now: ms(9_500))
        #expect(r10 == nil)
    }

    @Test func newIndicatorsPastTheLimitAreIgnored() throws {
        var t = TypingIndicators()
        var reported = 0
        for i in 0..<TypingIndicators.maxIndicators
        where t.receive(typing(try UserID("u\(i)"), .started, in: c1), now: ms(0)) != nil { reported += 1 }
        #expect(reported == TypingIndicators.maxIndicators)
        let r12 = t.receive(typing("late", .started, in: c1), now: ms(1))
        #expect(r12 == nil)
        let r13 = t.receive(typing("u0", .paused, in: c1), now: ms(1))
        #expect(r13 == typing("u0", .paused, in: c1))
        #expect(t.states(in: c1).count == TypingIndicators.maxIndicators)
    }
}
