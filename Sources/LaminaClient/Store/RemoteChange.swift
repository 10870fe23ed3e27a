import LaminaMerge
import LaminaModel

/// One change from the node's change feed, as the sync engine hands it to the store.
/// Applying a change is idempotent: applying it again changes nothing and reports nothing.
/// A message addressed to a merged-away conversation lands in the survivor; other changes
/// addressed to a merged-away conversation are stale and ignored.
public enum RemoteChange: Hashable, Sendable {
    /// A conversation as the node has it now (created or updated). Marks it synced.
    case conversation(Conversation)
    /// A conversation was deleted.
    case conversationDeleted(ConversationID)
    /// A message as the node has it now. Recipient statuses merge by maximum; a message
    /// this device sent gets its position and sent-at time this way (the node's ACK).
    case message(Message, receivedAt: Timestamp)
    /// A message was deleted.
    case messageDeleted(MessageID)
    /// A sent message's parts were replaced (an edit: kind 11, at `editedAt`; or Server API
    /// part updates): `parts` is the whole new list. A message not in the store is left alone
    /// (it arrives with these parts).
    case messageParts(MessageID, parts: [MessagePart], editedAt: Timestamp? = nil)
    /// A user's reaction `key` on a message appeared (`present`) or went away (SPEC §6.9). A
    /// message not in the store is left alone (history brings its reactions with it).
    case reaction(MessageID, user: UserID, key: String, present: Bool)
    /// A message's reactions as a history answer or snapshot has them: they replace the
    /// ones held (SPEC §6.9).
    case reactionsReplaced(MessageID, [String: Set<UserID>])
    /// The messages of a conversation positioned before `below` were deleted; the
    /// conversation and later messages stay.
    case messagesDeleted(ConversationID, below: MessagePosition)
    /// One participant's status for one message; it only ever moves up.
    case recipientStatus(MessageID, user: UserID, status: RecipientStatus)
    /// One participant's status for every message of others in a conversation positioned
    /// at or before `upTo` (a delivery receipt or mark-all-read); it only ever moves up.
    case statusUpTo(ConversationID, user: UserID, status: RecipientStatus, upTo: MessagePosition)
    /// A metadata key path was set (a value) or deleted (nil).
    case metadata(ConversationID, path: MetadataKeyPath, value: MetadataValue?)
    /// Participants were added and/or removed. A change to a distinct conversation's
    /// participant set makes it non-distinct.
    case participants(ConversationID, added: Set<UserID>, removed: Set<UserID>)
    /// The node resolved distinct conversation `from` into `into`: messages and the app's
    /// object move to the survivor, and `from` is remembered as merged into it.
    case distinctMerge(from: ConversationID, into: ConversationID)
    /// The node's counts of a conversation for the local user and its flags that change after
    /// creation (SPEC §6.4 `conversation-updated`): they replace the counts kept here.
    case counts(
        ConversationID, NodeCounts, isDistinct: Bool, deliveryReceiptsEnabled: Bool, readReceiptsEnabled: Bool)
    /// A message entered the user's feed (a `message-created` with a seq): the counts kept
    /// here grow by it (apply after the message itself). Each feed entry is applied once.
    case messageCounted(ConversationID, MessageID)
    /// The local user's read of one message entered the feed (`message-status-changed` with
    /// a seq, the local user, read): the unread count kept here falls by it unless this device
    /// already counted the read (apply before the status itself).
    case readCounted(ConversationID, MessageID)
    /// A user's identity was set (or deleted: nil) through the Server API.
    case identity(UserID, UserIdentity?)
    /// The local user blocked (`blocking`) or unblocked a user (from any of their devices or
    /// the Server API).
    case blockList(UserID, blocking: Bool)
    /// The local user followed (`following`) or unfollowed a user explicitly (SPEC §6.7).
    case following(UserID, following: Bool)
    /// The local user's notification level of a conversation (SPEC §6.10), until a time or not.
    case notificationLevel(ConversationID, NotificationLevel, until: Timestamp?)
    /// A channel the local user joined (SPEC §6.8 `channel-created`).
    case channel(ChatChannel)
    /// The local user joined or left a channel (`channel-membership-changed` in their feed).
    case channelMembership(ChannelID, isMember: Bool)
    /// A channel was deleted: it and its messages go.
    case channelDeleted(ChannelID)
    /// A channel's message (live or read from its log); the channel's cursor moves over it
    /// when no message before it is missing.
    case channelMessage(ChannelMessage)
}
