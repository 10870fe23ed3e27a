import Foundation
import LaminaMerge
import LaminaModel
import LaminaStore
import LaminaWire
import NIOConcurrencyHelpers

/// The state about users that the Server API sets (identities, block lists, badges, session
/// revocations) replicates like conversations do (SPEC §6.5): every change made here takes an
/// HLC reading and enters the replication log in its own transaction; a peer's change goes
/// through the same rule, a last-writer-wins register per user (per pair for a block), so the
/// order of arrival does not change the result.
extension NodeEngine {
    /// Records `change`, made on this node, in `tx`: its register and the replication log.
    /// Call ``replicationSignal``'s `notify()` once `tx` committed.
    func recordUserState(_ change: UserStateChange, in tx: StorageTransaction) throws {
        let hlc = try nextHLC()
        // The same rule as a peer's change: a local write reads later than anything this node
        // holds (its clock has received every applied reading), so it always wins here.
        guard LastWriterWins.wins(hlc, over: try tx.read.register(of: change)) else {
            throw WireError(
                .internalError, "the node's clock reads \(hlc), not later than the write it holds for this user")
        }
        try tx.setRegister(of: change, to: hlc)
        _ = try tx.appendLocalOperation(
            try ReplicationLogCoding.userState(change), origin: configuration.nodeID, hlc: hlc)
    }
}

/// What a replicated user-state change requires of the engine once it committed.
enum UserStateEffect: Sendable {
    /// The fan-out's block list of `blocker` (re-read from the store).
    case block(BlockChange)
    /// The user's live sessions end with `session-revoked`.
    case revoked(UserID)
    /// The presence fan-out learns whom the follower follows (`shared`: they also share a
    /// live conversation, so the follower keeps following after an unfollow).
    case follow(FollowChange, shared: Bool)
}

extension CommandContext {
    /// Applies a peer's change of a user's state when it is later than the one held (the
    /// register's rule, `LastWriterWins`); returns what the engine does after the commit.
    mutating func applyUserState(_ change: UserStateChange, at hlc: HLCTimestamp) throws -> UserStateEffect? {
        // A notification level's register is its own table, decided by `NotificationSetting`.
        if case .notificationLevel(let n) = change {
            try applyNotificationLevel(n, at: hlc)
            return nil
        }
        guard LastWriterWins.wins(hlc, over: try tx.read.register(of: change)) else { return nil }
        try tx.setRegister(of: change, to: hlc)
        switch change {
        case .identity(let i):
            if let identity = i.identity {
                try tx.putIdentity(
                    StoredIdentity(values: identity.values, metadata: identity.metadata), of: i.user, at: now)
            } else {
                try tx.deleteIdentity(of: i.user)
            }
            try emitIdentity(i)
            return nil
        case .block(let b):
            if b.blocking {
                _ = try tx.block(b.blocked, by: b.blocker, at: now)
            } else {
                _ = try tx.unblock(b.blocked, by: b.blocker)
            }
            try emit(
                .blockListChanged(BlockListChanged(user: b.blocked, blocking: b.blocking)), to: [b.blocker],
                conversation: nil)
            return .block(b)
        case .badge(let b):
            try tx.setExternalUnreadCount(Int(clamping: b.externalUnreadCount), of: b.user, at: now)
            return nil
        case .sessionsRevoked(let user):
            // The sessions authenticated here before the revocation was made on its node.
            try tx.revokeSessions(
                of: user, createdUpTo: Timestamp(millisecondsSince1970: Int64(clamping: hlc.physical)), at: now)
            return .revoked(user)
        case .pushRegistration(let r):
            // The device registered its token (or removed it) on another node later than
            // here: that node pushes to it now; this one drops its registration.
            if r.node != engine.configuration.nodeID {
                try tx.setPushToken(nil, user: r.user, device: r.device.uuidString.lowercased(), at: now)
            }
            return nil
        case .suspension(let s):
            // The sessions end through the suspending node's own revocation (kind 67).
            try tx.setSuspended(s.suspended, user: s.user, at: now)
            return nil
        case .follow(let f):
            // The follower's devices here learn it as from a local change (SPEC §6.7).
            let changed =
                f.following
                ? try tx.follow(f.followed, by: f.follower, at: now) : try tx.unfollow(f.followed, by: f.follower)
            guard changed else { return nil }
            try emitFollowChange(f)
            return .follow(f, shared: try tx.read.coMembers(of: f.follower).contains(f.followed))
        case .notificationLevel:
            return nil
        }
    }
}

extension NodeEngine {
    /// In the transaction that sets or removes the push token of `auth`'s device: replicates
    /// that this node now holds the device's pushes (SPEC §5.9), so the other nodes drop theirs.
    func recordPushRegistration(of auth: NodeSession.Auth, in tx: StorageTransaction) throws {
        guard let device = UUID(uuidString: auth.device) else { return }
        try recordUserState(
            .pushRegistration(PushRegistrationChange(user: auth.user, device: device, node: configuration.nodeID)),
            in: tx)
    }
}

extension NodeEngine {
    /// Carries out what replicated user-state changes require after their commit.
    func apply(_ effects: [UserStateEffect], blocked: [BlockChange: Bool]) {
        for effect in effects {
            switch effect {
            case .block(let b):
                blockLists.set(b.blocked, by: b.blocker, blocking: blocked[b] ?? b.blocking)
            case .revoked(let user):
                for session in registry.all() where session.state.withLockedValue({ $0.auth?.user == user }) {
                    session.fail(WireError(.sessionRevoked, "every session of the user was revoked"))
                }
            case .follow(let f, let shared):
                presenceFollowChanged(f.followed, by: f.follower, following: f.following || shared)
            }
        }
    }
}

extension NodeEngine {
    /// Sets `user`'s identity (nil: deletes it) and replicates the change; false when there was
    /// nothing to delete.
    @discardableResult
    func setIdentity(_ identity: StoredIdentity?, of user: UserID) async throws -> Bool {
        let (changed, changes) = try await store.write { [self] tx -> (Bool, [FeedChange]) in
            try storeIdentity(identity, of: user, in: tx)
        }
        if changed {
            publish(changes)
            replicationSignal.notify()
        }
        return changed
    }

    /// Sets `user`'s badge (the external unread count) and replicates the change.
    func setExternalUnreadCount(_ count: Int, of user: UserID) async throws {
        try await store.write { [self] tx in
            try tx.setExternalUnreadCount(count, of: user, at: .now())
            try recordUserState(.badge(BadgeChange(user: user, externalUnreadCount: UInt64(max(0, count)))), in: tx)
        }
        replicationSignal.notify()
    }
}
