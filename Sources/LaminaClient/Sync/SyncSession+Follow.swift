import Foundation
import LaminaModel
import LaminaWire

extension SyncSession {
    /// Follows (or unfollows) `user` for the session's user on the node (SPEC §6.7
    /// FOLLOW_USER); returns once the node acknowledged it. Only while live.
    public func setFollowing(_ user: UserID, following: Bool) async throws(ClientError) {
        guard state == .live else { throw ClientError(.notConnected, "the session is not live") }
        guard features.contains(.following) else {
            throw ClientError(.notAllowed, "the node does not offer following (feature bit 10)")
        }
        let id = UUID()
        try await sendAwaited(.followUser(FollowUser(requestID: id, user: user, following: following)), id: id)
    }
}
