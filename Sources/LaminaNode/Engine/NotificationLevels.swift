import Foundation
import LaminaMerge
import LaminaModel
import LaminaStore
import LaminaWire

/// Notification levels (SPEC §6.10): how much of a conversation notifies a user — every
/// message, only those that mention them, or none — until a time or with no end. The user's
/// own state: a last-writer-wins register per user and conversation (`NotificationSetting`),
/// told to all their devices (`notification-level-changed`, kind 22, in their feed only) and to
/// the peers (kind 73). The push outbox and the badge obey it.
extension NodeEngine {
    /// Sets `user`'s level of the conversation `named` (an alias or merged-away id resolved):
    /// the one rule for SET_NOTIFICATION_LEVEL, the Server API and the Client API. Throws
    /// `not-found` for no live conversation, `not-a-participant` / `removed-participant` when
    /// the user is not a member of it. Returns the conversation's id.
    @discardableResult
    func setNotificationLevel(
        _ level: NotificationLevel, until: Timestamp?, of user: UserID, in named: ConversationID
    ) async throws -> ConversationID {
        let (id, changes) = try await store.write { [self] tx -> (ConversationID, [FeedChange]) in
            var context = CommandContext(tx: tx, user: user, engine: self, now: .now())
            let id = try context.member(of: named).id
            let change = NotificationLevelChange(user: user, conversationID: id, level: level, until: until)
            let hlc = try nextHLC()
            // A local write reads later than anything this node holds: it always wins here.
            guard try tx.applyNotificationLevel(change.write(at: hlc), of: user, in: id) else {
                throw WireError(.internalError, "the node's clock reads \(hlc), not later than the level it holds")
            }
            try context.emitNotificationLevel(change)
            _ = try tx.appendLocalOperation(
                try ReplicationLogCoding.userState(.notificationLevel(change)), origin: configuration.nodeID, hlc: hlc)
            return (id, context.changes)
        }
        publish(changes)
        replicationSignal.notify()
        return id
    }

    /// `user`'s setting of the conversation `named` (resolved as a command resolves it), for the
    /// Server API and the Client API; `not-found` / `not-a-participant` as for setting it.
    func notificationSetting(of user: UserID, in named: ConversationID) async throws -> (
        ConversationID, NotificationSetting
    ) {
        // A read, resolved and checked as `CommandContext.member(of:)` does for a command.
        try await store.read { r in
            var found = try r.conversationHeader(named)
            if found?.isLive != true, let target = try r.resolvedConversation(named) {
                found = try r.conversationHeader(target)
            }
            guard let header = found, header.isLive else { throw WireError(.notFound, "no conversation \(named)") }
            guard let state = header.states[user] else {
                throw WireError(.notAParticipant, "\(user) is not a participant of \(header.id)")
            }
            guard state.isMember else { throw WireError(.removedParticipant, "\(user) was removed from \(header.id)") }
            return (header.id, try r.notificationSetting(of: user, in: header.id))
        }
    }
}

extension CommandContext {
    /// `notification-level-changed` in the user's own feed (a local or a replicated change).
    mutating func emitNotificationLevel(_ change: NotificationLevelChange) throws {
        try emit(
            .notificationLevelChanged(
                NotificationLevelChanged(
                    conversationID: change.conversationID, level: change.level, until: change.until)),
            to: [change.user], conversation: change.conversationID)
    }

    /// A peer's level change, by `NotificationSetting`'s rule at the operation's reading: when
    /// it wins, the user's devices here learn it.
    mutating func applyNotificationLevel(_ change: NotificationLevelChange, at hlc: HLCTimestamp) throws {
        guard try tx.applyNotificationLevel(change.write(at: hlc), of: change.user, in: change.conversationID) else {
            return
        }
        try emitNotificationLevel(change)
    }
}

extension NodeSession {
    /// SET_NOTIFICATION_LEVEL (SPEC §6.10): once the commands before it are answered, the
    /// session's user's level of the conversation is set, and the node answers ACK (with the
    /// conversation's id), or ERROR (`not-found`, `not-a-participant`, `removed-participant`).
    func setNotificationLevel(_ request: SetNotificationLevel, as auth: Auth) async {
        let id: ConversationID
        do {
            id = try await engine.setNotificationLevel(
                request.level, until: request.until, of: auth.user, in: request.conversationID)
        } catch {
            return reply(EngineErrors.wire(error), requestID: request.requestID)
        }
        send(.ack(Ack(requestID: request.requestID, conversationID: id)))
    }
}

extension PushOutbox {
    /// The recipients of `message` whose level of its conversation lets it notify them at
    /// `now` (SPEC §6.10): `none` never, `mentions` only when the message mentions them.
    static func notified(
        _ recipients: Set<UserID>, by message: Message, in tx: StorageTransaction, at now: Timestamp
    ) throws -> Set<UserID> {
        let settings = try tx.read.notificationSettings(in: message.conversationID)
        guard !settings.isEmpty else { return recipients }
        let ms = UInt64(clamping: now.millisecondsSince1970)
        return recipients.filter { user in
            settings[user]?.notifies(mentioned: message.mentions.contains(user), now: ms) ?? true
        }
    }
}
