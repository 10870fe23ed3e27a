import Foundation
import LaminaMerge
import LaminaModel
import Testing

@Suite struct ReactionSetTests {
    let alice = Reaction(user: "alice", key: "👍")
    let bob = Reaction(user: "bob", key: "👍")
    func at(_ ms: UInt64, _ node: UInt64 = 1) -> HLCTimestamp {
        HLCTimestamp(physical: ms, logical: 0, node: NodeID(node))
    }

    @Test func countsAndWhoReacted() {
        let set = ReactionSet([
            .added(alice, tag: at(1)), .added(bob, tag: at(2)),
            .added(Reaction(user: "alice", key: "❤️"), tag: at(3)),
        ])
        #expect(set.counts == ["👍": 2, "❤️": 1])
        #expect(set.keys(of: "alice") == ["👍", "❤️"])
        #expect(set.keys(of: "carol").isEmpty)
    }

    @Test func aRemoveTakesOnlyTheAddsItSaw() {
        var deviceA = ReactionSet([.added(alice, tag: at(1))])
        // Device A removes what it saw while device B (another node) adds again concurrently.
        let remove = ReactionOperation.removed(alice, observed: deviceA.liveTags(of: alice))
        deviceA.apply(remove)
        #expect(!deviceA.contains(alice))
        let deviceB = ReactionSet([.added(alice, tag: at(1)), .added(alice, tag: at(2, 2))])
        #expect(deviceA.merged(with: deviceB).contains(alice), "the concurrent add wins")
        #expect(deviceB.merged(with: deviceA) == deviceA.merged(with: deviceB))
    }

    @Test func aRemoveArrivingBeforeItsAddStillHidesIt() {
        let set = ReactionSet([.removed(alice, observed: [at(1)]), .added(alice, tag: at(1))])
        #expect(!set.contains(alice))
        #expect(set.counts.isEmpty)
    }

    @Test func removingNothingChangesNothing() {
        let set = ReactionSet([.added(alice, tag: at(1)), .removed(alice, observed: [])])
        #expect(set == ReactionSet([.added(alice, tag: at(1))]))
    }
}

@Suite struct NotificationSettingTests {
    func at(_ ms: UInt64, _ node: UInt64 = 1) -> HLCTimestamp {
        HLCTimestamp(physical: ms, logical: 0, node: NodeID(node))
    }

    @Test func theLatestWriteWinsWhateverTheOrder() {
        let mute = NotificationSetting.Write(level: .none, at: at(5))
        let mentions = NotificationSetting.Write(level: .mentions, at: at(7, 2))
        #expect(NotificationSetting([mute, mentions]) == NotificationSetting([mentions, mute]))
        #expect(NotificationSetting([mute, mentions]).level(now: 0) == .mentions)
    }

    @Test func aLevelRunsOutWithoutAWrite() {
        let setting = NotificationSetting([NotificationSetting.Write(level: .none, until: 1_000, at: at(5))])
        #expect(setting.level(now: 999) == .none)
        #expect(!setting.notifies(mentioned: true, now: 999))
        #expect(setting.level(now: 1_000) == .all)
        #expect(setting.notifies(mentioned: false, now: 1_000))
    }

    @Test func mentionsOnlyNotifiesForMentions() {
        let setting = NotificationSetting([NotificationSetting.Write(level: .mentions, at: at(1))])
        #expect(setting.notifies(mentioned: true, now: 0))
        #expect(!setting.notifies(mentioned: false, now: 0))
        #expect(NotificationSetting().notifies(mentioned: false, now: 0), "the default is all")
    }
}

@Suite struct ThreadSummaryTests {
    func at(_ ms: UInt64) -> HLCTimestamp { HLCTimestamp(physical: ms, logical: 0, node: NodeID(1)) }
    let first = MessageID(uuid: UUID(uuid: (1, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 1)))
    let second = MessageID(uuid: UUID(uuid: (2, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 2)))

    @Test func countAndLastReply() {
        let summary = ThreadSummary([
            .replied(second, at: at(9)), .replied(first, at: at(4)), .replied(first, at: at(4)),
        ])
        #expect(summary.replyCount == 2)
        #expect(summary.lastReply?.id == second)
    }

    @Test func aDeletionSeenBeforeItsReplyHidesIt() {
        let summary = ThreadSummary([.deleted(second), .replied(first, at: at(4)), .replied(second, at: at(9))])
        #expect(summary.replyCount == 1)
        #expect(summary.lastReply?.id == first)
        #expect(ThreadSummary([.deleted(first), .replied(first, at: at(1))]).lastReply == nil)
    }
}
