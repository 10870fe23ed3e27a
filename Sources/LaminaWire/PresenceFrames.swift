import Foundation
import LaminaModel
import NIOCore

/// SET_PRESENCE (0x000F), client -> node (presence feature, SPEC §6.6): the session's user
/// chooses a status for all their devices. Answered with ACK, or ERROR.
/// ```
/// +------------------+-------------+
/// | requestID (uuid) | status (u8) |
/// +------------------+-------------+
/// ```
public struct SetPresence: Hashable, Sendable {
    public var requestID: UUID
    /// Any status but `offline`, which the node answers with a non-fatal `invalid-argument`.
    public var status: PresenceStatus

    public init(requestID: UUID, status: PresenceStatus) {
        self.requestID = requestID
        self.status = status
    }

    func encode(into b: inout ByteBuffer) {
        b.writeUUID(requestID)
        b.writeInteger(status.rawValue, as: UInt8.self)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> SetPresence {
        let id = try b.readUUID("the request id")
        return SetPresence(requestID: id, status: try b.readPresenceStatus())
    }
}

/// Change kind 14 `presence-changed` (SPEC §6.4, §6.6), always with seq 0 (never in the
/// stored feed): `user`'s presence as the receiving user sees it.
/// ```
/// +-------------+-------------+--------------------------+
/// | user (user) | status (u8) | lastSeenAt (opt timestamp)|
/// +-------------+-------------+--------------------------+
/// ```
public struct PresenceChanged: Hashable, Sendable {
    public var user: UserID
    public var presence: Presence

    public init(user: UserID, presence: Presence) {
        self.user = user
        self.presence = presence
    }
}

extension ByteBuffer {
    mutating func writePresenceChanged(_ c: PresenceChanged) throws(WireError) {
        try writeUserID(c.user)
        writeInteger(c.presence.status.rawValue, as: UInt8.self)
        if let seen = c.presence.lastSeenAt {
            writeInteger(1, as: UInt8.self)
            writeTimestamp(seen)
        } else {
            writeInteger(0, as: UInt8.self)
        }
    }
}

extension PayloadReader {
    mutating func readPresenceStatus() throws(WireError) -> PresenceStatus {
        let raw = try peekU8("a presence status")
        guard let status = PresenceStatus(rawValue: raw) else {
            throw WireError(.malformed, "presence status \(raw) is not one of 0...4")
        }
        moveReaderIndex(forwardBy: 1)
        return status
    }

    mutating func readPresenceChanged(_ limits: WireLimits) throws(WireError) -> PresenceChanged {
        let user = try readUserID(limits)
        let status = try readPresenceStatus()
        let seen = try readPresence("the last seen time") ? try readTimestamp("the last seen time") : nil
        return PresenceChanged(user: user, presence: Presence(status: status, lastSeenAt: seen))
    }
}
