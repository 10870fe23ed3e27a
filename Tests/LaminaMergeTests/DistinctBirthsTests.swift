import LaminaMerge
import LaminaModel
import Testing

/// The concurrency rule for distinct conversations of one participant set (SPEC §6.5): two
/// creations merge when neither's origin had seen the other, classes are closed under that,
/// and a node applying arrivals one by one in any causal order ends with the classes every
/// node derives from the whole set.
@Suite struct DistinctBirthsTests {
    let set: Set<UserID> = ["u1", "u2"]

    func birth(_ n: UInt8, at physical: UInt64, origin: UInt64, counter: UInt64, seen: [UInt64: UInt64] = [:])
        -> DistinctBirth
    {
        DistinctBirth(
            candidate: DistinctCandidate(
                id: ConversationID(uuid: Gen.uuid(n)), participants: set,
                createdAt: HLCTimestamp(physical: physical, logical: 0, node: NodeID(origin))),
            origin: NodeID(origin), counter: counter,
            seen: VersionVector(Dictionary(uniqueKeysWithValues: seen.map { (NodeID($0.key), $0.value) })))
    }

    @Test func concurrentCreationsMergeIntoTheEarliest() {
        let s = birth(1, at: 10, origin: 1, counter: 1)
        let y = birth(2, at: 5, origin: 2, counter: 1)
        #expect(s.isConcurrent(with: y) && y.isConcurrent(with: s))
        #expect(DistinctResolution.classes(of: [s, y]) == [s.id: y.id, y.id: y.id])
        let join = DistinctResolution.join(s, group: [y], survivorOf: { $0 })
        #expect(join == DistinctJoin(survivor: y.id, retired: [s.id]))
    }

    @Test func aCreationThatSawTheOtherStandsAlone() {
        // X's origin (node 2) held node 1's operations up to 3, S's creation (1#2) among them.
        let s = birth(1, at: 10, origin: 1, counter: 2)
        let x = birth(2, at: 20, origin: 2, counter: 1, seen: [1: 3])
        #expect(x.saw(s) && !s.saw(x) && !x.isConcurrent(with: s))
        #expect(DistinctResolution.classes(of: [s, x]) == [s.id: s.id, x.id: x.id])
        #expect(DistinctResolution.join(x, group: [s], survivorOf: { $0 }).retired.isEmpty)
        // Unless the other is the live distinct conversation of the set (a held class that is
        // still distinct cannot have been seen: the creation would have resolved to it).
        #expect(
            DistinctResolution.join(x, group: [s], survivorOf: { $0 }, alsoJoin: s.id)
                == DistinctJoin(survivor: s.id, retired: [x.id]))
    }

    @Test func aCreationConcurrentWithTwoClassesJoinsThemIntoOne() {
        let s = birth(1, at: 10, origin: 1, counter: 1)
        let x = birth(2, at: 20, origin: 2, counter: 1, seen: [1: 1])
        let y = birth(3, at: 30, origin: 3, counter: 1)
        #expect(DistinctResolution.classes(of: [s, x, y]) == [s.id: s.id, x.id: s.id, y.id: s.id])
        let join = DistinctResolution.join(y, group: [s, x], survivorOf: { $0 })
        #expect(join.survivor == s.id && Set(join.retired) == [x.id, y.id])
    }

    @Test func unknownBirthsCountAsSeen() {
        let legacy = birth(1, at: 10, origin: 1, counter: 0)
        let y = birth(2, at: 5, origin: 2, counter: 1)
        #expect(y.saw(legacy) && !y.isConcurrent(with: legacy))
    }

    /// Random histories on four nodes: each creates distinct conversations of one participant
    /// set with what it holds, and nodes copy each other's log prefixes at random. Delivered to a
    /// fresh node in random causal orders, one at a time through `join`, the classes are always
    /// `classes(of:)` of the whole set. Replay with LAMINA_MERGE_SEED.
    @Test(arguments: 0..<40)
    func joiningInAnyCausalOrderGivesTheSameClasses(index: Int) {
        var r = SplitMix64(seed: SplitMix64.seed("distinct-births", case: index))
        let nodeCount = 4
        var logs: [[DistinctBirth]] = Array(repeating: [], count: nodeCount)  // births per origin
        // held[n][origin]
        var held: [[Int]] = Array(repeating: Array(repeating: 0, count: nodeCount), count: nodeCount)
        var all: [DistinctBirth] = []
        var physical: UInt64 = 1
        for step in 0..<Int.random(in: 3...14, using: &r) {
            let n = Int.random(in: 0..<nodeCount, using: &r)
            if r.chance(0.5) {
                var seen: [NodeID: UInt64] = [:]
                for o in 0..<nodeCount where held[n][o] > 0 { seen[NodeID(UInt64(o + 1))] = UInt64(held[n][o]) }
                physical += UInt64.random(in: 0...2, using: &r)
                let b = DistinctBirth(
                    candidate: DistinctCandidate(
                        id: ConversationID(uuid: Gen.uuid(UInt8(step + 1))), participants: set,
                        createdAt: HLCTimestamp(physical: physical, logical: 0, node: NodeID(UInt64(n + 1)))),
                    origin: NodeID(UInt64(n + 1)), counter: UInt64(logs[n].count + 1), seen: VersionVector(seen))
                logs[n].append(b)
                held[n][n] = logs[n].count
                all.append(b)
            } else {
                let from = Int.random(in: 0..<nodeCount, using: &r)
                for o in 0..<nodeCount { held[n][o] = max(held[n][o], held[from][o]) }
            }
        }
        let expected = DistinctResolution.classes(of: all)
        for _ in 0..<6 {
            // A random causal order: a birth comes after every birth it saw (and its origin's earlier ones).
            var pending = all
            var order: [DistinctBirth] = []
            while !pending.isEmpty {
                let ready = pending.indices.filter { i in
                    pending.allSatisfy { other in
                        other.id == pending[i].id
                            || !pending[i].saw(other)
                                && !(other.origin == pending[i].origin && other.counter < pending[i].counter)
                    }
                }
                order.append(pending.remove(at: ready.randomElement(using: &r)!))
            }
            var survivorOf: [ConversationID: ConversationID] = [:]
            var group: [DistinctBirth] = []
            for b in order {
                let join = DistinctResolution.join(b, group: group, survivorOf: { survivorOf[$0] ?? $0 })
                let moved = Set(join.retired)
                for (id, s) in survivorOf where moved.contains(s) { survivorOf[id] = join.survivor }
                survivorOf[b.id] = join.survivor
                group.append(b)
            }
            #expect(survivorOf == expected, "seed case \(index): \(order.map(\.id))")
        }
    }
}
