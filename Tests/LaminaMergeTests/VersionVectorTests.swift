import LaminaMerge
import LaminaModel
import Testing

@Suite struct VersionVectorTests {
    let a = NodeID(1), b = NodeID(2), c = NodeID(3)

    @Test func comparison() {
        let v = VersionVector([a: 2, b: 1])
        #expect(v.compare(VersionVector([a: 2, b: 1, c: 0])) == .equal)
        #expect(v.compare(VersionVector([a: 3, b: 1])) == .before)
        #expect(v.compare(VersionVector([a: 2])) == .after)
        #expect(v.compare(VersionVector([a: 1, b: 2])) == .concurrent)
        #expect(VersionVector().compare(v) == .before)
    }

    @Test func missingRangesAreWhatTheOtherSideLacks() {
        let mine = VersionVector([a: 5, b: 2, c: 7])
        let theirs = VersionVector([a: 3, b: 4])
        #expect(
            mine.missing(from: theirs) == [
                MissingRange(origin: a, counters: 4...5), MissingRange(origin: c, counters: 1...7),
            ])
        #expect(theirs.missing(from: mine) == [MissingRange(origin: b, counters: 3...4)])
        #expect(mine.missing(from: mine).isEmpty)
    }

    @Test func observeDetectsDuplicatesAndGaps() throws {
        var v = VersionVector()
        #expect(v.observe(OperationID(origin: a, counter: 1)) == .next)
        #expect(v.observe(OperationID(origin: a, counter: 1)) == .duplicate)
        #expect(
            v.observe(OperationID(origin: a, counter: 4)) == .gap(missing: MissingRange(origin: a, counters: 2...3)))
        #expect(v[a] == 1)
        #expect(try v.increment(a) == OperationID(origin: a, counter: 2))
        var full = VersionVector([a: .max])
        #expect(#expect(throws: MergeError.self) { try full.increment(a) }?.code == .counterOverflow)
    }

    /// Two replicas with random contiguous logs: streaming what the other lacks, in the
    /// order given, is accepted without gaps and leaves both with the merged vector.
    @Test func streamingTheMissingOperationsBringsPeersTogether() {
        for i in 0..<1_000 {
            let seed = SplitMix64.seed("vv-sync", case: i)
            var r = SplitMix64(seed: seed)
            var logs: [[OperationID: String]] = [[:], [:]]
            var vectors = [VersionVector(), VersionVector()]
            for origin in Gen.nodes {
                let total = UInt64.random(in: 0...12, using: &r)
                for counter in stride(from: UInt64(1), through: total, by: 1) {
                    for side in 0..<2
                    where counter <= [UInt64.random(in: 0...total, using: &r), total][Int.random(in: 0...1, using: &r)]
                    {
                        if vectors[side][origin] == counter - 1 {
                            logs[side][OperationID(origin: origin, counter: counter)] = "\(origin)#\(counter)"
                            vectors[side].apply(OperationID(origin: origin, counter: counter))
                        }
                    }
                }
            }
            let target = vectors[0].merged(with: vectors[1])
            for (from, to) in [(0, 1), (1, 0)] {
                var receiver = vectors[to]
                for (id, value) in vectors[from].missing(from: vectors[to], in: logs[from]) {
                    #expect(receiver.observe(id) == .next && value == "\(id.origin)#\(id.counter)", "seed \(seed)")
                }
                #expect(receiver == target, "seed \(seed)")
            }
        }
    }
}
