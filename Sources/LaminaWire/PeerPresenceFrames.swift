import LaminaMerge
import LaminaModel
import NIOCore

/// PEER_PRESENCE (0x0405), between peer nodes (SPEC §6.6): the sending node's presence reports
/// of users with devices connected to it (or that just left), soft state, never logged or
/// acknowledged. Each report is the sender's latest for that user; the receiver applies it to
/// the user's ``PresenceBoard`` under the sender's node id.
/// ```
/// +--------------------------+--------------------------------------------------------------+
/// | count (varint, 1..1024)  | count × (user (user), devices (varint32), choice (opt: status |
/// |                          | (u8, 1..4), at (hlc)), at (hlc))                               |
/// +--------------------------+--------------------------------------------------------------+
/// ```
public struct PeerPresence: Hashable, Sendable {
    /// One user's report.
    public struct Entry: Hashable, Sendable {
        public var user: UserID
        /// The user's devices with a session open on the sender.
        public var devices: UInt32
        /// The latest status the user chose that the sender knows.
        public var choice: PresenceChoice?
        /// The sender's HLC reading when it made the report.
        public var at: HLCTimestamp

        public init(user: UserID, devices: UInt32, choice: PresenceChoice?, at: HLCTimestamp) {
            self.user = user
            self.devices = devices
            self.choice = choice
            self.at = at
        }
    }

    /// The most reports per frame.
    public static let maxEntries = 1_024

    public var entries: [Entry]

    public init(entries: [Entry]) { self.entries = entries }

    func encode(into b: inout ByteBuffer) throws(WireError) {
        guard !entries.isEmpty else {
            throw WireError(.invalidArgument, "a peer presence frame holds at least one report")
        }
        guard entries.count <= Self.maxEntries else {
            throw WireError(
                .limitExceeded,
                "a peer presence frame holds at most \(Self.maxEntries) reports, this one has \(entries.count)")
        }
        b.writeVarint(UInt64(entries.count))
        for entry in entries {
            try b.writeUserID(entry.user)
            b.writeVarint(UInt64(entry.devices))
            if let choice = entry.choice {
                guard choice.status.isChoosable else {
                    throw WireError(.invalidArgument, "offline is not a choice (SPEC §6.6)")
                }
                b.writeInteger(1, as: UInt8.self)
                b.writeInteger(choice.status.rawValue, as: UInt8.self)
                b.writeHLC(choice.at)
            } else {
                b.writeInteger(0, as: UInt8.self)
            }
            b.writeHLC(entry.at)
        }
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> PeerPresence {
        let count = try b.readCount(max: Self.maxEntries, minElementSize: 14, "the report count")
        guard count > 0 else { throw WireError(.malformed, "a peer presence frame holds at least one report") }
        var entries: [Entry] = []
        entries.reserveCapacity(count)
        for _ in 0..<count {
            let user = try b.readUserID(limits)
            let devices = try b.readVarint32("the device count")
            var choice: PresenceChoice?
            if try b.readPresence("the choice") {
                let status = try b.readPresenceStatus()
                guard status.isChoosable else { throw WireError(.malformed, "offline (0) is not a choice") }
                choice = PresenceChoice(status: status, at: try b.readHLC("the choice time"))
            }
            entries.append(Entry(user: user, devices: devices, choice: choice, at: try b.readHLC("the report time")))
        }
        return PeerPresence(entries: entries)
    }
}
