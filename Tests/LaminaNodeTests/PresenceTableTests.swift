import LaminaMerge
import LaminaModel
import Testing

@testable import LaminaNode

/// The node's presence table (SPEC §6.6): what each session and choice moves, who is told.
@Suite struct PresenceTableTests {
    let here = NodeID(1)
    let peer = NodeID(2)
    let alice: UserID = "alice"
    let bob: UserID = "bob"

    func hlc(_ p: UInt64, _ node: NodeID? = nil) -> HLCTimestamp {
        HLCTimestamp(physical: p, logical: 0, node: node ?? here)
    }
    func at(_ ms: Int64) -> Timestamp { Timestamp(millisecondsSince1970: ms) }

    @Test func sessionsAndChoicesMoveWhatOthersAndTheUserSee() {
        var t = PresenceTable(node: here)
        var moved = t.connect(alice, device: "phone", at: hlc(1), now: at(1))
        #expect(moved.visibleChanged && moved.ownChanged && moved.reportChanged)
        #expect(t.presence(of: alice, as: nil) == Presence(status: .available))
        // A second device changes nothing anyone sees, nor what other nodes must learn.
        moved = t.connect(alice, device: "laptop", at: hlc(2), now: at(2))
        #expect(!moved.visibleChanged && !moved.ownChanged && !moved.reportChanged)
        moved = t.choose(.invisible, of: alice, at: hlc(3), now: at(3))
        #expect(moved.visibleChanged && moved.ownChanged && moved.reportChanged)
        #expect(t.presence(of: alice, as: alice) == Presence(status: .invisible, lastSeenAt: at(3)))
        #expect(t.presence(of: alice, as: bob) == Presence(status: .offline, lastSeenAt: at(3)))
        // Invisible to offline: others see no change.
        _ = t.disconnect(alice, device: "phone", at: hlc(4), now: at(4))
        moved = t.disconnect(alice, device: "laptop", at: hlc(5), now: at(5))
        #expect(!moved.visibleChanged && moved.ownChanged)
        #expect(t.presence(of: alice, as: bob)?.lastSeenAt == at(3), "last seen when she went invisible")
        // Back: still invisible (the choice is kept while the node runs).
        _ = t.connect(alice, device: "phone", at: hlc(6), now: at(6))
        #expect(t.presence(of: alice, as: alice)?.status == .invisible)
        #expect(t.presence(of: bob, as: alice) == nil, "never seen")
    }

    @Test func followersAreIndexedWhileOnlineOnly() {
        var t = PresenceTable(node: here)
        #expect(t.follow(bob, [alice]).isEmpty, "bob is not online")
        _ = t.connect(bob, device: "d", at: hlc(1), now: at(1))
        #expect(t.follow(bob, [alice, bob]) == [alice], "never oneself")
        #expect(t.follow(bob, [alice]).isEmpty, "already")
        #expect(t.followers[alice] == [bob])
        t.unfollow(bob, alice)
        #expect(t.followers[alice] == nil)
        _ = t.follow(bob, [alice])
        _ = t.disconnect(bob, device: "d", at: hlc(2), now: at(2))
        #expect(t.followers[alice] == nil && t.followEdgeCount == 0)
    }

    @Test func anotherNodesReportsCountUntilForgotten() {
        var t = PresenceTable(node: here)
        var moved = t.apply(
            PresenceReport(
                node: peer, devices: 1, choice: PresenceChoice(status: .busy, at: hlc(5, peer)), at: hlc(5, peer)),
            of: alice, now: at(5))
        #expect(moved.visibleChanged && !moved.reportChanged, "another node's report is not this node's to send")
        #expect(t.presence(of: alice, as: bob)?.status == .busy)
        // A local device carries the latest choice known in this node's report.
        _ = t.connect(alice, device: "d", at: hlc(6), now: at(6))
        #expect(t.localReport(of: alice)?.choice?.status == .busy)
        _ = t.disconnect(alice, device: "d", at: hlc(7), now: at(7))
        #expect(t.presence(of: alice, as: bob)?.status == .busy, "still on the peer")
        let forgotten = t.forget(peer, now: at(8))
        #expect(forgotten.map(\.visibleChanged) == [true])
        #expect(t.presence(of: alice, as: bob) == Presence(status: .offline, lastSeenAt: at(8)))
        moved = t.apply(PresenceReport(node: peer, devices: 0, choice: nil, at: hlc(1, peer)), of: bob, now: at(9))
        #expect(!moved.visibleChanged)
    }
}
