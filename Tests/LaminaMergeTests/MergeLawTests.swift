import LaminaMerge
import LaminaModel
import Testing

/// Every replicated type, checked against the same laws.
let lawSubjects: [LawSubject] = [
    LawSubject("membership", MembershipLog.self, ops: Gen.membershipOps),
    LawSubject("recipient statuses", RecipientStatusLattice.self, ops: Gen.statusOps),
    LawSubject("metadata", MetadataLWW.self, ops: Gen.metadataOps),
    LawSubject("version vectors", VersionVector.self, ops: Gen.versionOps),
    LawSubject("unread counts", UnreadCounts.self, ops: Gen.unreadOps),
    LawSubject("distinct resolution", DistinctRegistry.self, ops: Gen.distinctOps),
    LawSubject("HLC max-register", state: Gen.hlc),
    LawSubject("presence", PresenceBoard.self, ops: Gen.presenceOps),
    LawSubject("channel membership", ChannelMembership.self, ops: Gen.channelOps),
    LawSubject("reactions", ReactionSet.self, ops: Gen.reactionOps),
    LawSubject("notification levels", NotificationSetting.self, ops: Gen.notificationOps),
    LawSubject("thread summaries", ThreadSummary.self, ops: Gen.threadOps),
    LawSubject("message parts", MessagePartsMap.self, ops: Gen.partsOps),
]

@Suite struct MergeLawTests {
    static let lawCases = 2_000
    static let convergenceCases = 500

    @Test("merge is commutative, associative and idempotent", arguments: lawSubjects)
    func lattice(_ subject: LawSubject) {
        let failures = subject.laws(Self.lawCases)
        #expect(
            failures.isEmpty,
            "\(failures.joined(separator: "\n")) (replay with LAMINA_MERGE_SEED=\(SplitMix64.baseSeed))")
    }

    @Test("replicas fed the same operations in any order, with duplicates, converge", arguments: lawSubjects)
    func converge(_ subject: LawSubject) {
        let failures = subject.convergence(Self.convergenceCases)
        #expect(
            failures.isEmpty,
            "\(failures.joined(separator: "\n")) (replay with LAMINA_MERGE_SEED=\(SplitMix64.baseSeed))")
    }
}
