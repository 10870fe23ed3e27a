import LaminaMerge
import LaminaModel
import Testing

@Suite struct ChannelMembershipTests {
    let n1 = NodeID(1)
    let n2 = NodeID(2)

    func at(_ p: UInt64, _ node: NodeID) -> HLCTimestamp { HLCTimestamp(physical: p, logical: 0, node: node) }

    @Test func joinThenLeaveThenJoinAgain() {
        var m = ChannelMembership()
        #expect(!m.isMember("alice"))
        m.apply(.joined("alice", at: at(1, n1)))
        #expect(m.isMember("alice"))
        m.apply(.left("alice", at: at(2, n1)))
        #expect(!m.isMember("alice"))
        #expect(m.memberCount == 0)
        m.apply(.joined("alice", at: at(3, n1)))
        #expect(m.members == ["alice"])
    }

    @Test func aStaleOperationArrivingLateChangesNothing() {
        var m = ChannelMembership()
        m.apply(.left("bob", at: at(5, n2)))
        m.apply(.joined("bob", at: at(4, n1)))
        #expect(!m.isMember("bob"))
        m.apply(.joined("bob", at: at(6, n1)))
        #expect(m.isMember("bob"))
    }

    @Test func atTheSameReadingALeaveWins() {
        let a = ChannelMembership([.joined("carol", at: at(7, n1)), .left("carol", at: at(7, n1))])
        let b = ChannelMembership([.left("carol", at: at(7, n1)), .joined("carol", at: at(7, n1))])
        #expect(a == b)
        #expect(!a.isMember("carol"))
    }

    @Test func deletionAbsorbsEveryJoinEarlierOrLater() {
        var m = ChannelMembership([.joined("alice", at: at(1, n1)), .deleted(at: at(5, n2))])
        #expect(m.members.isEmpty)
        m.apply(.joined("bob", at: at(9, n1)))
        #expect(m.members.isEmpty)
        #expect(m.admission(of: "bob", limit: 10) == .deleted)
        // The earliest deletion is the one kept, whatever the order.
        m.apply(.deleted(at: at(3, n1)))
        #expect(m.deletedAt == at(3, n1))
        m.apply(.deleted(at: at(4, n1)))
        #expect(m.deletedAt == at(3, n1))
    }

    @Test func admissionChecksTheLimitAndKnowsMembers() {
        let m = ChannelMembership([.joined("a", at: at(1, n1)), .joined("b", at: at(2, n1))])
        #expect(m.admission(of: "c", limit: 3) == .admitted)
        #expect(m.admission(of: "c", limit: 2) == .full)
        #expect(m.admission(of: "a", limit: 2) == .alreadyMember)
    }

    @Test func concurrentJoinsOnTwoNodesMayPassTheLimitAndThenNoneIsAdmitted() {
        // Each node admitted one join under a limit of 2 (each held one member).
        let left = ChannelMembership([.joined("a", at: at(1, n1)), .joined("b", at: at(2, n1))])
        let right = ChannelMembership([.joined("a", at: at(1, n1)), .joined("c", at: at(2, n2))])
        let merged = left.merged(with: right)
        #expect(merged == right.merged(with: left))
        #expect(merged.memberCount == 3)
        #expect(merged.admission(of: "d", limit: 2) == .full)
    }
}
