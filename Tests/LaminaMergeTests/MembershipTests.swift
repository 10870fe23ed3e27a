import LaminaMerge
import LaminaModel
import Testing

@Suite struct MembershipTests {
    static func t(_ p: UInt64, node: UInt64 = 1) -> HLCTimestamp {
        HLCTimestamp(physical: p, logical: 0, node: NodeID(node))
    }

    /// Reference semantics: replay the genesis and the operations one at a time in the
    /// order they take effect.
    static func replay(_ log: MembershipLog, upTo time: HLCTimestamp?) -> Set<UserID> {
        var events: [MembershipOperation] = log.operations.map { $0 }
        if let g = log.genesis {
            events += g.participants.map { MembershipOperation(.add, user: $0, actor: g.creator, at: g.timestamp) }
        }
        events.sort { a, b in
            if a.timestamp != b.timestamp { return a.timestamp < b.timestamp }
            if a.kind != b.kind { return a.kind == .remove }
            if a.user != b.user { return a.user < b.user }
            return a.actor < b.actor
        }
        var set: Set<UserID> = []
        for e in events where time.map({ e.timestamp <= $0 }) ?? true {
            if e.kind == .add { set.insert(e.user) } else { set.remove(e.user) }
        }
        return set
    }

    /// Reference visibility: a participant now sees everything; otherwise the user sees what
    /// is positioned before the moment (in a sequential replay) they last stopped taking part.
    static func sees(_ log: MembershipLog, _ user: UserID, at position: HLCTimestamp) -> Bool {
        if replay(log, upTo: nil).contains(user) { return true }
        var times = log.operations.filter { $0.user == user }.map(\.timestamp)
        if let g = log.genesis, g.participants.contains(user) { times.append(g.timestamp) }
        var lastLeft: HLCTimestamp?
        var wasMember = false
        for t in Set(times).sorted() {
            let isMember = replay(log, upTo: t).contains(user)
            if wasMember, !isMember { lastLeft = t }
            wasMember = isMember
        }
        return lastLeft.map { position < $0 } ?? false
    }

    @Test func participationMatchesASequentialReplay() {
        for i in 0..<2_000 {
            let seed = SplitMix64.seed("membership-oracle", case: i)
            var r = SplitMix64(seed: seed)
            let log = MembershipLog(Gen.membershipOps(&r))
            let time: HLCTimestamp? = r.chance(0.2) ? nil : Gen.hlc(&r)
            #expect(log.participants(at: time) == Self.replay(log, upTo: time), "seed \(seed)")
            let user = Gen.user(&r)
            if let time { #expect(log.canSee(user, messageAt: time) == Self.sees(log, user, at: time), "seed \(seed)") }
        }
    }

    /// The reference docs: removed participants keep access to what came before and lose
    /// access to future content; re-adding restores access.
    @Test func aRemovedParticipantKeepsOldMessagesAndGetsNoNewOnesUntilReAdded() throws {
        var log = MembershipLog(
            genesis: MembershipGenesis(
                participants: ["u1", "u2", "u3"], creator: "u1", isDistinct: false, at: Self.t(1)))
        let m1 = Self.t(10)
        let m2 = Self.t(30)
        let m3 = Self.t(50)
        for op in try log.removeOperations(["u3"], by: "u1", at: Self.t(20)) { log.apply(.change(op)) }
        #expect(log.canSee("u3", messageAt: m1))
        #expect(!log.canSee("u3", messageAt: m2))
        #expect(!log.canSee("u3", messageAt: m3))
        #expect(log.canSee("u2", messageAt: m2))
        for op in try log.addOperations(["u3"], by: "u2", at: Self.t(40), limit: 25) { log.apply(.change(op)) }
        #expect(log.canSee("u3", messageAt: m1) && log.canSee("u3", messageAt: m2) && log.canSee("u3", messageAt: m3))
        #expect(!log.canSee("u9", messageAt: m1))
    }

    /// A participant added after some messages and removed later keeps everything positioned
    /// before the removal, the messages from before they joined included; a second removal
    /// (a no-op) does not widen it.
    @Test func aRemovedLateJoinerKeepsWhatCameBeforeTheRemoval() throws {
        var log = MembershipLog(
            genesis: MembershipGenesis(participants: ["u1", "u2"], creator: "u1", isDistinct: false, at: Self.t(1)))
        for op in try log.addOperations(["u3"], by: "u1", at: Self.t(10), limit: 25) { log.apply(.change(op)) }
        for op in try log.removeOperations(["u3"], by: "u1", at: Self.t(20)) { log.apply(.change(op)) }
        log.apply(.change(MembershipOperation(.remove, user: "u3", actor: "u2", at: Self.t(30))))
        #expect(log.canSee("u3", messageAt: Self.t(5)))
        #expect(log.canSee("u3", messageAt: Self.t(15)))
        #expect(!log.canSee("u3", messageAt: Self.t(25)))
        #expect(log.standing(of: "u3") == MembershipStanding(isMember: false, since: Self.t(20), latest: Self.t(30)))
        // The slice rule on a store's row agrees, the redundant removal changing nothing.
        var row: MembershipStanding?
        for op in [
            MembershipOperation(.add, user: "u3", actor: "u1", at: Self.t(10)),
            MembershipOperation(.remove, user: "u3", actor: "u1", at: Self.t(20)),
            MembershipOperation(.remove, user: "u3", actor: "u2", at: Self.t(30)),
        ] {
            if let next = MembershipStanding.applying(op, to: row) { row = next }
        }
        #expect(row?.isMember == false && row?.since == Self.t(20))
    }

    @Test func aNewParticipantSeesEarlierMessages() throws {
        var log = MembershipLog(
            genesis: MembershipGenesis(participants: ["u1", "u2"], creator: "u1", isDistinct: false, at: Self.t(1)))
        for op in try log.addOperations(["u4"], by: "u2", at: Self.t(100), limit: 25) { log.apply(.change(op)) }
        #expect(log.canSee("u4", messageAt: Self.t(5)))
        #expect(log.canSee("u4", messageAt: Self.t(200)))
        #expect(!log.isParticipant("u4", at: Self.t(5)))
    }

    /// The reference docs' example: Conversation A is distinct with users 1 and 2,
    /// Conversation B is distinct with 1, 2 and 3. Adding user 3 to A makes A non-distinct
    /// with 1, 2 and 3, while B stays distinct.
    @Test func addingAParticipantMakesADistinctConversationNonDistinct() throws {
        let a = ConversationID(uuid: Gen.uuid(0xA))
        let b = ConversationID(uuid: Gen.uuid(0xB))
        var logA = MembershipLog(
            genesis: MembershipGenesis(participants: ["1", "2"], creator: "1", isDistinct: true, at: Self.t(1)))
        let logB = MembershipLog(
            genesis: MembershipGenesis(
                participants: ["1", "2", "3"], creator: "1", isDistinct: true, at: Self.t(2, node: 2)))
        var registry = DistinctRegistry([
            .created(DistinctCandidate(id: a, participants: ["1", "2"], createdAt: Self.t(1))),
            .created(DistinctCandidate(id: b, participants: ["1", "2", "3"], createdAt: Self.t(2, node: 2))),
        ])
        #expect(logA.isDistinct && logB.isDistinct)

        let ops = try logA.addOperations(["3"], by: "2", at: Self.t(10), limit: 25)
        for op in ops { logA.apply(.change(op)) }
        if let since = logA.nonDistinctSince { registry.apply(.becameNonDistinct(a, at: since)) }

        #expect(!logA.isDistinct)
        #expect(logA.participants == ["1", "2", "3"])
        #expect(logB.isDistinct)
        #expect(logB.participants == ["1", "2", "3"])
        #expect(registry.redirects.isEmpty)
        #expect(registry.existing(for: ["1", "2", "3"]) == b)
        #expect(registry.existing(for: ["1", "2"]) == nil)
    }

    @Test func addingAnExistingParticipantIsNoChangeAndKeepsItDistinct() throws {
        let log = MembershipLog(
            genesis: MembershipGenesis(participants: ["1", "2"], creator: "1", isDistinct: true, at: Self.t(1)))
        #expect(try log.addOperations(["2"], by: "1", at: Self.t(5), limit: 25).isEmpty)
        #expect(try log.removeOperations(["7"], by: "1", at: Self.t(5)).isEmpty)
        #expect(log.isDistinct)
    }

    @Test func commandsAreCheckedBeforeOperationsAreMade() {
        let log = MembershipLog(
            genesis: MembershipGenesis(participants: ["1", "2"], creator: "1", isDistinct: true, at: Self.t(1)))
        #expect(
            #expect(throws: MergeError.self) { try log.addOperations(["3"], by: "9", at: Self.t(5), limit: 25) }?.code
                == .notAParticipant)
        #expect(
            #expect(throws: MergeError.self) { try log.addOperations(["3", "4"], by: "1", at: Self.t(5), limit: 3) }?
                .code == .tooManyParticipants)
        #expect(
            #expect(throws: MergeError.self) { try log.removeOperations(["1", "2"], by: "1", at: Self.t(5)) }?.code
                == .noParticipants)
        #expect(
            #expect(throws: MergeError.self) { try log.removeOperations(["2"], by: "5", at: Self.t(5)) }?.code
                == .notAParticipant)
    }

    @Test func concurrentAddAndRemoveResolveByTimestampWhateverTheOrder() {
        let genesis = MembershipLog.Operation.genesis(
            MembershipGenesis(participants: ["1", "2"], creator: "1", isDistinct: false, at: Self.t(1)))
        let add = MembershipLog.Operation.change(
            MembershipOperation(.add, user: "3", actor: "1", at: Self.t(10, node: 1)))
        let remove = MembershipLog.Operation.change(
            MembershipOperation(.remove, user: "3", actor: "2", at: Self.t(10, node: 2)))
        let x = MembershipLog([genesis, add, remove])
        let y = MembershipLog([remove, add, genesis])
        #expect(x == y)
        #expect(!x.isParticipant("3"))  // node 2's reading is later
        #expect(x.canSee("3", messageAt: HLCTimestamp(physical: 10, logical: 0, node: NodeID(1))))
        #expect(!x.canSee("3", messageAt: Self.t(11)))
    }
}
