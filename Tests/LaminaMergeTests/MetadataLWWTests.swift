import LaminaMerge
import LaminaModel
import Testing

@Suite struct MetadataLWWTests {
    static func p(_ s: String) -> MetadataKeyPath { try! MetadataKeyPath(parsing: s) }
    static func t(_ p: UInt64, node: UInt64 = 1) -> HLCTimestamp {
        HLCTimestamp(physical: p, logical: 0, node: NodeID(node))
    }
    static func leaves(_ m: Metadata) -> [String] { m.leaves.map { "\($0.0)=\($0.1)" } }

    /// The materialised metadata equals replaying every write in order with
    /// `Metadata.set` / `Metadata.remove`, whatever order the writes arrived in.
    @Test func materialisedMetadataMatchesASequentialReplay() {
        for i in 0..<3_000 {
            let seed = SplitMix64.seed("metadata-oracle", case: i)
            var r = SplitMix64(seed: seed)
            let ops = Gen.metadataOps(&r)
            var oracle = Metadata()
            for op in ops.sorted(by: MetadataOperation.precedes) {
                switch op.change {
                case .set(let s): oracle.set(.string(s), at: op.path)
                case .delete: oracle.remove(at: op.path)
                }
            }
            let lww = MetadataLWW(ops.shuffled(using: &r))
            #expect(Self.leaves(lww.metadata) == Self.leaves(oracle), "seed \(seed)")
        }
    }

    @Test func theLaterWriteWinsTheOverlapOfAParentAndAChild() {
        let parentLater = MetadataLWW([
            MetadataOperation(.set("child"), at: Self.p("a.b"), timestamp: Self.t(1, node: 2)),
            MetadataOperation(.set("parent"), at: Self.p("a"), timestamp: Self.t(2)),
        ])
        #expect(parentLater.metadata == ["a": .string("parent")])
        let childLater = MetadataLWW([
            MetadataOperation(.set("parent"), at: Self.p("a"), timestamp: Self.t(1)),
            MetadataOperation(.set("child"), at: Self.p("a.b"), timestamp: Self.t(2, node: 2)),
        ])
        #expect(childLater.metadata == ["a": .dictionary(["b": .string("child")])])
    }

    @Test func deletionsAreTombstonesThatBeatEarlierWritesOnly() {
        let set = MetadataOperation(.set("x"), at: Self.p("a.b"), timestamp: Self.t(5))
        let sibling = MetadataOperation(.set("y"), at: Self.p("a.c"), timestamp: Self.t(6))
        let deleteParent = MetadataOperation(.delete, at: Self.p("a"), timestamp: Self.t(7))
        let rewrite = MetadataOperation(.set("z"), at: Self.p("a.c"), timestamp: Self.t(8))
        #expect(MetadataLWW([rewrite, deleteParent, sibling, set]).metadata == ["a": .dictionary(["c": .string("z")])])
        #expect(MetadataLWW([deleteParent, set]).metadata.isEmpty)
        // Deleting a.b does not remove a string at a.
        let string = MetadataOperation(.set("s"), at: Self.p("a"), timestamp: Self.t(1))
        #expect(
            MetadataLWW([string, MetadataOperation(.delete, at: Self.p("a.b"), timestamp: Self.t(2))]).metadata == [
                "a": .string("s")
            ])
    }

    @Test func settingADictionaryReplacesTheSubtree() throws {
        var lww = MetadataLWW(["a": .dictionary(["old": .string("1")]), "k": .string("v")], at: Self.t(1))
        for op in try lww.operations(setting: .dictionary(["new": .string("2")]), at: Self.p("a"), timestamp: Self.t(2))
        { lww.apply(op) }
        #expect(lww.metadata == ["a": .dictionary(["new": .string("2")]), "k": .string("v")])
        lww.apply(lww.operation(deleting: Self.p("k"), timestamp: Self.t(3)))
        #expect(lww.metadata == ["a": .dictionary(["new": .string("2")])])
    }

    @Test func writesBeyondTheLimitsAreRefusedBeforeTheyAreMade() {
        let lww = MetadataLWW()
        let long = String(repeating: "x", count: Limits.maxMetadataValueBytes + 1)
        let error = #expect(throws: MergeError.self) {
            try lww.operations(setting: .string(long), at: Self.p("a"), timestamp: Self.t(1))
        }
        #expect(error?.code == .invalidMetadata)
        let deep = try! MetadataKeyPath(Array(repeating: "k", count: Limits.maxMetadataDepth))
        #expect(throws: MergeError.self) {
            try lww.operations(setting: .dictionary(["more": .string("v")]), at: deep, timestamp: Self.t(1))
        }
    }
}
