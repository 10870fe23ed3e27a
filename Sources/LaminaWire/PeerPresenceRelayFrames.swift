import LaminaMerge
import LaminaModel
import NIOCore

/// PEER_PRESENCE_RELAYED (0x0406), between peer nodes (SPEC §6.6): presence reports another
/// node (`origin`) made, passed on by a node that holds them, so presence crosses a topology in
/// which not every pair of nodes is linked. Soft state like PEER_PRESENCE.
/// ```
/// +--------------+-----------------------------------------------+
/// | origin (u64) | as PEER_PRESENCE: count (varint, 1..1024),    |
/// |              | count × report                                |
/// +--------------+-----------------------------------------------+
/// ```
public struct PeerPresenceRelayed: Hashable, Sendable {
    /// The node that made the reports.
    public var origin: NodeID
    public var entries: [PeerPresence.Entry]

    public init(origin: NodeID, entries: [PeerPresence.Entry]) {
        self.origin = origin
        self.entries = entries
    }

    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeInteger(origin.rawValue, as: UInt64.self)
        try PeerPresence(entries: entries).encode(into: &b)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> PeerPresenceRelayed {
        let origin = NodeID(try b.readU64("the origin node"))
        return PeerPresenceRelayed(origin: origin, entries: try PeerPresence.decode(from: &b, limits).entries)
    }
}

/// PEER_PRESENCE_WITHDRAWN (0x0407), between peer nodes (SPEC §6.6): the sender no longer holds
/// the reports of these origin nodes (it lost the link they came by).
/// ```
/// +-------------------------+---------------------------------------------+
/// | count (varint, 1..1024) | count × origin (u64), strictly ascending    |
/// +-------------------------+---------------------------------------------+
/// ```
public struct PeerPresenceWithdrawn: Hashable, Sendable {
    /// The most origins per frame.
    public static let maxOrigins = 1_024

    /// In ascending order, each once.
    public var origins: [NodeID]

    public init(origins: [NodeID]) { self.origins = origins }

    func encode(into b: inout ByteBuffer) throws(WireError) {
        guard !origins.isEmpty else { throw WireError(.invalidArgument, "a withdrawal names at least one node") }
        guard origins.count <= Self.maxOrigins else {
            throw WireError(
                .limitExceeded, "a withdrawal names at most \(Self.maxOrigins) nodes, this one \(origins.count)")
        }
        guard zip(origins, origins.dropFirst()).allSatisfy({ $0 < $1 }) else {
            throw WireError(.invalidArgument, "a withdrawal's nodes are in strictly ascending order")
        }
        b.writeVarint(UInt64(origins.count))
        for origin in origins { b.writeInteger(origin.rawValue, as: UInt64.self) }
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> PeerPresenceWithdrawn {
        let count = try b.readCount(max: Self.maxOrigins, minElementSize: 8, "the origin count")
        guard count > 0 else { throw WireError(.malformed, "a withdrawal names at least one node") }
        var origins: [NodeID] = []
        origins.reserveCapacity(count)
        for _ in 0..<count {
            let origin = NodeID(try b.readU64("an origin node"))
            // Canonical: ascending, each once, so a set of nodes has one encoding.
            if let last = origins.last, !(last < origin) {
                throw WireError(.nonCanonical, "a withdrawal's nodes must be in strictly ascending order")
            }
            origins.append(origin)
        }
        return PeerPresenceWithdrawn(origins: origins)
    }
}
