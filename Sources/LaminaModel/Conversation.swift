/// Options for a new conversation. Conversations are distinct by default.
public struct ConversationOptions: Hashable, Sendable {
    /// A distinct conversation is the one conversation of its participant set:
    /// creating another resolves to the existing one.
    public var isDistinct: Bool
    public var metadata: Metadata
    public var deliveryReceiptsEnabled: Bool

    public init(isDistinct: Bool = true, metadata: Metadata = Metadata(), deliveryReceiptsEnabled: Bool = true) {
        self.isDistinct = isDistinct
        self.metadata = metadata
        self.deliveryReceiptsEnabled = deliveryReceiptsEnabled
    }
}

/// A conversation: a set of participants who exchange messages.
public struct Conversation: Hashable, Sendable, Identifiable {
    public var id: ConversationID
    /// Everyone who takes part now, the creator included.
    public var participants: Set<UserID>
    public var isDistinct: Bool
    public var metadata: Metadata
    public var deliveryReceiptsEnabled: Bool
    public var createdAt: Timestamp
    public var creator: UserID

    public init(
        id: ConversationID,
        participants: Set<UserID>,
        isDistinct: Bool,
        metadata: Metadata,
        deliveryReceiptsEnabled: Bool,
        createdAt: Timestamp,
        creator: UserID
    ) {
        self.id = id
        self.participants = participants
        self.isDistinct = isDistinct
        self.metadata = metadata
        self.deliveryReceiptsEnabled = deliveryReceiptsEnabled
        self.createdAt = createdAt
        self.creator = creator
    }

    /// A new conversation created by `creator`, who is always a participant.
    /// Validates the participant count and metadata.
    public init(
        id: ConversationID = .random(),
        creator: UserID,
        participants: Set<UserID>,
        options: ConversationOptions = ConversationOptions(),
        createdAt: Timestamp = .now()
    ) throws(ModelError) {
        self.init(
            id: id,
            participants: participants.union([creator]),
            isDistinct: options.isDistinct,
            metadata: options.metadata,
            deliveryReceiptsEnabled: options.deliveryReceiptsEnabled,
            createdAt: createdAt,
            creator: creator
        )
        try validate()
    }

    /// The most participants this conversation may have, given its receipts setting.
    public var participantLimit: Int {
        Self.participantLimit(deliveryReceiptsEnabled: deliveryReceiptsEnabled)
    }

    public static func participantLimit(deliveryReceiptsEnabled: Bool) -> Int {
        deliveryReceiptsEnabled ? Limits.maxParticipantsWithReceipts : Limits.maxParticipants
    }

    /// Checks participants (users, not system senders) and metadata against `Limits`.
    public func validate() throws(ModelError) {
        guard !participants.isEmpty else {
            throw ModelError(.noParticipants, "a conversation needs at least one participant")
        }
        for participant in participants { try participant.checkIsUser() }
        guard participants.count <= participantLimit else {
            throw ModelError(
                .tooManyParticipants,
                "a conversation with delivery receipts \(deliveryReceiptsEnabled ? "enabled" : "disabled") has at most \(participantLimit) participants, this one has \(participants.count)"
            )
        }
        try metadata.validate()
    }
}

/// Property names used in object changes of conversations.
public enum ConversationProperty {
    public static let identifier = "identifier"
    public static let participants = "participants"
    public static let isDistinct = "isDistinct"
    public static let metadata = "metadata"
    public static let lastMessage = "lastMessage"
    public static let unreadMessageCount = "unreadMessageCount"
}
