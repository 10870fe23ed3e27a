import Foundation
import LaminaModel
import NIOCore

/// FOLLOW_USER (0x0010), client -> node (following feature, SPEC §6.7): the session's user
/// follows (`following` true) or unfollows `user`. Answered with ACK, or ERROR.
/// ```
/// +------------------+-------------+------------------+
/// | requestID (uuid) | user (user) | following (bool) |
/// +------------------+-------------+------------------+
/// ```
public struct FollowUser: Hashable, Sendable {
    public var requestID: UUID
    public var user: UserID
    public var following: Bool

    public init(requestID: UUID, user: UserID, following: Bool) {
        self.requestID = requestID
        self.user = user
        self.following = following
    }

    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeUUID(requestID)
        try b.writeUserID(user)
        b.writeBool(following)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> FollowUser {
        let id = try b.readUUID("the request id")
        let user = try b.readUserID(limits)
        return FollowUser(requestID: id, user: user, following: try b.readBool("the following flag"))
    }
}

/// Change kind 15 `follow-changed` (SPEC §6.4, §6.7): the feed's user now follows `user`
/// explicitly (`following`), or no longer does.
/// ```
/// +-------------+------------------+
/// | user (user) | following (bool) |
/// +-------------+------------------+
/// ```
public struct FollowChanged: Hashable, Sendable {
    public var user: UserID
    public var following: Bool

    public init(user: UserID, following: Bool) {
        self.user = user
        self.following = following
    }
}
