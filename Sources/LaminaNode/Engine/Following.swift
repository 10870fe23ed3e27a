import Foundation
import LaminaModel
import LaminaStore
import LaminaWire

/// Explicit following (SPEC §6.7): a user follows another to receive their identity and
/// presence without sharing a conversation (Layer's Platform API following). Stored per
/// follower and followed; each change tells the follower's devices (`follow-changed`, and on
/// following the followed user's identity, `identity-changed`, in the same transaction), the
/// node's presence fan-out, and the peers (a replicated last-writer-wins register per pair).
extension NodeEngine {
    /// The most users one user follows explicitly (SPEC §6.7).
    public static let maxFollowsPerUser = 1_000

    /// What ``setFollowing(_:by:following:)`` did.
    enum FollowResult: Sendable, Equatable { case changed, unchanged, full, ownself }

    /// `follower` follows (or unfollows) `followed`: the one rule for the Server API, the
    /// Client API and FOLLOW_USER. `full` (nothing changed) when `follower` follows
    /// ``maxFollowsPerUser`` users already; `ownself` when they are the same user.
    func setFollowing(_ followed: UserID, by follower: UserID, following: Bool) async throws -> FollowResult {
        guard followed != follower else { return .ownself }
        let (result, changes, shared) = try await store.write {
            [self] tx -> (FollowResult, [FeedChange], Bool) in
            let now = Timestamp.now()
            if following {
                guard
                    try tx.read.followeeCount(of: follower) < Self.maxFollowsPerUser
                        || tx.read.followees(of: follower).contains(followed)
                else { return (.full, [], false) }
                guard try tx.follow(followed, by: follower, at: now) else { return (.unchanged, [], false) }
            } else {
                guard try tx.unfollow(followed, by: follower) else { return (.unchanged, [], false) }
            }
            let change = FollowChange(follower: follower, followed: followed, following: following)
            var context = CommandContext(tx: tx, user: follower, engine: self, now: now)
            try context.emitFollowChange(change)
            // Peers learn it as they learn a block (SPEC §6.5 kind 71), whatever node the
            // follower's devices use.
            try recordUserState(.follow(change), in: tx)
            return (.changed, context.changes, try tx.read.coMembers(of: follower).contains(followed))
        }
        guard result == .changed else { return result }
        publish(changes)
        presenceFollowChanged(followed, by: follower, following: following || shared)
        return result
    }

    /// The users `follower` follows explicitly.
    func followees(of follower: UserID) async throws -> [UserID] {
        try await store.read { r in try r.followees(of: follower) }
    }
}

extension CommandContext {
    /// What a follow or an unfollow appends to the follower's feed (made here or replicated):
    /// `follow-changed`, and on following a user who has an identity, that identity.
    mutating func emitFollowChange(_ change: FollowChange) throws {
        try emit(
            .followChanged(FollowChanged(user: change.followed, following: change.following)), to: [change.follower],
            conversation: nil)
        guard change.following, let identity = try tx.read.identity(of: change.followed) else { return }
        try emit(
            .identityChanged(
                IdentityChange(
                    user: change.followed, identity: .init(values: identity.values, metadata: identity.metadata))),
            to: [change.follower], conversation: nil)
    }
}

extension NodeSession {
    /// FOLLOW_USER (SPEC §6.7): once the commands before it are answered, the session's user
    /// follows or unfollows the named user, and the node answers ACK; following oneself, or more
    /// users than the limit, is `invalid-argument`. Following a user already followed, or
    /// unfollowing one not followed, changes nothing and is acknowledged.
    func followUser(_ request: FollowUser, as auth: Auth) async {
        do {
            switch try await engine.setFollowing(request.user, by: auth.user, following: request.following) {
            case .changed, .unchanged: break
            case .ownself:
                return reply(
                    WireError(.invalidArgument, "a user cannot follow themselves"), requestID: request.requestID)
            case .full:
                return reply(
                    WireError(
                        .invalidArgument,
                        "\(auth.user) follows \(NodeEngine.maxFollowsPerUser) users already (the most)"),
                    requestID: request.requestID)
            }
        } catch {
            return reply(EngineErrors.wire(error), requestID: request.requestID)
        }
        send(.ack(Ack(requestID: request.requestID)))
    }
}
