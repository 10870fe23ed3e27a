import LaminaMerge
import LaminaModel
import Testing

@testable import LaminaNode

/// Presence beyond direct links (SPEC §6.6): what a node relays, to whom, and what it forgets
/// when a link or a route goes away; and the last-seen times the store kept.
@Suite struct PresenceRoutesTests {
    let here = NodeID(1)
    let hub = NodeID(2)
    let far = NodeID(3)
    let other = NodeID(4)
    let alice: UserID = "alice"
    let bob: UserID = "bob"

    func report(_ origin: NodeID, _ physical: UInt64, devices: Int = 1) -> PresenceReport {
        PresenceReport(
            node: origin, devices: devices, choice: nil, at: HLCTimestamp(physical: physical, logical: 0, node: origin))
    }
    func at(_ ms: Int64) -> Timestamp { Timestamp(millisecondsSince1970: ms) }

    @Test func aNewerReportIsAppliedAndPassedOnOnceAndAnOlderOneStops() {
        var t = PresenceTable(node: here)
        t.linkUp(hub)
        t.linkUp(other)
        let first = t.receive([(alice, report(far, 10))], origin: far, via: hub, now: at(10))
        #expect(first.newer.count == 1 && first.transitions.map(\.visibleChanged) == [true])
        #expect(t.routes[far] == hub)
        // The same report again (a cycle brought it back), or an older one: nothing to pass on.
        #expect(t.receive([(alice, report(far, 10))], origin: far, via: other, now: at(11)).newer.isEmpty)
        #expect(t.receive([(alice, report(far, 9))], origin: far, via: other, now: at(11)).newer.isEmpty)
        #expect(t.routes[far] == hub, "the route stays with the link of the newest report")
        // Its own reports coming back are ignored.
        #expect(t.receive([(bob, report(here, 50))], origin: here, via: hub, now: at(12)).newer.isEmpty)
        #expect(t.presence(of: bob, as: nil) == nil)
    }

    @Test func splitHorizonAndALostLinkWithdrawsWhatCameByIt() {
        var t = PresenceTable(node: here)
        t.linkUp(hub)
        t.linkUp(other)
        _ = t.receive([(alice, report(hub, 5))], origin: hub, via: hub, now: at(5))
        _ = t.receive([(bob, report(far, 6))], origin: far, via: hub, now: at(6))
        // The hub is offered nothing it sent; the other peer is offered both origins.
        #expect(t.relayedReports(for: hub).isEmpty)
        #expect(t.relayedReports(for: other).map(\.origin) == [hub, far])
        let (transitions, lost) = t.linkDown(hub, now: at(7))
        #expect(lost == [hub, far])
        #expect(Set(transitions.filter(\.visibleChanged).map(\.user)) == [alice, bob])
        #expect(t.presence(of: bob, as: nil) == Presence(status: .offline, lastSeenAt: at(7)))
        #expect(t.routes == [other: other], "only the link still up")
    }

    @Test func aWithdrawalForgetsRoutesThroughTheSenderAndOffersOthersBack() {
        var t = PresenceTable(node: here)
        t.linkUp(hub)
        t.linkUp(far)
        _ = t.receive([(alice, report(other, 5))], origin: other, via: hub, now: at(5))
        _ = t.receive([(bob, report(far, 5))], origin: far, via: far, now: at(5))
        // The hub no longer reaches `other` nor `far`: `other` came by the hub (forgotten),
        // `far` is linked directly here (offered back to the hub).
        let (transitions, forgotten, held) = t.withdraw([far, other], by: hub, now: at(6))
        #expect(forgotten == [other] && held == [far])
        #expect(transitions.map(\.user) == [alice])
        #expect(t.relayedReports(for: hub, only: held).map(\.origin) == [far])
        // A withdrawal of what this node holds no route for changes nothing.
        #expect(t.withdraw([other], by: far, now: at(7)).forgotten.isEmpty)
    }

    @Test func twoSessionsWithOnePeerEndOneAtATime() {
        var t = PresenceTable(node: here)
        t.linkUp(hub)
        t.linkUp(hub)
        _ = t.receive([(alice, report(hub, 5))], origin: hub, via: hub, now: at(5))
        #expect(t.linkDown(hub, now: at(6)).lost.isEmpty, "the other session with the hub is still up")
        #expect(t.presence(of: alice, as: nil)?.status == .available)
        #expect(t.linkDown(hub, now: at(7)).lost == [hub])
    }

    @Test func storedLastSeenTimesShowForUsersNotSeenSinceTheStart() {
        var t = PresenceTable(node: here)
        _ = t.connect(alice, device: "d", at: HLCTimestamp(physical: 1, logical: 0, node: here), now: at(1))
        let gone = t.disconnect(alice, device: "d", at: HLCTimestamp(physical: 2, logical: 0, node: here), now: at(2))
        #expect(gone.lastSeenAt == at(2))
        t.remember(lastSeen: [alice: at(1), bob: at(3)])
        #expect(t.presence(of: alice, as: nil) == Presence(status: .offline, lastSeenAt: at(2)), "the node's own time")
        #expect(t.presence(of: bob, as: nil) == Presence(status: .offline, lastSeenAt: at(3)))
        let back = t.connect(bob, device: "d", at: HLCTimestamp(physical: 4, logical: 0, node: here), now: at(4))
        #expect(back.lastSeenAt == nil && t.presence(of: bob, as: nil) == Presence(status: .available))
    }
}
