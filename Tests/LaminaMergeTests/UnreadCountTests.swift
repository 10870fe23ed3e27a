import LaminaMerge
import LaminaModel
import Testing

@Suite struct UnreadCountTests {
    let conversation = Gen.conversations[0]
    static func t(_ p: UInt64) -> HLCTimestamp { HLCTimestamp(physical: p, logical: 0, node: NodeID(1)) }
    func stamp(_ i: Int, _ p: UInt64, from sender: UserID = "u1") -> UnreadCounts.Operation {
        .created(MessageStamp(id: Gen.messages[i], conversation: conversation, sender: sender, position: Self.t(p)))
    }
    var genesis: UnreadCounts.Operation {
        .membership(
            .genesis(
                MembershipGenesis(participants: ["u1", "u2", "u3"], creator: "u1", isDistinct: false, at: Self.t(1))))
    }
    func readUpTo(_ user: UserID, _ p: UInt64) -> UnreadCounts.Operation {
        .receipt(.readUpTo(ConversationUserKey(conversation: conversation, user: user), Self.t(p)))
    }
    func counts(_ ops: [UnreadCounts.Operation]) -> UnreadCounts {
        var s = UnreadCounts(conversation: conversation)
        for op in ops { s.apply(op) }
        return s
    }

    @Test func readsCountWhetherTheyArriveBeforeOrAfterTheMessages() {
        let ops = [genesis, stamp(0, 10), stamp(1, 20), stamp(2, 30), readUpTo("u2", 20)]
        let inOrder = counts(ops)
        let readFirst = counts(ops.reversed())
        #expect(inOrder == readFirst)
        #expect(inOrder.unreadCount(for: "u2") == 1)
        #expect(inOrder.unreadCount(for: "u3") == 3)
        #expect(inOrder.unreadCount(for: "u1") == 0)  // their own messages
        let withRead = counts(ops + [.receipt(RecipientStatusLattice.markRead(Gen.messages[2], by: "u2"))])
        #expect(withRead.unreadCount(for: "u2") == 0)
    }

    @Test func deletionsAndClearedHistoryLeaveTheCount() {
        let base = [genesis, stamp(0, 10), stamp(1, 20), stamp(2, 30)]
        #expect(counts([.deleted(Gen.messages[1], forUser: nil)] + base).unreadCount(for: "u2") == 2)
        let mine = counts(base + [.deleted(Gen.messages[1], forUser: "u3")])
        #expect(mine.unreadCount(for: "u3") == 2 && mine.unreadCount(for: "u2") == 3)
        let cleared = counts(base + [.historyCleared(upTo: Self.t(20), forUser: "u2")])
        #expect(
            cleared.unreadCount(for: "u2") == 1 && cleared.messageCount(for: "u2") == 1
                && cleared.unreadCount(for: "u3") == 3)
    }

    @Test func aRemovedParticipantCountsOnlyWhatTheyMaySee() {
        let remove = UnreadCounts.Operation.membership(
            .change(MembershipOperation(.remove, user: "u3", actor: "u1", at: Self.t(15))))
        let removed = counts([genesis, stamp(0, 10), remove, stamp(1, 20), stamp(2, 30)])
        #expect(removed.unreadMessages(for: "u3").map(\.id) == [Gen.messages[0]])
        #expect(removed.messageCount(for: "u3") == 1)
        let readded = counts([
            genesis, stamp(0, 10), remove, stamp(1, 20), stamp(2, 30),
            .membership(.change(MembershipOperation(.add, user: "u3", actor: "u2", at: Self.t(25)))),
        ])
        #expect(readded.unreadCount(for: "u3") == 3)
    }

    @Test func countsNeverIncludeOwnMessagesAndNeverExceedTheTotal() {
        for i in 0..<1_000 {
            let seed = SplitMix64.seed("unread-bounds", case: i)
            var r = SplitMix64(seed: seed)
            let state = UnreadCounts(Gen.unreadOps(&r))
            for user in Gen.users {
                let unread = state.unreadMessages(for: user)
                #expect(
                    unread.allSatisfy { $0.sender != user } && unread.count <= state.messageCount(for: user),
                    "seed \(seed)")
            }
        }
    }
}
