import Foundation
import LaminaModel
import LaminaStore
import LaminaWire

/// `conversation-updated` (SPEC §6.4): each user's own counts, appended to their feed only by
/// the rarer changes a device cannot count from what it receives anyway. A new message and a
/// user's own read of one message are counted by the device itself (§6.4, "Counts"), so a
/// send writes no extra row and reads nothing to keep counts right.
extension CommandContext {
    /// Appends `conversation-updated` with each user's counts of `id` to the feed of each of
    /// `users`, after the change that moved them (same transaction, later seq).
    /// `blocked`: the user's block list to count with (the engine's when nil; a block list
    /// change counts with the list as it is after the change).
    mutating func emitCounts(of id: ConversationID, to users: Set<UserID>, blocked: Set<UserID>? = nil) throws {
        guard !users.isEmpty, let header = try tx.read.conversationHeader(id), header.isLive else { return }
        for u in users.sorted() {
            let counts = try tx.read.counts(of: id, for: u, blocked: blocked ?? engine.blockLists.blocked(by: u))
            let event = ConversationUpdated(
                conversationID: id, isDistinct: header.isDistinct,
                deliveryReceiptsEnabled: header.deliveryReceiptsEnabled,
                readReceiptsEnabled: header.readReceiptsEnabled,
                messageCount: UInt64(counts.messages), unreadCount: UInt64(counts.unread),
                lastMessageID: counts.lastMessage)
            try emit(.conversationUpdated(event), to: [u], conversation: id)
        }
    }
}

extension FeedSnapshot {
    /// The snapshot as changes with seq 0: per conversation `conversation-created`, its latest
    /// message (`message-created`) and `conversation-updated` with the user's counts; then
    /// `identity-changed` for each identity of the user and those sharing a conversation with
    /// them, and `block-list-changed` for each user they block.
    func changes() -> [Change] {
        var out: [Change] = []
        out.reserveCapacity(conversations.count * 3)
        for c in conversations {
            out.append(Change(seq: 0, event: .conversationCreated(c.conversation)))
            if let last = c.lastMessage { out.append(Change(seq: 0, event: .messageCreated(last))) }
            out.append(
                Change(
                    seq: 0,
                    event: .conversationUpdated(
                        ConversationUpdated(
                            conversationID: c.conversation.id, isDistinct: c.conversation.isDistinct,
                            deliveryReceiptsEnabled: c.conversation.deliveryReceiptsEnabled,
                            readReceiptsEnabled: c.conversation.readReceiptsEnabled,
                            messageCount: UInt64(c.counts.messages), unreadCount: UInt64(c.counts.unread),
                            lastMessageID: c.counts.lastMessage))))
        }
        // Then the identities the user's devices know from the feed (kind 12) and the block list (kind 13).
        for (user, identity) in identities.sorted(by: { $0.key < $1.key }) {
            out.append(
                Change(
                    seq: 0,
                    event: .identityChanged(
                        IdentityChange(
                            user: user, identity: .init(values: identity.values, metadata: identity.metadata)))))
        }
        for user in blocked {
            out.append(Change(seq: 0, event: .blockListChanged(BlockListChanged(user: user, blocking: true))))
        }
        // Then the notification levels the user set (kind 22, SPEC §6.10).
        for (id, setting) in notificationLevels.sorted(by: { $0.key.uuid.uuidString < $1.key.uuid.uuidString }) {
            guard let write = setting.current else { continue }
            out.append(
                Change(
                    seq: 0,
                    event: .notificationLevelChanged(
                        NotificationLevelChanged(
                            conversationID: id, level: write.level,
                            until: write.until.map { Timestamp(millisecondsSince1970: Int64(clamping: $0)) }))))
        }
        return out
    }
}
