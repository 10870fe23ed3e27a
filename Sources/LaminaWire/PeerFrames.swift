import Foundation
import LaminaMerge
import LaminaModel
import NIOCore

// Peer frames (SPEC §6.5): node <-> node replication over the same framing.

/// PEER_HELLO (0x0401), both sides first: who they are and what they speak.
/// ```
/// +-----------+-------------------+-------------------+----------------+-------------------+
/// | node (u64)| min version (u16) | max version (u16) | features (u64) | cluster (string)  |
/// +-----------+-------------------+-------------------+----------------+-------------------+
/// ```
public struct PeerHello: Hashable, Sendable {
    public var nodeID: NodeID
    public var minVersion: UInt16
    public var maxVersion: UInt16
    public var features: FeatureSet
    /// The cluster's name; peers of different clusters refuse each other.
    public var cluster: String

    public init(
        nodeID: NodeID, minVersion: UInt16 = WireProtocol.version, maxVersion: UInt16 = WireProtocol.version,
        features: FeatureSet = .all, cluster: String
    ) {
        self.nodeID = nodeID
        self.minVersion = minVersion
        self.maxVersion = maxVersion
        self.features = features
        self.cluster = cluster
    }
}

// VERSION_VECTOR (0x0402): for each origin node, how many of its operations the sender
// holds (operations of one origin are numbered 1, 2, ... without gaps). The value is
// LaminaMerge's `VersionVector` (one type for the lattice and the wire); its codec is below.
// ```
// +----------------+-------------------------------------------+
// | count (varint) | (node (u64) + counter (varint)) * count   |
// +----------------+-------------------------------------------+
// ```
// Entries are in strictly ascending node order, and every counter is at least 1 (an origin
// with none is left out).

/// One operation as replicated between peers: where it originated, its number there,
/// its clock reading, and what it did (the change feed's events, kinds 0...11, or a change of
/// a user's state, kinds 64...68, or a distinct creation, kind 69).
/// ```
/// +--------------+------------------+----------+---------------------+
/// | origin (u64) | counter (varint) | hlc      | kind + event fields |
/// +--------------+------------------+----------+---------------------+
/// ```
public struct ReplicatedOperation: Hashable, Sendable {
    public var origin: NodeID
    /// 1, 2, ... per origin.
    public var counter: UInt64
    public var hlc: HLCTimestamp
    public var payload: ReplicatedEvent

    public init(origin: NodeID, counter: UInt64, hlc: HLCTimestamp, payload: ReplicatedEvent) {
        self.origin = origin
        self.counter = counter
        self.hlc = hlc
        self.payload = payload
    }

    /// An operation on a conversation.
    public init(origin: NodeID, counter: UInt64, hlc: HLCTimestamp, event: ChangeEvent) {
        self.init(origin: origin, counter: counter, hlc: hlc, payload: .change(event))
    }

    /// The conversation change, when the operation is one.
    public var event: ChangeEvent? {
        if case .change(let event) = payload { event } else { nil }
    }
}

/// REPLICATE (0x0403): 1 to 256 operations the receiver lacks.
/// ```
/// +----------------+----------------------+
/// | count (varint) | operation * count    |
/// +----------------+----------------------+
/// ```
public struct Replicate: Hashable, Sendable {
    public var operations: [ReplicatedOperation]
    public init(operations: [ReplicatedOperation]) { self.operations = operations }
}

/// PEER_ACK (0x0404): the receiver has made durable everything up to this vector.
/// Same layout as VERSION_VECTOR.
public struct PeerAck: Hashable, Sendable {
    public var vector: VersionVector
    public init(vector: VersionVector) { self.vector = vector }
}

// MARK: - Codec

extension PeerHello {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        guard minVersion >= 1, minVersion <= maxVersion else {
            throw WireError(.invalidArgument, "version range \(minVersion)...\(maxVersion) is empty or starts at 0")
        }
        b.writeInteger(nodeID.rawValue, as: UInt64.self)
        b.writeInteger(minVersion, as: UInt16.self)
        b.writeInteger(maxVersion, as: UInt16.self)
        b.writeInteger(features.rawValue, as: UInt64.self)
        try b.writeString(cluster, max: WireLimits.default.maxTextBytes, "the cluster name")
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> PeerHello {
        let node = NodeID(try b.readU64("the node id"))
        let minVersion = try b.readU16("the minimum version")
        let maxVersion = try b.readU16("the maximum version")
        guard minVersion >= 1, minVersion <= maxVersion else {
            throw WireError(.malformed, "version range \(minVersion)...\(maxVersion) is empty or starts at 0")
        }
        let features = FeatureSet(rawValue: try b.readU64("the features"))
        let cluster = try b.readString(max: limits.maxTextBytes, "the cluster name")
        return PeerHello(
            nodeID: node, minVersion: minVersion, maxVersion: maxVersion, features: features, cluster: cluster)
    }
}

extension VersionVector {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        guard counters.count <= WireLimits.default.maxVersionVectorEntries else {
            throw WireError(
                .limitExceeded, "a version vector has at most \(WireLimits.default.maxVersionVectorEntries) entries")
        }
        b.writeVarint(UInt64(counters.count))
        for node in counters.keys.sorted() {
            b.writeInteger(node.rawValue, as: UInt64.self)
            b.writeVarint(counters[node] ?? 0)
        }
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> VersionVector {
        let count = try b.readCount(
            max: limits.maxVersionVectorEntries, minElementSize: 9, "the version vector's entry count")
        var counters = [NodeID: UInt64](minimumCapacity: count)
        var previous: UInt64?
        for _ in 0..<count {
            let node = try b.readU64("a node id")
            let counter = try b.readVarint("a counter")
            // SPEC §3.7: "A version vector (§6.5) is written in strictly ascending node id order, without entries of counter 0."
            if let previous, previous >= node {
                throw WireError(.nonCanonical, "version vector entries must be in strictly ascending node order")
            }
            // SPEC §6.5: "every counter >= 1 (an origin with none is absent)".
            guard counter > 0 else { throw WireError(.nonCanonical, "a version vector entry's counter is at least 1") }
            counters[NodeID(node)] = counter
            previous = node
        }
        return VersionVector(counters)
    }
}

extension Replicate {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        guard !operations.isEmpty else {
            throw WireError(.invalidArgument, "a replicate frame holds at least one operation")
        }
        guard operations.count <= WireLimits.default.maxBatchSize else {
            throw WireError(
                .limitExceeded,
                "a replicate frame holds at most \(WireLimits.default.maxBatchSize) operations, this one has \(operations.count)"
            )
        }
        b.writeVarint(UInt64(operations.count))
        for op in operations {
            b.writeInteger(op.origin.rawValue, as: UInt64.self)
            b.writeVarint(op.counter)
            b.writeHLC(op.hlc)
            try op.payload.encode(into: &b)
        }
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> Replicate {
        let count = try b.readCount(max: limits.maxBatchSize, minElementSize: 20, "the operation count")
        guard count > 0 else { throw WireError(.malformed, "a replicate frame holds at least one operation") }
        var ops = [ReplicatedOperation]()
        ops.reserveCapacity(count)
        for _ in 0..<count {
            let origin = NodeID(try b.readU64("the origin node"))
            let counter = try b.readVarint("the operation counter")
            let hlc = try b.readHLC("the operation clock")
            let payload = try ReplicatedEvent.decode(from: &b, limits)
            ops.append(ReplicatedOperation(origin: origin, counter: counter, hlc: hlc, payload: payload))
        }
        return Replicate(operations: ops)
    }
}

extension PeerAck {
    func encode(into b: inout ByteBuffer) throws(WireError) { try vector.encode(into: &b) }
    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> PeerAck {
        PeerAck(vector: try VersionVector.decode(from: &b, limits))
    }
}
