import Foundation
import LaminaModel
import LaminaWire

extension NodeSession {
    /// BLOCK_USER (SPEC §5.10): once the commands before it are answered, the session's user
    /// blocks or unblocks the named user through the engine's one block-list rule (the Server
    /// API's), and the node answers ACK; blocking oneself, or more users than the limit, is
    /// `invalid-argument`. Unblocking a user not blocked changes nothing and is acknowledged.
    func blockUser(_ request: BlockUser, as auth: Auth) async {
        do {
            if request.blocking {
                switch try await engine.block(request.user, by: auth.user, limit: ServerAPILimits.maxBlocksPerUser) {
                case .added, .alreadyBlocked: break
                case .ownself:
                    return reply(
                        WireError(.invalidArgument, "a user cannot block themselves"), requestID: request.requestID)
                case .full:
                    return reply(
                        WireError(
                            .invalidArgument,
                            "\(auth.user) blocks \(ServerAPILimits.maxBlocksPerUser) users already (the most)"),
                        requestID: request.requestID)
                }
            } else {
                _ = try await engine.unblock(request.user, by: auth.user)
            }
        } catch {
            return reply(EngineErrors.wire(error), requestID: request.requestID)
        }
        send(.ack(Ack(requestID: request.requestID)))
    }
}
