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
            representation.version.usesIdentities
                ? .identity(representation.identity(user)) : .userIDObject(user.rawValue)
        }
        return ServerAPIJSON.response(200, items, extraHeaders: [Self.layerCount(blocked.count)])
    }

    /// POST `{"user_id": …}` (a user id, or an identity id in 2.0 and 3.0): `user_id` of the path
    /// blocks them (204, also when they were blocked already); at most
    /// ``ServerAPILimits/maxBlocksPerUser``. Blocking oneself is accepted and changes nothing
    /// (Layer answered it 204; a user never receives their own messages as someone else's).
    func addBlock(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let blocker = try r.userID()
        let body = try ServerAPIJSON.object(r.http.body)
        guard let raw = body["user_id"] ?? body["identity_id"] else { throw ServerAPIError.missingProperty("user_id") }
        let blocked = try ServerAPIRepresentation.user(raw, property: "user_id")
        try await block(blocked, by: blocker)
        return HTTPResponse(status: 204)
    }

    /// DELETE /blocks/:blocked_id: unblocks (204, also when they were not blocked, as Layer
    /// answered); 404 only when `blocked_id` is no user id.
    func removeBlock(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let blocker = try r.userID()
        let raw = r.parameters["blocked_id"] ?? ""
        guard let blocked = try? ServerAPIRepresentation.user(raw, property: "blocked_id") else {
            throw ServerAPIError.notFound("no user \(raw.prefix(200))")
        }
        _ = try await engine.unblock(blocked, by: blocker)
        return HTTPResponse(status: 204)
    }
}
