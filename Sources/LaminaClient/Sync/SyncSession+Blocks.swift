import Foundation
import LaminaModel
import LaminaWire

extension SyncSession {
    /// Blocks (or unblocks) `user` for the session's user on the node (SPEC §5.10 BLOCK_USER);
    /// returns once the node acknowledged it. Only while live. The answer is awaited like
    /// REGISTER_PUSH_TOKEN's (the same table of requests awaiting an ACK or ERROR).
    public func setBlocked(_ user: UserID, blocking: Bool) async throws(ClientError) {
        guard state == .live else { throw ClientError(.notConnected, "the session is not live") }
        let id = UUID()
        pushTokenRequests[id] = PushTokenRequest()
        do {
            try await channel.send(.blockUser(BlockUser(requestID: id, user: user, blocking: blocking)))
        } catch {
            pushTokenRequests[id] = nil
            throw error
        }
        let outcome = await withCheckedContinuation { (caller: CheckedContinuation<Result<Void, ClientError>, Never>) in
            if let result = pushTokenRequests[id]?.result {
                caller.resume(returning: result)
            } else {
                pushTokenRequests[id]?.caller = caller
            }
        }
        pushTokenRequests[id] = nil
        try outcome.get()
    }
}
