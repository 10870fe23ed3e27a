import LaminaMerge

/// The lattice laws and the convergence property, written once for any `Mergeable`
/// or `ReplicatedState`. Each returns the failures it found, each naming its seed.
enum Laws {
    /// Commutative, associative, idempotent, for states made by `make`.
    static func mergeLaws<T: Mergeable>(
        _ name: String, cases: Int, make: (inout SplitMix64) -> T
    ) -> [String] {
        var failures: [String] = []
        for i in 0..<cases {
            let seed = SplitMix64.seed(name, case: i)
            var r = SplitMix64(seed: seed)
            let a = make(&r)
            let b = make(&r)
            let c = make(&r)
            if a.merged(with: b) != b.merged(with: a) { failures.append("\(name): not commutative, seed \(seed)") }
            if a.merged(with: b).merged(with: c) != a.merged(with: b.merged(with: c)) {
                failures.append("\(name): not associative, seed \(seed)")
            }
            if a.merged(with: a) != a { failures.append("\(name): not idempotent, seed \(seed)") }
            if a.merged(with: b).merged(with: b) != a.merged(with: b) {
                failures.append("\(name): re-merge changed state, seed \(seed)")
            }
            if failures.count > 5 { break }
        }
        return failures
    }

    /// N replicas receive the same operations in random orders, with duplicates, and
    /// gossip whole states at random moments; all must end equal to each other and to
    /// the state built from the operations in their original order. Also: applying an
    /// operation equals merging the state holding only that operation.
    static func convergence<T: ReplicatedState>(
        _ name: String, _: T.Type, cases: Int, replicas: Int = 4, ops make: (inout SplitMix64) -> [T.Operation]
    ) -> [String] {
        var failures: [String] = []
        for i in 0..<cases {
            let seed = SplitMix64.seed(name + "/converge", case: i)
            var r = SplitMix64(seed: seed)
            let ops = make(&r)
            let reference = T(ops)
            var states = Array(repeating: T(), count: replicas)
            for k in 0..<replicas {
                var feed = ops + ops.filter { _ in r.chance(0.3) }
                feed.shuffle(using: &r)
                for op in feed {
                    if r.chance(0.5) { states[k].apply(op) } else { states[k].merge(T([op])) }
                    if r.chance(0.05) { states[k].merge(states[Int.random(in: 0..<replicas, using: &r)]) }
                }
            }
            for k in 0..<replicas where states[k] != reference {
                failures.append("\(name): replica \(k) diverged from the reference, seed \(seed)")
            }
            if failures.count > 5 { break }
        }
        return failures
    }
}

/// One replicated type under test, type-erased so one parameterized test covers all.
struct LawSubject: Sendable, CustomStringConvertible {
    let description: String
    let laws: @Sendable (Int) -> [String]
    let convergence: @Sendable (Int) -> [String]

    init<T: ReplicatedState>(_ name: String, _: T.Type, ops: @escaping @Sendable (inout SplitMix64) -> [T.Operation]) {
        description = name
        laws = { cases in Laws.mergeLaws(name, cases: cases) { r in T(ops(&r)) } }
        convergence = { cases in Laws.convergence(name, T.self, cases: cases, ops: ops) }
    }

    init<T: Mergeable>(_ name: String, state make: @escaping @Sendable (inout SplitMix64) -> T) {
        description = name
        laws = { cases in Laws.mergeLaws(name, cases: cases, make: make) }
        convergence = { _ in [] }
    }
}
