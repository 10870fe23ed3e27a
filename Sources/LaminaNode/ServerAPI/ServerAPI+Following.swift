import Foundation
import LaminaModel
import LaminaTransport

/// Following (Layer's Platform API, `/users/:user_id/identities`; SPEC §6.7): a user follows
/// another to receive their identity and presence without sharing a conversation.
extension ServerAPI {
    /// GET: the users `user_id` follows explicitly, in user id order (their user ids, as
    /// Layer's Platform API listed them).
    func listFollowed(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let follower = try r.userID()
        let followed = try await engine.followees(of: follower)
        return ServerAPIJSON.response(200, followed.map(\.rawValue), extraHeaders: [Self.layerCount(followed.count)])
    }

    /// PUT /identities/:followed_id: `user_id` follows them (204, also when they did already);
    /// at most ``NodeEngine/maxFollowsPerUser`` (then 422 `invalid_property`). Following oneself
    /// is accepted and changes nothing (a user always has their own identity).
    func follow(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let follower = try r.userID()
        let followed = try Self.followedUser(r)
        if try await engine.setFollowing(followed, by: follower, following: true) == .full {
            throw ServerAPIError.invalidProperty(
                "followed_id", "\(follower) follows \(NodeEngine.maxFollowsPerUser) users already (the most)")
        }
        return HTTPResponse(status: 204)
    }

    /// DELETE /identities/:followed_id: unfollows (204, also when they did not follow them).
    func unfollow(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let follower = try r.userID()
        _ = try await engine.setFollowing(try Self.followedUser(r), by: follower, following: false)
        return HTTPResponse(status: 204)
    }

    /// The path's `followed_id` (a user id, or an identity id); 404 when it is none.
    private static func followedUser(_ r: ServerAPIRequest) throws -> UserID {
        let raw = r.parameters["followed_id"] ?? ""
        guard let user = try? ServerAPIRepresentation.user(raw, property: "followed_id") else {
            throw ServerAPIError.notFound("no user \(raw.prefix(200))")
        }
        return user
    }
}
