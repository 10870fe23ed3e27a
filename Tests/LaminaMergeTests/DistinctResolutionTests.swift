import LaminaMerge
import LaminaModel
import Testing

@Suite struct DistinctResolutionTests {
    let u1: UserID = "u1", u2: UserID = "u2"

    func conversation(_ id: ConversationID, metadata: Metadata = [:], distinct: Bool = true) -> Conversation {
        Conversation(
            id: id, participants: ["u1", "u2"], isDistinct: distinct, metadata: metadata,
            deliveryReceiptsEnabled: true, createdAt: Timestamp(millisecondsSince1970: 1), creator: "u1")
    }

    @Test func creatingAnExistingDistinctConversationResolvesToIt() {
        let existing = conversation(Gen.conversations[0], metadata: ["title": .string("lunch")])
        let sameMeta = conversation(Gen.conversations[1], metadata: ["title": .string("lunch")])
        let noMeta = conversation(Gen.conversations[1])
        let otherMeta = conversation(Gen.conversations[1], metadata: ["title": .string("dinner")])
        #expect(DistinctResolution.resolveCreate(sameMeta, existing: existing) == .matches(existing))
        #expect(DistinctResolution.resolveCreate(noMeta, existing: existing).httpStatus == 200)
        #expect(DistinctResolution.resolveCreate(otherMeta, existing: existing) == .conflicts(existing: existing))
        #expect(DistinctResolution.resolveCreate(otherMeta, existing: existing).httpStatus == 409)
        #expect(DistinctResolution.resolveCreate(noMeta, existing: nil) == .created)
        #expect(
            DistinctResolution.resolveCreate(conversation(Gen.conversations[1], distinct: false), existing: existing)
                .httpStatus == 201)
    }

    /// Two users concurrently create distinct conversations with the same participants on
    /// two nodes and send messages to them. Both replicas, receiving everything in
    /// different orders, pick the same survivor; the other's messages move to it and its
    /// id maps to the survivor's.
    @Test func concurrentDistinctConversationsMergeIntoTheSameSurvivorEverywhere() throws {
        var clock1 = HybridLogicalClock(node: NodeID(1))
        var clock2 = HybridLogicalClock(node: NodeID(2))
        let x = DistinctCandidate(
            id: Gen.conversations[2], participants: [u1, u2], createdAt: try clock1.now(physical: 1_000))
        let y = DistinctCandidate(
            id: Gen.conversations[0], participants: [u1, u2], createdAt: try clock2.now(physical: 1_000))
        let mx = Message(conversationID: x.id, sender: u1, parts: [], position: try clock1.now(physical: 1_001))
        let my = Message(conversationID: y.id, sender: u2, parts: [], position: try clock2.now(physical: 1_001))

        let replica1 = DistinctRegistry([.created(x), .created(y)])
        let replica2 = DistinctRegistry([.created(y), .created(x), .created(y)])
        #expect(replica1 == replica2)
        // Same physical time and counter: node 1's reading is earlier, so x survives.
        #expect(DistinctResolution.survivor(of: [x, y]) == x)
        #expect(DistinctResolution.survivor(of: [y, x]) == x)
        #expect(replica1.redirects == [y.id: x.id])
        #expect(replica2.target(of: y.id) == x.id && replica2.target(of: x.id) == x.id)
        #expect(replica1.existing(for: [u1, u2]) == x.id)

        let change = DistinctResolution.identifierChange(of: conversation(y.id), to: x.id)
        #expect(change.type == .update && change.property == ConversationProperty.identifier)
        #expect(change.before == .conversationID(y.id) && change.after == .conversationID(x.id))

        let moved1 = [mx, my].map(replica1.relocated)
        let moved2 = [my, mx].map(replica2.relocated)
        #expect(moved1.allSatisfy { $0.conversationID == x.id })
        #expect(Set(moved1) == Set(moved2))

        // Both replicas derive the same unread state for the survivor from the moved
        // messages, whose stamps keep the conversation they were sent to.
        let stamps = [mx, my].map(MessageStamp.init)
        var counts1 = UnreadCounts(conversation: x.id)
        var counts2 = UnreadCounts(conversation: x.id)
        let genesis = MembershipGenesis(participants: [u1, u2], creator: u1, isDistinct: true, at: x.createdAt)
        counts1.apply(.membership(.genesis(genesis)))
        counts2.apply(.membership(.genesis(genesis)))
        stamps.forEach { counts1.apply(.created($0)) }
        stamps.reversed().forEach { counts2.apply(.created($0)) }
        #expect(counts1 == counts2)
        #expect(counts1.unreadCount(for: u1) == 1 && counts1.unreadCount(for: u2) == 1)
        // u1 had read y before the merge; u2 then marks the survivor read: both count 0.
        counts1.apply(.receipt(.readUpTo(ConversationUserKey(conversation: y.id, user: u1), my.position!)))
        #expect(counts1.unreadCount(for: u1) == 0 && counts1.unreadCount(for: u2) == 1)
        counts1.apply(.receipt(.readUpTo(ConversationUserKey(conversation: x.id, user: u2), mx.position!)))
        #expect(counts1.unreadCount(for: u2) == 0)
    }

    @Test func aDistinctConversationCreatedAfterTheOldOneChangedStandsAlone() {
        let t = { (p: UInt64) in HLCTimestamp(physical: p, logical: 0, node: NodeID(1)) }
        let old = DistinctCandidate(id: Gen.conversations[3], participants: [u1, u2], createdAt: t(10))
        let concurrent = DistinctCandidate(id: Gen.conversations[1], participants: [u1, u2], createdAt: t(15))
        let later = DistinctCandidate(id: Gen.conversations[0], participants: [u1, u2], createdAt: t(30))
        let registry = DistinctRegistry([
            .created(later), .becameNonDistinct(old.id, at: t(20)), .created(concurrent), .created(old),
        ])
        #expect(registry.redirects == [concurrent.id: old.id])
        #expect(registry.existing(for: [u1, u2]) == later.id)
    }

    @Test func theSurvivorIsTheSameForAnyOrderOfCandidates() {
        for i in 0..<1_000 {
            let seed = SplitMix64.seed("distinct-survivor", case: i)
            var r = SplitMix64(seed: seed)
            let candidates = (0..<Gen.count(&r, 1...6)).map { _ in
                DistinctCandidate(
                    id: ConversationID(uuid: Gen.uuid(UInt8.random(in: 1...255, using: &r))), participants: [u1, u2],
                    createdAt: Gen.hlc(&r))
            }
            let first = DistinctResolution.survivor(of: candidates)
            #expect(DistinctResolution.survivor(of: candidates.shuffled(using: &r)) == first, "seed \(seed)")
            #expect(candidates.allSatisfy { !DistinctCandidate.ranksBefore($0, first!) }, "seed \(seed)")
        }
    }
}
