import Foundation
import LaminaModel
import NIOCore

/// BLOCK_USER (0x000E), client -> node (blockLists feature, SPEC §5.10): the session's user
/// blocks (`blocking` true) or unblocks `user`. Answered with ACK, or ERROR.
/// ```
/// +------------------+-------------+-----------------+
/// | requestID (uuid) | user (user) | blocking (bool) |
/// +------------------+-------------+-----------------+
/// ```
public struct BlockUser: Hashable, Sendable {
    public var requestID: UUID
    public var user: UserID
    public var blocking: Bool

    public init(requestID: UUID, user: UserID, blocking: Bool) {
        self.requestID = requestID
        self.user = user
        self.blocking = blocking
    }

    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeUUID(requestID)
        try b.writeUserID(user)
        b.writeBool(blocking)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> BlockUser {
        let id = try b.readUUID("the request id")
        let user = try b.readUserID(limits)
        return BlockUser(requestID: id, user: user, blocking: try b.readBool("the blocking flag"))
    }
}

/// Change kind 13 `block-list-changed` (SPEC §6.4): the feed's user blocked or unblocked `user`.
/// ```
/// +-------------+-----------------+
/// | user (user) | blocking (bool) |
/// +-------------+-----------------+
/// ```
public struct BlockListChanged: Hashable, Sendable {
    public var user: UserID
    public var blocking: Bool

    public init(user: UserID, blocking: Bool) {
        self.user = user
        self.blocking = blocking
    }
}
