import Foundation
import LaminaModel
import LaminaTransport

/// Block lists (`/users/:user_id/blocks`): a user does not receive the messages of the users
/// they block (the engine's fan-out leaves them out, ``BlockLists``).
extension ServerAPI {
    /// GET: the users `user_id` blocks, in user id order (1.0 `{"user_id"}` objects, 3.0 identities).
    func listBlocks(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let blocker = try r.userID()
        let blocked = try await engine.store.read { reader in try reader.blocks(of: blocker) }
        let representation = try await representation(r, users: blocked)
        let items: [ParticipantObject] = blocked.map { user in
            representation.version == .v1 ? .userIDObject(user.rawValue) : .identity(representation.identity(user))
        }
        return ServerAPIJSON.response(200, items)
    }

    /// POST `{"user_id": …}` (a user id, or an identity id in 3.0): `user_id` of the path blocks
    /// them (204, also when they were blocked already); at most ``ServerAPILimits/maxBlocksPerUser``.
    func addBlock(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let blocker = try r.userID()
        let body = try ServerAPIJSON.object(r.http.body)
        guard let raw = body["user_id"] ?? body["identity_id"] else { throw ServerAPIError.missingProperty("user_id") }
        let blocked = try ServerAPIRepresentation.user(raw, property: "user_id")
        guard blocked != blocker else {
            throw ServerAPIError.invalidProperty("user_id", "a user cannot block themselves")
        }
        switch try await engine.block(blocked, by: blocker, limit: ServerAPILimits.maxBlocksPerUser) {
        case .added, .alreadyBlocked: return HTTPResponse(status: 204)
        case .ownself:
            throw ServerAPIError.invalidProperty("user_id", "a user cannot block themselves")
        case .full:
            throw ServerAPIError.invalidProperty(
                "user_id", "\(blocker.rawValue) blocks \(ServerAPILimits.maxBlocksPerUser) users already (the most)")
        }
    }

    /// DELETE /blocks/:blocked_id: unblocks (204); 404 when they were not blocked.
    func removeBlock(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let blocker = try r.userID()
        let raw = r.parameters["blocked_id"] ?? ""
        guard let blocked = try? ServerAPIRepresentation.user(raw, property: "blocked_id"),
            try await engine.unblock(blocked, by: blocker)
        else { throw ServerAPIError.notFound("\(blocker.rawValue) does not block \(raw)") }
        return HTTPResponse(status: 204)
    }
}
