import Foundation
import LaminaModel
import LaminaTransport

/// Following on the Client API (SPEC §6.7), where Layer's Web SDK sends it
/// (`identity.follow()`: `PUT /following/users/:user_id`, `unfollow()`: `DELETE`).
extension ClientAPI {
    /// GET /following/users: the identity ids of the users the session's user follows
    /// explicitly, in user id order.
    func listFollowing(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let followed = try await engine.followees(of: user)
        return ServerAPIJSON.response(
            200, followed.map(ClientAPIRepresentation.identityID),
            extraHeaders: [("layer-count", "\(followed.count)")])
    }

    /// PUT /following/users/:user_id: follows them (204, also when followed already; 422 past
    /// ``NodeEngine/maxFollowsPerUser`` or for oneself).
    func follow(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        switch try await engine.setFollowing(try Self.pathUser(r), by: user, following: true) {
        case .changed, .unchanged: return HTTPResponse(status: 204)
        case .ownself: throw ServerAPIError.invalidProperty("user_id", "a user cannot follow themselves")
        case .full:
            throw ServerAPIError.invalidProperty(
                "user_id", "\(user) follows \(NodeEngine.maxFollowsPerUser) users already (the most)")
        }
    }

    /// DELETE /following/users/:user_id: unfollows (204, also when not followed).
    func unfollow(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        _ = try await engine.setFollowing(try Self.pathUser(r), by: user, following: false)
        return HTTPResponse(status: 204)
    }

    /// The `user_id` path parameter (a user id or identity id); 404 when it is neither.
    static func pathUser(_ r: ClientAPIRequest) throws -> UserID {
        let raw = r.parameters["user_id"] ?? ""
        guard let user = try? ServerAPIRepresentation.user(raw, property: "user_id") else {
            throw ServerAPIError.notFound("no identity \(raw.prefix(200))")
        }
        return user
    }
}
