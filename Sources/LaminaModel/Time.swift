import Foundation

/// A wall-clock instant in whole milliseconds since 1970-01-01T00:00:00Z.
public struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var millisecondsSince1970: Int64

    public init(millisecondsSince1970: Int64) { self.millisecondsSince1970 = millisecondsSince1970 }

    public init(_ date: Date) {
        self.millisecondsSince1970 = Int64((date.timeIntervalSince1970 * 1_000).rounded(.down))
    }

    public static func now() -> Timestamp { Timestamp(Date()) }

    public var date: Date { Date(timeIntervalSince1970: Double(millisecondsSince1970) / 1_000) }
    public var description: String { "\(millisecondsSince1970)ms" }
    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.millisecondsSince1970 < rhs.millisecondsSince1970
    }
}

/// Identifies a relay node among its peers. Breaks ties between clocks.
public struct NodeID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "node-\(String(rawValue, radix: 16))" }
    public static func < (lhs: NodeID, rhs: NodeID) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A hybrid logical clock reading: physical milliseconds, a logical counter for events
/// within the same millisecond, and the node that produced it. Totally ordered by
/// (physical, logical, node), so it serves as a stable order key. The rules that advance
/// a clock live in `LaminaMerge`.
public struct HLCTimestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Milliseconds since 1970 (at most 48 bits are meaningful).
    public var physical: UInt64
    /// Counter for events that share a physical reading.
    public var logical: UInt32
    /// The node whose clock produced this reading.
    public var node: NodeID

    public init(physical: UInt64, logical: UInt32, node: NodeID) {
        self.physical = physical
        self.logical = logical
        self.node = node
    }

    public static let zero = HLCTimestamp(physical: 0, logical: 0, node: NodeID(0))

    public var description: String { "\(physical).\(logical)@\(node)" }

    public static func < (lhs: HLCTimestamp, rhs: HLCTimestamp) -> Bool {
        (lhs.physical, lhs.logical, lhs.node.rawValue) < (rhs.physical, rhs.logical, rhs.node.rawValue)
    }
}

/// A message's place in its conversation: assigned once where the message is accepted,
/// then fixed. Positions of one conversation are totally ordered.
public typealias MessagePosition = HLCTimestamp
