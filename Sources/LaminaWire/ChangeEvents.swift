import Foundation
import LaminaModel
import NIOCore

/// What a change-feed entry reports (SPEC §6.4). Each case's number is its `kind` byte.
public enum ChangeEvent: Hashable, Sendable {
    /// kind 0: a conversation the user takes part in now exists (or the user was added).
    case conversationCreated(Conversation)
    /// kind 1: scalar properties and counts of a conversation changed.
    case conversationUpdated(ConversationUpdated)
    /// kind 2
    case participantsChanged(ParticipantsChanged)
    /// kind 3: a metadata key was set (value present) or deleted (value absent).
    case metadataChanged(MetadataChanged)
    /// kind 4
    case conversationDeleted(ConversationDeleted)
    /// kind 5: a distinct conversation was merged into another; `from` is now `to`.
    case identifierChanged(IdentifierChanged)
    /// kind 6, or kind 21 `thread-message` for a message with `replyTo` or `thread` (replies
    /// feature, SPEC §6.4): the message and then its thread fields (``Message/hasThreadFields``).
    case messageCreated(Message)
    /// kind 7: one participant's recipient status moved up.
    case messageStatusChanged(MessageStatusChanged)
    /// kind 8
    case messageDeleted(MessageDeleted)
    /// kind 9: someone else's typing indicator (never in the stored feed: seq 0).
    case typing(TypingChanged)
    /// kind 10: one participant's status moved up for every message of others positioned
    /// at or before a position (a delivery receipt or mark-all-read as one range).
    case statusUpTo(StatusUpTo)
    /// kind 11: a sent message's parts were replaced (Server API part updates); `parts` is
    /// the whole new list. Only to sessions with the `partUpdates` feature.
    case messagePartsChanged(MessagePartsChanged)
    /// kind 12: a user's identity (Server API) was set (`identity` present) or deleted, for the
    /// user and everyone sharing a conversation with them. Only to sessions with the
    /// `identities` feature.
    case identityChanged(IdentityChange)
    /// kind 13: the user blocked (`blocking`) or unblocked `user`; to the blocker only. Only
    /// to sessions with the `blockLists` feature.
    case blockListChanged(BlockListChanged)
    /// kind 14: a followed user's presence (or the user's own, to their other devices), with
    /// seq 0: never in the stored feed. Only to sessions with the `presence` feature (§6.6).
    case presenceChanged(PresenceChanged)
    /// kind 15: the user followed (`following`) or unfollowed `user`; to the follower only.
    /// Only to sessions with the `following` feature (§6.7).
    case followChanged(FollowChanged)
    /// kind 16: a channel the user is a member of (created by them, or joined): sent before
    /// the `channel-membership-changed` that makes them a member (SPEC §6.8). Only to sessions
    /// with the `channels` feature, as kinds 17 to 19.
    case channelCreated(ChatChannel)
    /// kind 17: a user joined or left a channel (in the feed of that user only).
    case channelMembershipChanged(ChannelMembershipChanged)
    /// kind 18: a channel's message, live to its members online and in FETCH_CHANNEL's answer,
    /// with seq 0: never in the stored feed (a member reads the channel's log by its own cursor).
    case channelMessage(ChannelMessage)
    /// kind 19: a channel was deleted (in the feed of each user who was a member).
    case channelDeleted(ChannelDeleted)
    /// kind 20: a user's reaction on a message appeared or went away (SPEC §6.9). Only to
    /// sessions with the `reactions` feature.
    case reactionsChanged(ReactionsChanged)
    /// kind 22: the user set their notification level of a conversation; to that user only.
    /// Only to sessions with the `notificationLevels` feature (§6.10).
    case notificationLevelChanged(NotificationLevelChanged)

    /// The event's `kind` byte.
    public var kind: UInt8 {
        switch self {
        case .conversationCreated: 0
        case .conversationUpdated: 1
        case .participantsChanged: 2
        case .metadataChanged: 3
        case .conversationDeleted: 4
        case .identifierChanged: 5
        case .messageCreated(let m): m.hasThreadFields ? 21 : 6
        case .messageStatusChanged: 7
        case .messageDeleted: 8
        case .typing: 9
        case .statusUpTo: 10
        case .messagePartsChanged: 11
        case .identityChanged: 12
        case .blockListChanged: 13
        case .presenceChanged: 14
        case .followChanged: 15
        case .channelCreated: 16
        case .channelMembershipChanged: 17
        case .channelMessage: 18
        case .channelDeleted: 19
        case .reactionsChanged: 20
        case .notificationLevelChanged: 22
        }
    }
}

/// ```
/// +----------------------+----------------+----------------+------------------+-----------------+-------------------+
/// | conversation id (16) | distinct(bool) | receipts (u8)  | messages(varint) | unread (varint) | last message (opt)|
/// +----------------------+----------------+----------------+------------------+-----------------+-------------------+
/// ```
public struct ConversationUpdated: Hashable, Sendable {
    public var conversationID: ConversationID
    public var isDistinct: Bool
    public var deliveryReceiptsEnabled: Bool
    public var readReceiptsEnabled: Bool
    /// Messages in the conversation, for this user.
    public var messageCount: UInt64
    /// Of those, unread by this user.
    public var unreadCount: UInt64
    public var lastMessageID: MessageID?

    public init(
        conversationID: ConversationID, isDistinct: Bool, deliveryReceiptsEnabled: Bool,
        readReceiptsEnabled: Bool? = nil, messageCount: UInt64, unreadCount: UInt64, lastMessageID: MessageID? = nil
    ) {
        self.conversationID = conversationID
        self.isDistinct = isDistinct
        self.deliveryReceiptsEnabled = deliveryReceiptsEnabled
        self.readReceiptsEnabled = readReceiptsEnabled ?? deliveryReceiptsEnabled
        self.messageCount = messageCount
        self.unreadCount = unreadCount
        self.lastMessageID = lastMessageID
    }
}

/// ```
/// +----------------------+------------------+--------------------+-----------+---------+
/// | conversation id (16) | added (user set) | removed (user set) | by (user) | at (HLC)|
/// +----------------------+------------------+--------------------+-----------+---------+
/// ```
public struct ParticipantsChanged: Hashable, Sendable {
    public var conversationID: ConversationID
    public var added: Set<UserID>
    public var removed: Set<UserID>
    public var by: UserID
    public var at: HLCTimestamp

    public init(conversationID: ConversationID, added: Set<UserID>, removed: Set<UserID>, by: UserID, at: HLCTimestamp)
    {
        self.conversationID = conversationID
        self.added = added
        self.removed = removed
        self.by = by
        self.at = at
    }
}

/// ```
/// +----------------------+----------+------------------+-----------+---------+
/// | conversation id (16) | key path | value (opt)      | by (user) | at (HLC)|
/// +----------------------+----------+------------------+-----------+---------+
/// ```
public struct MetadataChanged: Hashable, Sendable {
    public var conversationID: ConversationID
    public var keyPath: MetadataKeyPath
    /// The new value; nil when the key was deleted.
    public var value: MetadataValue?
    public var by: UserID
    public var at: HLCTimestamp

    public init(
        conversationID: ConversationID, keyPath: MetadataKeyPath, value: MetadataValue?, by: UserID, at: HLCTimestamp
    ) {
        self.conversationID = conversationID
        self.keyPath = keyPath
        self.value = value
        self.by = by
        self.at = at
    }
}

/// ```
/// +----------------------+-----------+------------------+-----------+
/// | conversation id (16) | mode (u8) | below (opt HLC)  | by (user) |
/// +----------------------+-----------+------------------+-----------+
/// ```
public struct ConversationDeleted: Hashable, Sendable {
    public var conversationID: ConversationID
    public var mode: DeletionMode
    /// Set when only messages before this position were deleted (the conversation stays).
    public var below: MessagePosition?
    public var by: UserID

    public init(conversationID: ConversationID, mode: DeletionMode, below: MessagePosition? = nil, by: UserID) {
        self.conversationID = conversationID
        self.mode = mode
        self.below = below
        self.by = by
    }
}

/// ```
/// +-----------+---------+
/// | from (16) | to (16) |
/// +-----------+---------+
/// ```
public struct IdentifierChanged: Hashable, Sendable {
    public var from: ConversationID
    public var to: ConversationID

    public init(from: ConversationID, to: ConversationID) {
        self.from = from
        self.to = to
    }
}

/// ```
/// +----------------------+-----------------+-------------+-------------+
/// | conversation id (16) | message id (16) | user        | status (i8) |
/// +----------------------+-----------------+-------------+-------------+
/// ```
public struct MessageStatusChanged: Hashable, Sendable {
    public var conversationID: ConversationID
    public var messageID: MessageID
    public var user: UserID
    public var status: RecipientStatus

    public init(conversationID: ConversationID, messageID: MessageID, user: UserID, status: RecipientStatus) {
        self.conversationID = conversationID
        self.messageID = messageID
        self.user = user
        self.status = status
    }
}

/// ```
/// +----------------------+-------------+-------------+-------------+
/// | conversation id (16) | user        | status (i8) | upTo (HLC)  |
/// +----------------------+-------------+-------------+-------------+
/// ```
/// `user`'s status is at least `status` for every message of the conversation that another
/// participant sent and that is positioned at or before `upTo` (statuses only move up).
public struct StatusUpTo: Hashable, Sendable {
    public var conversationID: ConversationID
    public var user: UserID
    public var status: RecipientStatus
    public var upTo: MessagePosition

    public init(conversationID: ConversationID, user: UserID, status: RecipientStatus, upTo: MessagePosition) {
        self.conversationID = conversationID
        self.user = user
        self.status = status
        self.upTo = upTo
    }
}

/// ```
/// +----------------------+-----------------+-----------+-----------+
/// | conversation id (16) | message id (16) | mode (u8) | by (user) |
/// +----------------------+-----------------+-----------+-----------+
/// ```
public struct MessageDeleted: Hashable, Sendable {
    public var conversationID: ConversationID
    public var messageID: MessageID
    public var mode: DeletionMode
    public var by: UserID

    public init(conversationID: ConversationID, messageID: MessageID, mode: DeletionMode, by: UserID) {
        self.conversationID = conversationID
        self.messageID = messageID
        self.mode = mode
        self.by = by
    }
}

/// ```
/// +----------------------+-----------------+-----------------------+-----------+---------+
/// | conversation id (16) | message id (16) | parts (count + parts) | by (user) | at (HLC)|
/// +----------------------+-----------------+-----------------------+-----------+---------+
/// ```
public struct MessagePartsChanged: Hashable, Sendable {
    public var conversationID: ConversationID
    public var messageID: MessageID
    public var parts: [MessagePart]
    public var by: UserID
    /// When the update was made; a later update of the same message wins.
    public var at: HLCTimestamp

    public init(
        conversationID: ConversationID, messageID: MessageID, parts: [MessagePart], by: UserID, at: HLCTimestamp
    ) {
        self.conversationID = conversationID
        self.messageID = messageID
        self.parts = parts
        self.by = by
        self.at = at
    }
}

/// ```
/// +----------------------+-------------+-------------+
/// | conversation id (16) | user        | state (u8)  |
/// +----------------------+-------------+-------------+
/// ```
public struct TypingChanged: Hashable, Sendable {
    public var conversationID: ConversationID
    public var user: UserID
    public var state: TypingState

    public init(conversationID: ConversationID, user: UserID, state: TypingState) {
        self.conversationID = conversationID
        self.user = user
        self.state = state
    }
}

// MARK: - Codec

extension ChangeEvent {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeInteger(kind, as: UInt8.self)
        switch self {
        case .conversationCreated(let c):
            try b.writeConversation(c)
        case .conversationUpdated(let u):
            b.writeID(u.conversationID)
            b.writeBool(u.isDistinct)
            b.writeReceipts(ReceiptSwitches(delivery: u.deliveryReceiptsEnabled, read: u.readReceiptsEnabled))
            b.writeVarint(u.messageCount)
            b.writeVarint(u.unreadCount)
            if let last = u.lastMessageID {
                b.writeInteger(1, as: UInt8.self)
                b.writeID(last)
            } else {
                b.writeInteger(0, as: UInt8.self)
            }
        case .participantsChanged(let p):
            b.writeID(p.conversationID)
            try b.writeUserSet(p.added)
            try b.writeUserSet(p.removed)
            try b.writeUserID(p.by)
            b.writeHLC(p.at)
        case .metadataChanged(let m):
            b.writeID(m.conversationID)
            try b.writeKeyPath(m.keyPath)
            if let value = m.value {
                b.writeInteger(1, as: UInt8.self)
                try b.writeMetadataValue(value, level: m.keyPath.components.count)
            } else {
                b.writeInteger(0, as: UInt8.self)
            }
            try b.writeUserID(m.by)
            b.writeHLC(m.at)
        case .conversationDeleted(let d):
            b.writeID(d.conversationID)
            b.writeInteger(d.mode.rawValue, as: UInt8.self)
            if let below = d.below {
                b.writeInteger(1, as: UInt8.self)
                b.writeHLC(below)
            } else {
                b.writeInteger(0, as: UInt8.self)
            }
            try b.writeUserID(d.by)
        case .identifierChanged(let i):
            b.writeID(i.from)
            b.writeID(i.to)
        case .messageCreated(let m):
            try b.writeMessage(m)
            if m.hasThreadFields { try b.writeThreadFields(m) }
        case .messageStatusChanged(let s):
            b.writeID(s.conversationID)
            b.writeID(s.messageID)
            try b.writeUserID(s.user)
            b.writeInteger(UInt8(bitPattern: s.status.rawValue), as: UInt8.self)
        case .messageDeleted(let d):
            b.writeID(d.conversationID)
            b.writeID(d.messageID)
            b.writeInteger(d.mode.rawValue, as: UInt8.self)
            try b.writeUserID(d.by)
        case .typing(let t):
            b.writeID(t.conversationID)
            try b.writeUserID(t.user)
            b.writeInteger(t.state.rawValue, as: UInt8.self)
        case .statusUpTo(let s):
            b.writeID(s.conversationID)
            try b.writeUserID(s.user)
            b.writeInteger(UInt8(bitPattern: s.status.rawValue), as: UInt8.self)
            b.writeHLC(s.upTo)
        case .messagePartsChanged(let p):
            b.writeID(p.conversationID)
            b.writeID(p.messageID)
            try b.writeParts(p.parts)
            try b.writeUserID(p.by)
            b.writeHLC(p.at)
        case .identityChanged(let i):
            try b.writeIdentityChange(i)
        case .blockListChanged(let c):
            try b.writeUserID(c.user)
            b.writeBool(c.blocking)
        case .presenceChanged(let c):
            try b.writePresenceChanged(c)
        case .followChanged(let c):
            try b.writeUserID(c.user)
            b.writeBool(c.following)
        case .channelCreated, .channelMembershipChanged, .channelMessage, .channelDeleted:
            try b.writeChannelEvent(self)
        case .reactionsChanged(let r):
            try b.writeReactionsChanged(r)
        case .notificationLevelChanged(let c):
            b.writeID(c.conversationID)
            b.writeNotificationLevel(c.level, until: c.until)
        }
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> ChangeEvent {
        let kind = try b.readU8("the change kind")
        switch kind {
        case 0:
            return .conversationCreated(try b.readConversation(limits))
        case 1:
            let id = try b.readID(ConversationID.self, "the conversation id")
            let distinct = try b.readBool("the distinct flag")
            let receipts = try b.readReceipts()
            let messages = try b.readVarint("the message count")
            let unread = try b.readVarint("the unread count")
            let last = try b.readPresence("the last message") ? try b.readID(MessageID.self, "the last message") : nil
            return .conversationUpdated(
                ConversationUpdated(
                    conversationID: id, isDistinct: distinct, deliveryReceiptsEnabled: receipts.delivery,
                    readReceiptsEnabled: receipts.read, messageCount: messages, unreadCount: unread, lastMessageID: last
                ))
        case 2:
            let id = try b.readID(ConversationID.self, "the conversation id")
            let added = try b.readUserSet(limits)
            let removed = try b.readUserSet(limits)
            let by = try b.readUserID(limits)
            let at = try b.readHLC("the change time")
            return .participantsChanged(
                ParticipantsChanged(conversationID: id, added: added, removed: removed, by: by, at: at))
        case 3:
            let id = try b.readID(ConversationID.self, "the conversation id")
            let path = try b.readKeyPath(limits)
            let value =
                try b.readPresence("the metadata value")
                ? try b.readMetadataValue(level: path.components.count, limits) : nil
            let by = try b.readUserID(limits)
            let at = try b.readHLC("the change time")
            return .metadataChanged(MetadataChanged(conversationID: id, keyPath: path, value: value, by: by, at: at))
        case 4:
            let id = try b.readID(ConversationID.self, "the conversation id")
            let mode = try b.readDeletionMode()
            let below = try b.readPresence("the position bound") ? try b.readHLC("the position bound") : nil
            let by = try b.readUserID(limits)
            return .conversationDeleted(ConversationDeleted(conversationID: id, mode: mode, below: below, by: by))
        case 5:
            let from = try b.readID(ConversationID.self, "the old conversation id")
            let to = try b.readID(ConversationID.self, "the new conversation id")
            return .identifierChanged(IdentifierChanged(from: from, to: to))
        case 6:
            return .messageCreated(try b.readMessage(limits))
        case 7:
            let conversation = try b.readID(ConversationID.self, "the conversation id")
            let message = try b.readID(MessageID.self, "the message id")
            let user = try b.readUserID(limits)
            let status = try b.readRecipientStatus()
            return .messageStatusChanged(
                MessageStatusChanged(conversationID: conversation, messageID: message, user: user, status: status))
        case 8:
            let conversation = try b.readID(ConversationID.self, "the conversation id")
            let message = try b.readID(MessageID.self, "the message id")
            let mode = try b.readDeletionMode()
            let by = try b.readUserID(limits)
            return .messageDeleted(MessageDeleted(conversationID: conversation, messageID: message, mode: mode, by: by))
        case 9:
            let conversation = try b.readID(ConversationID.self, "the conversation id")
            let user = try b.readUserID(limits)
            let state = try b.readTypingState()
            return .typing(TypingChanged(conversationID: conversation, user: user, state: state))
        case 10:
            let conversation = try b.readID(ConversationID.self, "the conversation id")
            let user = try b.readUserID(limits)
            let status = try b.readRecipientStatus()
            let upTo = try b.readHLC("the position bound")
            return .statusUpTo(StatusUpTo(conversationID: conversation, user: user, status: status, upTo: upTo))
        case 11:
            let conversation = try b.readID(ConversationID.self, "the conversation id")
            let message = try b.readID(MessageID.self, "the message id")
            let parts = try b.readParts(limits)
            let by = try b.readUserID(limits)
            let at = try b.readHLC("the change time")
            return .messagePartsChanged(
                MessagePartsChanged(conversationID: conversation, messageID: message, parts: parts, by: by, at: at))
        case 12:
            return .identityChanged(try b.readIdentityChange(limits))
        case 13:
            let user = try b.readUserID(limits)
            return .blockListChanged(BlockListChanged(user: user, blocking: try b.readBool("the blocking flag")))
        case 14:
            return .presenceChanged(try b.readPresenceChanged(limits))
        case 15:
            let user = try b.readUserID(limits)
            return .followChanged(FollowChanged(user: user, following: try b.readBool("the following flag")))
        case 16...19:
            return try b.readChannelEvent(kind: kind, limits)
        case 20:
            return .reactionsChanged(try b.readReactionsChanged(limits))
        case 21:
            var message = try b.readMessage(limits)
            try b.readThreadFields(into: &message)
            return .messageCreated(message)
        case 22:
            let conversation = try b.readID(ConversationID.self, "the conversation id")
            let (level, until) = try b.readNotificationLevel()
            return .notificationLevelChanged(
                NotificationLevelChanged(conversationID: conversation, level: level, until: until))
        default:
            throw WireError(.malformed, "change kind \(kind) is not one of 0...22")
        }
    }
}
