import Atomics
import Foundation
import LaminaMerge
import LaminaModel
import LaminaStore
import LaminaWire
import NIOConcurrencyHelpers

/// Presence (SPEC §6.6): soft state in memory (``PresenceTable``), nothing written to the store
/// per change. A user is online while a session of theirs is authenticated here; their status
/// is their latest choice (SET_PRESENCE); a change reaches the sessions of their online
/// followers (users sharing a live conversation with them) only when what those see changes,
/// and their own sessions when their own view changes.
extension NodeEngine {
    /// A session of `auth.user` authenticated: the device counts as connected, and once the
    /// users they follow are known the session is sent their presence and its user's own.
    func presenceSessionStarted(_ session: NodeSession, as auth: NodeSession.Auth) {
        let transition = presenceTable.withLockedValue { t in
            t.connect(auth.user, device: auth.device, at: presenceClock(), now: .now())
        }
        noteLastSeen(transition)
        relayPresence(transition)
        reportToOtherNodes(transition)
        Task { [self] in await loadFollowees(of: auth.user, for: session) }
    }

    /// A session of `user` on `device` ended (already out of the registry).
    func presenceSessionEnded(_ user: UserID, device: String) {
        let transition = presenceTable.withLockedValue { t in
            t.disconnect(user, device: device, at: presenceClock(), now: .now())
        }
        noteLastSeen(transition)
        relayPresence(transition)
        reportToOtherNodes(transition)
    }

    /// SET_PRESENCE: `user` chose `status`.
    func choosePresence(_ status: PresenceStatus, of user: UserID) {
        let transition = presenceTable.withLockedValue { t in
            t.choose(status, of: user, at: presenceClock(), now: .now())
        }
        noteLastSeen(transition)
        relayPresence(transition)
        reportToOtherNodes(transition)
    }

    /// What `viewer` sees of `user` now (nil: never seen by this node).
    func presence(of user: UserID, as viewer: UserID) -> Presence? {
        presenceTable.withLockedValue { $0.presence(of: user, as: viewer) }
    }

    /// New conversations and participants in committed feed entries: an online user now
    /// sharing a conversation with someone follows them, and is sent their presence.
    func followNewParticipants(_ changes: [FeedChange]) {
        for change in changes {
            let others: Set<UserID>
            // The kinds looked for carry no per-viewer statuses: no viewer's view is built.
            switch change.change.eventSharedByViewers {
            case .conversationCreated(let c): others = c.participants
            case .participantsChanged(let p): others = p.added
            default: continue
            }
            let sessions = registry.sessions(of: change.user)
            guard !sessions.isEmpty else { continue }
            let (added, known) = presenceTable.withLockedValue { t -> ([UserID], [PresenceChanged]) in
                let added = t.follow(change.user, others)
                return (
                    added,
                    added.compactMap { other in
                        t.presence(of: other, as: change.user).map { PresenceChanged(user: other, presence: $0) }
                    }
                )
            }
            for update in known {
                for session in sessions { session.enqueue(.ephemeral(Change(seq: 0, event: .presenceChanged(update)))) }
            }
            if !added.isEmpty { sendIdentities(of: added, to: change.user) }
        }
    }

    /// `follower` now follows `followed` (explicitly or by a shared conversation) or no longer
    /// does: the presence fan-out learns it, and the follower's sessions get the followed user's
    /// presence at once.
    func presenceFollowChanged(_ followed: UserID, by follower: UserID, following: Bool) {
        let known = presenceTable.withLockedValue { t -> PresenceChanged? in
            guard following else {
                t.unfollow(follower, followed)
                return nil
            }
            guard !t.follow(follower, [followed]).isEmpty else { return nil }
            return t.presence(of: followed, as: follower).map { PresenceChanged(user: followed, presence: $0) }
        }
        guard let known else { return }
        for session in registry.sessions(of: follower) {
            session.enqueue(.ephemeral(Change(seq: 0, event: .presenceChanged(known))))
        }
    }

    /// The identities of users `user` newly shares a conversation with, to `user`'s live
    /// sessions as seq 0 `identity-changed` (SPEC §6.4: the device learns a new co-member's
    /// identity at once; one read of those identities, nothing stored).
    private func sendIdentities(of users: [UserID], to user: UserID) {
        Task { [self] in
            guard let identities = try? await store.read({ r in try r.identities(of: users) }), !identities.isEmpty
            else { return }
            let sessions = registry.sessions(of: user)
            for (other, identity) in identities.sorted(by: { $0.key < $1.key }) {
                let change = Change(
                    seq: 0,
                    event: .identityChanged(
                        IdentityChange(
                            user: other, identity: .init(values: identity.values, metadata: identity.metadata))))
                for session in sessions { session.enqueue(.ephemeral(change)) }
            }
        }
    }

    /// Reads whom `user` follows (users sharing a live conversation with them), registers it,
    /// and sends `session` the presence of each of them this node knows and the user's own.
    private func loadFollowees(of user: UserID, for session: NodeSession) async {
        // With them, when those the node has not seen since it started were last seen (kept
        // across restarts).
        guard
            let loaded = try? await store.read({ r -> (Set<UserID>, [UserID: Timestamp]) in
                let audience = try r.followedUsers(of: user)
                return (audience, try r.lastSeen(of: audience))
            })
        else { return }
        let (audience, seen) = loaded
        guard session.isOpen else { return }
        let updates = presenceTable.withLockedValue { t -> [PresenceChanged] in
            t.remember(lastSeen: seen)
            _ = t.follow(user, audience)
            return ([user] + t.followees(of: user).sorted()).compactMap { other in
                t.presence(of: other, as: user).map { PresenceChanged(user: other, presence: $0) }
            }
        }
        for update in updates { session.enqueue(.ephemeral(Change(seq: 0, event: .presenceChanged(update)))) }
    }

    /// Sends what `transition` moved: the user's own view to their sessions, what others see
    /// to the sessions of their online followers.
    func relayPresence(_ transition: PresenceTransition) {
        guard transition.ownChanged || transition.visibleChanged else { return }
        let user = transition.user
        let (own, visible, followers) = presenceTable.withLockedValue { t in
            (t.presence(of: user, as: user), t.presence(of: user, as: nil), t.followers[user] ?? [])
        }
        if transition.ownChanged, let own {
            relayLocally(
                Change(seq: 0, event: .presenceChanged(PresenceChanged(user: user, presence: own))), to: [user],
                except: nil)
        }
        if transition.visibleChanged, let visible, !followers.isEmpty {
            presenceCounts.visibleChanges.wrappingIncrement(ordering: .relaxed)
            presenceCounts.followerUpdates.wrappingIncrement(by: followers.count, ordering: .relaxed)
            relayLocally(
                Change(seq: 0, event: .presenceChanged(PresenceChanged(user: user, presence: visible))),
                to: followers, except: nil)
        }
    }

    /// Notes when the transition's user was last seen, if they went offline (written in a batch).
    func noteLastSeen(_ transition: PresenceTransition) {
        if let time = transition.lastSeenAt { lastSeen.note(transition.user, at: time) }
    }

    /// The next HLC reading for a presence report (the clock cannot fail in practice: a failure
    /// keeps the last reading, which only makes the report lose a tie).
    fileprivate func presenceClock() -> HLCTimestamp {
        (try? nextHLC()) ?? clock.withLockedValue { $0.last }
    }
}

/// Counts of presence work since the node started (for `lamina-bench presence` and metrics).
public final class PresenceCounts: Sendable {
    /// Changes of what others see of a user that had online followers here.
    public let visibleChanges = ManagedAtomic(0)
    /// `presence-changed` updates addressed to online followers (one per follower, whatever
    /// their number of sessions).
    public let followerUpdates = ManagedAtomic(0)

    init() {}
}

extension NodeEngine {
    /// The presence of the users `user` follows (and their own) that this node knows, limited to
    /// `named` when given (Client API `Presence.sync`).
    func presenceOfFollowed(by user: UserID, among named: Set<UserID>?) -> [PresenceChanged] {
        presenceTable.withLockedValue { t in
            var users = t.followees(of: user)
            users.insert(user)
            if let named { users.formIntersection(named) }
            return users.sorted().compactMap { other in
                t.presence(of: other, as: user).map { PresenceChanged(user: other, presence: $0) }
            }
        }
    }
}

/// Presence across nodes (SPEC §6.6): each node reports, per user, whether it holds devices of
/// theirs and the latest choice it knows, to its peers (PEER_PRESENCE on the peer link) and to
/// the nodes sharing its PostgreSQL database (a NOTIFY); a receiver merges the report into the
/// user's ``PresenceBoard`` and relays what moved to its own sessions. Nothing is stored.
extension NodeEngine {
    /// Registers `send`, which carries reports to one other node (a peer link) or to all nodes
    /// of the shared store; it is given every later report until removed.
    func addPresenceSender(_ key: ObjectIdentifier, _ send: @escaping @Sendable ([PeerPresence.Entry]) -> Void) {
        presenceSenders.withLockedValue { $0[key] = send }
    }

    func removePresenceSender(_ key: ObjectIdentifier) {
        _ = presenceSenders.withLockedValue { $0.removeValue(forKey: key) }
    }

    /// This node's report of every user it has one of, in frames' worth of entries.
    func presenceReports() -> [[PeerPresence.Entry]] {
        let entries = presenceTable.withLockedValue { t in
            t.localReports.map { Self.entry($0.user, $0.report) }
        }
        return stride(from: 0, to: entries.count, by: PeerPresence.maxEntries).map {
            Array(entries[$0..<min($0 + PeerPresence.maxEntries, entries.count)])
        }
    }

    /// Reports of another node: merged, and what moved relayed to this node's sessions.
    func applyPresenceReports(_ entries: [PeerPresence.Entry], from node: NodeID) {
        guard node != configuration.nodeID else { return }
        let now = Timestamp.now()
        let transitions = presenceTable.withLockedValue { t in
            entries.map { e in
                t.apply(
                    PresenceReport(node: node, devices: Int(e.devices), choice: e.choice, at: e.at), of: e.user,
                    now: now)
            }
        }
        for transition in transitions {
            // Nodes sharing the store: the node whose devices left writes the time.
            if !store.isShared { noteLastSeen(transition) }
            relayPresence(transition)
        }
    }

    /// Another node is no longer heard from: its reports are dropped (its users' devices there
    /// no longer count), and what moved is relayed.
    func forgetPresenceReports(of node: NodeID) {
        let transitions = presenceTable.withLockedValue { t in t.forget(node, now: .now()) }
        for transition in transitions {
            noteLastSeen(transition)
            relayPresence(transition)
        }
    }

    /// Sends this node's new report of the transition's user to the other nodes, when it moved
    /// in a way they must learn.
    fileprivate func reportToOtherNodes(_ transition: PresenceTransition) {
        guard transition.reportChanged else { return }
        let senders = presenceSenders.withLockedValue { Array($0.values) }
        guard !senders.isEmpty,
            let report = presenceTable.withLockedValue({ $0.localReport(of: transition.user) })
        else { return }
        let entry = Self.entry(transition.user, report)
        for send in senders { send([entry]) }
    }

    static func entry(_ user: UserID, _ report: PresenceReport) -> PeerPresence.Entry {
        PeerPresence.Entry(
            user: user, devices: UInt32(clamping: report.devices), choice: report.choice, at: report.at)
    }
}
