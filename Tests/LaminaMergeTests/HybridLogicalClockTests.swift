import LaminaMerge
import LaminaModel
import Testing

@Suite struct HybridLogicalClockTests {
    let n1 = NodeID(1), n2 = NodeID(2)

    @Test func readingsFollowPhysicalTimeWhenItAdvances() throws {
        var clock = HybridLogicalClock(node: n1)
        #expect(try clock.now(physical: 100) == HLCTimestamp(physical: 100, logical: 0, node: n1))
        #expect(try clock.now(physical: 100) == HLCTimestamp(physical: 100, logical: 1, node: n1))
        #expect(try clock.now(physical: 105) == HLCTimestamp(physical: 105, logical: 0, node: n1))
    }

    @Test func aPhysicalClockGoingBackwardsStillGivesIncreasingReadings() throws {
        var clock = HybridLogicalClock(node: n1)
        let a = try clock.now(physical: 1_000)
        let b = try clock.now(physical: 400)
        let c = try clock.now(physical: 999)
        #expect(a < b && b < c)
        #expect(b == HLCTimestamp(physical: 1_000, logical: 1, node: n1))
    }

    @Test func receivingALaterRemoteReadingMovesTheClockPastIt() throws {
        var clock = HybridLogicalClock(node: n1)
        _ = try clock.now(physical: 100)
        let remote = HLCTimestamp(physical: 5_000, logical: 7, node: n2)
        let r = try clock.receive(remote, physical: 120)
        #expect(r == HLCTimestamp(physical: 5_000, logical: 8, node: n1))
        #expect(try clock.now(physical: 130) > r)
    }

    @Test func counterOverflowCarriesIntoThePhysicalPart() throws {
        var clock = HybridLogicalClock(node: n1, last: HLCTimestamp(physical: 100, logical: .max, node: n1))
        #expect(try clock.now(physical: 100) == HLCTimestamp(physical: 101, logical: 0, node: n1))
        var other = HybridLogicalClock(node: n1)
        #expect(
            try other.receive(HLCTimestamp(physical: 100, logical: .max, node: n2), physical: 50)
                == HLCTimestamp(physical: 101, logical: 0, node: n1))
    }

    @Test func aCarryPastTheRangeThrowsAndLeavesTheClockAlone() {
        let top = HLCTimestamp(physical: HybridLogicalClock.maxPhysical, logical: .max, node: n1)
        var clock = HybridLogicalClock(node: n1, last: top)
        #expect(throws: MergeError.self) { try clock.now(physical: 0) }
        #expect(clock.last == top)
        var fresh = HybridLogicalClock(node: n1)
        let error = #expect(throws: MergeError.self) { try fresh.now(physical: HybridLogicalClock.maxPhysical + 1) }
        #expect(error?.code == .clockOutOfRange)
    }

    @Test func remoteReadingsTooFarAheadAreRefused() throws {
        var clock = HybridLogicalClock(node: n1, maxDriftMilliseconds: 1_000)
        let before = try clock.now(physical: 10_000)
        let error = #expect(throws: MergeError.self) {
            try clock.receive(HLCTimestamp(physical: 11_001, logical: 0, node: n2), physical: 10_000)
        }
        #expect(error?.code == .clockDrift)
        #expect(clock.last == before)
        #expect(
            try clock.receive(HLCTimestamp(physical: 11_000, logical: 0, node: n2), physical: 10_000).physical == 11_000
        )
    }

    /// Three nodes with skewed clocks that sometimes jump backwards exchange messages in
    /// random order. Every node's readings strictly increase, a receipt is later than what
    /// it received (so happened-before implies <), readings are unique, never ahead of the
    /// largest physical time seen, and every replica that sorts them gets the same order.
    @Test func randomizedSkewKeepsOrderCausalAndUnique() throws {
        for i in 0..<500 {
            let seed = SplitMix64.seed("hlc-sim", case: i)
            var r = SplitMix64(seed: seed)
            var clocks = Gen.nodes.map { HybridLogicalClock(node: $0, maxDriftMilliseconds: 10_000) }
            var offsets = Gen.nodes.map { _ in Int64.random(in: -500...500, using: &r) }
            var inFlight: [(to: Int, stamp: HLCTimestamp)] = []
            var all: [HLCTimestamp] = []
            var maxPhysicalSeen: UInt64 = 0
            var realTime: Int64 = 10_000
            var failure: String?
            for _ in 0..<60 {
                realTime += Int64.random(in: 0...3, using: &r)
                let k = Int.random(in: 0..<clocks.count, using: &r)
                if r.chance(0.1) { offsets[k] -= Int64.random(in: 0...200, using: &r) }  // the clock jumps back
                let physical = UInt64(realTime + offsets[k])
                maxPhysicalSeen = max(maxPhysicalSeen, physical)
                let previous = clocks[k].last
                let reading: HLCTimestamp
                if let index = inFlight.indices.filter({ inFlight[$0].to == k }).randomElement(using: &r), r.chance(0.5)
                {
                    let message = inFlight.remove(at: index)
                    reading = try clocks[k].receive(message.stamp, physical: physical)
                    if !(reading > message.stamp) { failure = "receipt not after send" }
                } else {
                    reading = try clocks[k].now(physical: physical)
                    if r.chance(0.6) { inFlight.append((Int.random(in: 0..<clocks.count, using: &r), reading)) }
                }
                if !(reading > previous) { failure = "not monotonic" }
                if reading.physical > maxPhysicalSeen { failure = "ahead of every physical clock" }
                all.append(reading)
            }
            if Set(all).count != all.count { failure = "duplicate readings" }
            let order = all.sorted()
            for _ in 0..<3 where all.shuffled(using: &r).sorted() != order { failure = "order depends on arrival" }
            #expect(failure == nil, "\(failure ?? ""), seed \(seed)")
            if failure != nil { break }
        }
    }
}
