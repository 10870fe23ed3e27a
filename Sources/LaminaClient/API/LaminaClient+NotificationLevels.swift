import Foundation
import LaminaMerge
import LaminaModel
import LaminaWire

extension LaminaClient {
    /// Sets how much of `conversation` notifies this user on all their devices (SPEC §6.10): its
    /// pushes and whether it counts in the badge. `.all` every message (the default), `.mentions`
    /// only messages that mention the user, `.none` nothing; `until` ends the level (then it is
    /// `.all` again), nil keeps it. Applied to the local store at once
    /// (``StoredConversation/notificationLevel``) and queued for the node like every other
    /// conversation command, so it works offline. Needs a conversation the node knows (one
    /// created on this device reaches the node with its first message). A level the node refuses
    /// (e.g. `forbidden` from a node without notification levels) goes back to what it was here,
    /// told as an update of the conversation, and the refusal is reported as every refused
    /// command is (`SyncEvent.commandFailed`, `LaminaClientDelegate.didFailOperation`, kind
    /// `conversation.set-notification-level`).
    public func setNotificationLevel(_ level: NotificationLevel, for conversation: ConversationID, until: Date? = nil)
        throws(ClientError)
    {
        let stored = try existingConversation(conversation)
        guard try nodeKnows(stored) else {
            throw ClientError(
                .notAllowed, "conversation \(stored.id) has not reached the node yet: send its first message first")
        }
        let end = until.map(Timestamp.init)
        let frame = Frame.setNotificationLevel(
            SetNotificationLevel(requestID: UUID(), conversationID: stored.id, level: level, until: end))
        try store.setNotificationLevelLocally(
            level, until: end, of: stored.id, command: OutboxEncoder.entry(for: frame, createdAt: environment.now()))
        outboxDidChange()
    }
}

extension QueryPredicate {
    /// Messages that mention `user` (the messages query's `mentions` property, SPEC §3.17).
    public static func mentioning(_ user: UserID) -> QueryPredicate {
        .compare(MessageProperty.mentions, .contains, .user(user))
    }
}

extension LaminaClient {
    /// The query of the messages held here that mention this user, newest first.
    public var messagesMentioningMe: Query<StoredMessage> {
        Query(
            predicate: .mentioning(user),
            sortDescriptors: [QuerySortDescriptor(MessageProperty.position, ascending: false)])
    }
}
