import LaminaModel

/// A hybrid logical clock (Kulkarni et al., 2014) for one node: readings are
/// `HLCTimestamp`s (physical milliseconds, logical counter, node id), totally ordered by
/// (physical, logical, node). Every reading is strictly greater than every reading this
/// clock has produced or received before, whatever the physical clock does (skew between
/// nodes, or a local clock that jumps backwards), and stays close to physical time.
///
/// Message positions are readings of the accepting node's clock (`MessagePosition` is an
/// `HLCTimestamp`): unique across nodes (the node id breaks ties) and a stable total order.
///
/// Rules chosen:
/// - **Counter overflow** carries into the physical part: when the logical counter would
///   pass `UInt32.max`, the reading becomes (physical + 1 ms, 0). The clock never traps and
///   stays monotonic; it runs ahead of wall time by at most 1 ms per 2^32 events in one ms.
/// - **Range**: physical parts are at most `maxPhysical` (48 bits); a physical reading or a
///   carry beyond it throws `MergeError.clockOutOfRange` and leaves the clock unchanged.
/// - **Drift guard**: `receive` refuses (throws `MergeError.clockDrift`, clock unchanged) a
///   remote reading whose physical part is more than `maxDriftMilliseconds` ahead of the
///   local physical clock, so one bad peer cannot drag every clock into the future.
public struct HybridLogicalClock: Sendable, Hashable {
    /// The largest physical part: 2^48 − 1 milliseconds (about the year 10889).
    public static let maxPhysical: UInt64 = (1 << 48) - 1
    /// The default drift guard: one minute.
    public static let defaultMaxDriftMilliseconds: UInt64 = 60_000

    /// The node this clock belongs to; every reading it makes carries it.
    public let node: NodeID
    /// How far ahead of local physical time a received reading may be.
    public var maxDriftMilliseconds: UInt64
    /// The latest reading made or received (the clock's state; persist it to keep
    /// monotonicity across restarts).
    public private(set) var last: HLCTimestamp

    /// A clock for `node`, optionally resuming from a persisted last reading.
    public init(node: NodeID, maxDriftMilliseconds: UInt64 = defaultMaxDriftMilliseconds, last: HLCTimestamp = .zero) {
        self.node = node
        self.maxDriftMilliseconds = maxDriftMilliseconds
        self.last = HLCTimestamp(physical: last.physical, logical: last.logical, node: node)
    }

    /// A reading for a local or send event (e.g. the position of an accepted message),
    /// given the local physical clock in milliseconds since 1970.
    public mutating func now(physical: UInt64) throws(MergeError) -> HLCTimestamp {
        try Self.checkRange(physical)
        let next: HLCTimestamp
        if physical > last.physical {
            next = HLCTimestamp(physical: physical, logical: 0, node: node)
        } else {
            next = try Self.successor(physical: last.physical, logical: last.logical, node: node)
        }
        last = next
        return next
    }

    /// `now(physical:)` from a `Timestamp`; times before 1970 count as 0.
    public mutating func now(_ time: Timestamp) throws(MergeError) -> HLCTimestamp {
        try now(physical: UInt64(max(0, time.millisecondsSince1970)))
    }

    /// A reading for the receipt of a remote event stamped `remote`: greater than both
    /// `remote` and every earlier reading of this clock.
    public mutating func receive(_ remote: HLCTimestamp, physical: UInt64) throws(MergeError) -> HLCTimestamp {
        try Self.checkRange(physical)
        try Self.checkRange(remote.physical)
        let (limit, overflow) = physical.addingReportingOverflow(maxDriftMilliseconds)
        if !overflow, remote.physical > limit {
            throw MergeError(
                .clockDrift,
                "remote reading \(remote) is \(remote.physical - physical) ms ahead of the local clock; at most \(maxDriftMilliseconds) ms allowed"
            )
        }
        let top = max(physical, last.physical, remote.physical)
        let next: HLCTimestamp
        if top == last.physical && top == remote.physical {
            next = try Self.successor(physical: top, logical: max(last.logical, remote.logical), node: node)
        } else if top == last.physical {
            next = try Self.successor(physical: top, logical: last.logical, node: node)
        } else if top == remote.physical {
            next = try Self.successor(physical: top, logical: remote.logical, node: node)
        } else {
            next = HLCTimestamp(physical: top, logical: 0, node: node)
        }
        last = next
        return next
    }

    /// `receive(_:physical:)` with a `Timestamp`; times before 1970 count as 0.
    public mutating func receive(_ remote: HLCTimestamp, _ time: Timestamp) throws(MergeError) -> HLCTimestamp {
        try receive(remote, physical: UInt64(max(0, time.millisecondsSince1970)))
    }

    /// The reading just after (physical, logical): the counter plus one, carried into
    /// the physical part when the counter is exhausted.
    static func successor(physical: UInt64, logical: UInt32, node: NodeID) throws(MergeError) -> HLCTimestamp {
        if logical < UInt32.max {
            return HLCTimestamp(physical: physical, logical: logical + 1, node: node)
        }
        try checkRange(physical + 1)
        return HLCTimestamp(physical: physical + 1, logical: 0, node: node)
    }

    static func checkRange(_ physical: UInt64) throws(MergeError) {
        guard physical <= maxPhysical else {
            throw MergeError(
                .clockOutOfRange, "physical time \(physical) ms is beyond the 48-bit range of a clock (\(maxPhysical))")
        }
    }
}

/// Readings merge as a max-register: the later reading wins.
extension HLCTimestamp: Mergeable {
    public func merged(with other: HLCTimestamp) -> HLCTimestamp { Swift.max(self, other) }
}
