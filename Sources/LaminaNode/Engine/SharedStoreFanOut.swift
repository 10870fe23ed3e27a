import Foundation
import LaminaModel
import LaminaStore
import LaminaWire
import NIOConcurrencyHelpers

/// Fan-out across nodes that share one PostgreSQL database (POSTGRES.md, "Several nodes").
/// Another node's commit arrives as (user, feed head) pairs; each live session of those
/// users here reads its feed from what it sent, as it does for a gap in local commits. When
/// the listening connection is (re)established every live session does that read, so a
/// notification missed while it was down loses nothing. Typing crosses nodes as an
/// ephemeral notification, relayed here to the local sessions only. Another node's commit (a
/// feed notification or a channel notice) also wakes this node's peer links: the operations it
/// logged are in the shared log, and a node of the store without a peer link of its own relies
/// on the ones that have one to ship them.
extension NodeEngine {
    /// Starts listening when the store is shared (PostgreSQL); nothing on SQLite.
    func startSharedStoreFanOut() {
        guard store.isShared else { return }
        store.listen(
            NotificationHandlers(
                feeds: { [weak self] heads in
                    self?.replicationSignal.notify()
                    self?.wakeSessions(heads)
                },
                ephemeral: { [weak self] body in self?.relayRemoteEphemeral(body) },
                connected: { [weak self] in
                    guard let self else { return }
                    catchUpAllSessions()
                    channelAudience.forgetAll()
                    announcePresenceToSharedStore()
                    store.registerPresence { [registry] in
                        registry.all().compactMap { session in
                            session.state.withLockedValue { $0.auth.map { (user: $0.user, device: $0.device) } }
                        }
                    }
                },
                entries: { [weak self] notification in
                    self?.replicationSignal.notify()
                    self?.deliverRemote(notification)
                }))
    }

    /// A session authenticated as `user` on `device` (shared store: the device is live here,
    /// for the other nodes' push decisions).
    func deviceLive(_ user: UserID, device: String) {
        guard store.isShared else { return }
        store.setPresence([(user, device)], live: true)
    }

    /// A session of `user` on `device` ended (already out of the registry): unless another
    /// session of that device is open here, the device is no longer live on this node.
    func deviceGone(_ user: UserID, device: String) {
        guard store.isShared else { return }
        store.setPresence([(user, device)], live: false) { [registry] user, device in
            registry.hasLiveSession(of: user, device: device)
        }
    }

    /// Another node committed feed entries up to these heads.
    func wakeSessions(_ heads: [(UserID, UInt64)]) {
        for (user, head) in heads {
            for session in registry.sessions(of: user) { session.wake(through: head) }
        }
    }

    /// Another node's commit, with the entries it carried: each live session of their users
    /// gets them as a local commit's (``NodeSession/publish(_:)``: sent at once when they
    /// continue exactly where the session is, else through its inbox, where a gap is read from
    /// the store). Heads named without their entries (too big, past the notification's budget,
    /// or results without entries) wake a read, after the entries. An event that does not
    /// decode is read as well.
    func deliverRemote(_ notification: FeedNotification) {
        var wakes = notification.heads.map { ($0.user, $0.head) }
        // Events are decoded only for users with a session here, once each.
        var decoded: [Int: SharedChangeEvent?] = [:]
        var byUser: [UserID: (sessions: SessionRegistry.Sessions, changes: [Change])] = [:]
        var order: [UserID] = []
        for entry in notification.entries {
            if byUser[entry.user] == nil {
                byUser[entry.user] = (registry.sessions(of: entry.user), [])
                order.append(entry.user)
            }
            guard byUser[entry.user]?.sessions.isEmpty == false else { continue }
            if decoded[entry.event] == nil {
                decoded[entry.event] = (try? FeedCoding.decodeEvent(notification.events[entry.event]))
                    .flatMap { try? SharedChangeEvent($0) }
            }
            guard let event = decoded[entry.event] ?? nil else {
                wakes.append((entry.user, entry.seq))
                continue
            }
            byUser[entry.user]?.changes.append(Change(seq: entry.seq, shared: event))
        }
        for user in order {
            guard let found = byUser[user], !found.changes.isEmpty else { continue }
            for session in found.sessions { session.publish(found.changes) }
        }
        wakeSessions(wakes)
    }

    /// Every live session reads its feed from what it sent.
    func catchUpAllSessions() {
        for session in registry.all() { session.wake(through: nil) }
    }

    /// Sends a typing change to the other nodes, for their sessions of `users`.
    func relayToOtherNodes(_ typing: TypingChanged, to users: Set<UserID>) {
        guard store.isShared, !users.isEmpty else { return }
        let head = "typing\n\(typing.conversationID.uuid.uuidString)\n\(typing.state.rawValue)\n\(typing.user.rawValue)"
        var body = head
        // Split by recipients so each notification stays under PostgreSQL's payload limit.
        for user in users.sorted() {
            let line = "\n\(user.rawValue)"
            if body.utf8.count + line.utf8.count > NotificationChannel.maxPayloadBytes - 32 {
                store.sendEphemeral(body)
                body = head
            }
            body += line
        }
        if body.utf8.count > head.utf8.count { store.sendEphemeral(body) }
    }

    /// An ephemeral event from another node: relayed to this node's sessions only.
    func relayRemoteEphemeral(_ body: String) {
        let lines = body.split(separator: "\n", omittingEmptySubsequences: false)
        if lines.first == "presence" { return receiveSharedPresence(lines) }
        if lines.first == "channel" { return receiveSharedChannel(lines) }
        guard lines.count >= 5, lines[0] == "typing", let uuid = UUID(uuidString: String(lines[1])),
            let raw = UInt8(lines[2]), let state = TypingState(rawValue: raw), let user = try? UserID(String(lines[3]))
        else { return }
        let recipients = Set(lines.dropFirst(4).compactMap { try? UserID(String($0)) })
        let change = Change(
            seq: 0, event: .typing(TypingChanged(conversationID: ConversationID(uuid: uuid), user: user, state: state)))
        relayLocally(change, to: recipients, except: nil)
    }
}
