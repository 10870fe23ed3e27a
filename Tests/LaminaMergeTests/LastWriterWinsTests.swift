import LaminaMerge
import LaminaModel
import Testing

/// The register rule of the replicated state about users: whatever the order of arrival,
/// with replays, every replica keeps the write with the latest reading.
@Suite struct LastWriterWinsTests {
    /// Applies writes in order to one register; returns the value it ends with.
    static func replay(_ writes: [(HLCTimestamp, Int)]) -> Int? {
        var held: (HLCTimestamp, Int)?
        for (hlc, value) in writes where LastWriterWins.wins(hlc, over: held?.0) { held = (hlc, value) }
        return held?.1
    }

    @Test func theLatestReadingWinsInEveryOrderWithReplays() {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            // Writes of three nodes, some at the same physical time (the node id breaks ties).
            let writes = (0..<8).map { i in
                (
                    HLCTimestamp(
                        physical: UInt64.random(in: 1...4, using: &random),
                        logical: UInt32.random(in: 0...1, using: &random),
                        node: NodeID(UInt64(1 + i % 3))), i
                )
            }
            let unique = Dictionary(writes.map { ($0.0, $0.1) }, uniquingKeysWith: { first, _ in first })
            let expected = unique.max { $0.key < $1.key }?.value
            let once = writes.filter { unique[$0.0] == $0.1 }
            let shuffled = (once + once.prefix(3)).shuffled(using: &random)  // replays included
            #expect(Self.replay(shuffled) == expected)
            #expect(Self.replay(once.reversed()) == expected)
        }
    }

    @Test func anEqualReadingIsTheSameWriteAndChangesNothing() {
        let t = HLCTimestamp(physical: 5, logical: 0, node: NodeID(1))
        #expect(LastWriterWins.wins(t, over: nil))
        #expect(!LastWriterWins.wins(t, over: t))
        #expect(!LastWriterWins.wins(HLCTimestamp(physical: 4, logical: 9, node: NodeID(9)), over: t))
        #expect(LastWriterWins.wins(HLCTimestamp(physical: 5, logical: 0, node: NodeID(2)), over: t))
    }
}
