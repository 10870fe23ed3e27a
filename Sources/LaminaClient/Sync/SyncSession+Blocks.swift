import Foundation
import LaminaModel
import LaminaWire

extension SyncSession {
    /// Blocks (or unblocks) `user` for the session's user on the node (SPEC §5.10 BLOCK_USER);
    /// returns once the node acknowledged it. Only while live.
    public func setBlocked(_ user: UserID, blocking: Bool) async throws(ClientError) {
        guard state == .live else { throw ClientError(.notConnected, "the session is not live") }
        let id = UUID()
        try await sendAwaited(.blockUser(BlockUser(requestID: id, user: user, blocking: blocking)), id: id)
    }
}
