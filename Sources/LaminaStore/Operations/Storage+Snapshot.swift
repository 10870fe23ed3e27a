import Foundation
import LaminaMerge
import LaminaModel

/// One conversation of a snapshot (SPEC §6.3): the conversation as it is, its latest message
/// as the user sees it, and the user's counts.
package struct SnapshotConversation: Sendable {
    package var conversation: Conversation
    package var lastMessage: Message?
    package var counts: ConversationCounts
}

/// A user's conversations and the feed head they were read at, from one read transaction:
/// a device that applies the snapshot and then the feed after `head` misses nothing and
/// counts nothing twice.
package struct FeedSnapshot: Sendable {
    package var head: UInt64
    package var conversations: [SnapshotConversation]
    /// The identities of the user and of everyone sharing a live conversation with them.
    package var identities: [UserID: StoredIdentity] = [:]
    /// The users the user blocks.
    package var blocked: [UserID] = []
    /// The notification levels the user set, by conversation (SPEC §6.10).
    package var notificationLevels: [ConversationID: NotificationSetting] = [:]
}

extension StorageReader {
    /// The snapshot of `user`'s conversations (those they take part in now), oldest first.
    /// Costs a few index reads per conversation (`counts`), none per message.
    package func snapshot(of user: UserID) throws(StorageError) -> FeedSnapshot {
        let head = try feedHead(of: user)
        let blocked = Set(try blocks(of: user))
        var out: [SnapshotConversation] = []
        for stored in try conversations(of: user) {
            let id = stored.conversation.id
            let counts = try counts(of: id, for: user, blocked: blocked)
            var last: Message?
            if let lastID = counts.lastMessage { last = try message(lastID, as: user) }
            out.append(SnapshotConversation(conversation: stored.conversation, lastMessage: last, counts: counts))
        }
        return FeedSnapshot(
            head: head, conversations: out, identities: try identities(of: followedUsers(of: user)),
            blocked: blocked.sorted(), notificationLevels: try notificationSettings(of: user))
    }

    /// A message as `viewer` is shown it (statuses as `history` reports them).
    package func message(_ id: MessageID, as viewer: UserID) throws(StorageError) -> Message? {
        guard
            let row = try db.row(
                "SELECT \(MessageStatuses.columns()) FROM messages WHERE id = ?", [Columns.blob(id.uuid)])
        else { return nil }
        var statuses = MessageStatuses(reader: self, viewer: viewer)
        return try statuses.storedMessage(row).message
    }
}
