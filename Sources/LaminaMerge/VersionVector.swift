import LaminaModel

/// Identifies a replicated operation: the node where it originated and that node's
/// counter for it (1, 2, 3, … with no gaps).
public struct OperationID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var origin: NodeID
    public var counter: UInt64

    public init(origin: NodeID, counter: UInt64) {
        self.origin = origin
        self.counter = counter
    }

    public var description: String { "\(origin)#\(counter)" }
    public static func < (lhs: OperationID, rhs: OperationID) -> Bool {
        (lhs.origin, lhs.counter) < (rhs.origin, rhs.counter)
    }
}

/// Operations one side lacks: those of `origin` with counters in `counters`.
public struct MissingRange: Hashable, Sendable, CustomStringConvertible {
    public var origin: NodeID
    public var counters: ClosedRange<UInt64>

    public init(origin: NodeID, counters: ClosedRange<UInt64>) {
        self.origin = origin
        self.counters = counters
    }

    public func contains(_ id: OperationID) -> Bool { id.origin == origin && counters.contains(id.counter) }
    public var description: String { "\(origin)#\(counters.lowerBound)…\(counters.upperBound)" }
}

/// How two version vectors relate.
public enum VersionOrder: Hashable, Sendable {
    case before, equal, after, concurrent
}

/// What a replica has seen: per origin node, the highest counter up to which it holds
/// every operation of that origin (operations of one origin are applied in counter order).
/// Merge is the pointwise maximum.
public struct VersionVector: ReplicatedState, Hashable, CustomStringConvertible {
    public typealias Operation = OperationID

    /// Highest contiguous counter per origin; origins never seen are absent (0).
    public private(set) var counters: [NodeID: UInt64]

    public init() { counters = [:] }
    public init(_ counters: [NodeID: UInt64]) { self.counters = counters.filter { $0.value > 0 } }

    /// The counter for `origin` (0 when none of its operations has been seen).
    public subscript(origin: NodeID) -> UInt64 { counters[origin] ?? 0 }

    /// Raises the counter of `id.origin` to at least `id.counter` (the lattice join;
    /// for replication with gap detection use `observe`).
    public mutating func apply(_ id: OperationID) {
        guard id.counter > self[id.origin] else { return }
        counters[id.origin] = id.counter
    }

    public func merged(with other: VersionVector) -> VersionVector {
        var out = self
        out.counters.merge(other.counters) { Swift.max($0, $1) }
        return out
    }

    /// The outcome of `observe`.
    public enum Observation: Hashable, Sendable {
        /// The next operation of its origin: recorded, apply it.
        case next
        /// Already seen: skip it (at-least-once delivery).
        case duplicate
        /// Operations of its origin are missing before it: not recorded; fetch `missing` first.
        case gap(missing: MissingRange)
    }

    /// Records `id` if it is the next operation of its origin.
    public mutating func observe(_ id: OperationID) -> Observation {
        let current = self[id.origin]
        if id.counter <= current { return .duplicate }
        if id.counter == current + 1 {
            counters[id.origin] = id.counter
            return .next
        }
        return .gap(missing: MissingRange(origin: id.origin, counters: (current + 1)...(id.counter - 1)))
    }

    /// The id of the next local operation of `origin`; throws rather than wrap at `UInt64.max`.
    public mutating func increment(_ origin: NodeID) throws(MergeError) -> OperationID {
        let current = self[origin]
        guard current < UInt64.max else {
            throw MergeError(.counterOverflow, "the operation counter of \(origin) is exhausted")
        }
        counters[origin] = current + 1
        return OperationID(origin: origin, counter: current + 1)
    }

    /// How `self` relates to `other`.
    public func compare(_ other: VersionVector) -> VersionOrder {
        var less = false
        var greater = false
        for origin in Set(counters.keys).union(other.counters.keys) {
            let a = self[origin]
            let b = other[origin]
            if a < b { less = true }
            if a > b { greater = true }
        }
        switch (less, greater) {
        case (false, false): return .equal
        case (true, false): return .before
        case (false, true): return .after
        case (true, true): return .concurrent
        }
    }

    /// The operations `self` holds that `other` lacks, per origin, in origin order:
    /// what to stream to a peer whose vector is `other`.
    public func missing(from other: VersionVector) -> [MissingRange] {
        counters.keys.sorted().compactMap { origin in
            let have = self[origin]
            let theirs = other[origin]
            return have > theirs ? MissingRange(origin: origin, counters: (theirs + 1)...have) : nil
        }
    }

    /// The entries of an operation log (keyed by `OperationID`) that `other` lacks, in
    /// (origin, counter) order.
    public func missing<Value>(from other: VersionVector, in log: [OperationID: Value]) -> [(OperationID, Value)] {
        let ranges = missing(from: other)
        return log.filter { entry in ranges.contains { $0.contains(entry.key) } }
            .sorted { $0.key < $1.key }
            .map { ($0.key, $0.value) }
    }

    public var description: String {
        "[" + counters.keys.sorted().map { "\($0):\(self[$0])" }.joined(separator: ", ") + "]"
    }
}
