/// The kind of an object change.
public enum ObjectChangeType: UInt8, Hashable, Sendable, CaseIterable {
    case create = 0
    case update = 1
    case delete = 2
}

/// The object a change is about.
public enum ChangedObject: Hashable, Sendable {
    case conversation(Conversation)
    case message(Message)
    /// A user's identity (Server API identities, SPEC §6.4 `identity-changed`): created,
    /// updated (property `identity`, before and after) or deleted.
    case identity(UserIdentity)
    /// A channel the user is a member of (SPEC §6.8): created (joined), updated (property
    /// `isMember`) or deleted.
    case channel(ChatChannel)
    /// A channel's message: created (channel messages are not updated one by one).
    case channelMessage(ChannelMessage)
}

/// A property value before or after an update.
public enum PropertyValue: Hashable, Sendable {
    case bool(Bool)
    case integer(Int64)
    case string(String)
    case conversationID(ConversationID)
    case participants(Set<UserID>)
    case metadata(Metadata)
    case recipientStatus([UserID: RecipientStatus])
    case timestamp(Timestamp)
    case position(MessagePosition)
    case parts([MessagePart])
    case identity(UserIdentity)
    /// A message's reactions: per key, the users who reacted with it (SPEC §6.9).
    case reactions([String: Set<UserID>])
}

/// One create, update or delete of a conversation or message, as an app sees it.
/// Updates name the property and carry its value before and after.
public struct ObjectChange: Hashable, Sendable {
    public var type: ObjectChangeType
    public var object: ChangedObject
    public var property: String?
    public var before: PropertyValue?
    public var after: PropertyValue?

    public init(
        type: ObjectChangeType, object: ChangedObject, property: String? = nil, before: PropertyValue? = nil,
        after: PropertyValue? = nil
    ) {
        self.type = type
        self.object = object
        self.property = property
        self.before = before
        self.after = after
    }
}

/// How far a deletion reaches.
public enum DeletionMode: UInt8, Hashable, Sendable, CaseIterable {
    /// Removed from the deleting user's devices only.
    case myDevices = 1
    /// Removed for every participant.
    case allParticipants = 2
}
