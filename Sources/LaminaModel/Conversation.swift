/// Options for a new conversation. Conversations are distinct by default.
public struct ConversationOptions: Hashable, Sendable {
    /// A distinct conversation is the one conversation of its participant set:
    /// creating another resolves to the existing one.
    public var isDistinct: Bool
    public var metadata: Metadata
    /// Layer's switch: with it off, devices write no delivery receipts and every other
    /// participant's status stays `sent` until they read the message.
    public var deliveryReceiptsEnabled: Bool
    /// With it off, reads are not shared: another participant counts as having read a message
    /// once it is delivered to them (implicitly read), and the conversation may have up to
    /// ``Limits/maxParticipants`` participants. Both switches off: no status is shared.
    public var readReceiptsEnabled: Bool

    public init(
        isDistinct: Bool = true, metadata: Metadata = Metadata(), deliveryReceiptsEnabled: Bool = true,
        readReceiptsEnabled: Bool = true
    ) {
        self.isDistinct = isDistinct
        self.metadata = metadata
        self.deliveryReceiptsEnabled = deliveryReceiptsEnabled
        self.readReceiptsEnabled = readReceiptsEnabled
    }
}

/// A conversation: a set of participants who exchange messages.
public struct Conversation: Hashable, Sendable, Identifiable {
    public var id: ConversationID
    /// Everyone who takes part now, the creator included.
    public var participants: Set<UserID>
    public var isDistinct: Bool
    public var metadata: Metadata
    /// See ``ConversationOptions/deliveryReceiptsEnabled``.
    public var deliveryReceiptsEnabled: Bool
    /// See ``ConversationOptions/readReceiptsEnabled``.
    public var readReceiptsEnabled: Bool
    public var createdAt: Timestamp
    public var creator: UserID

    public init(
        id: ConversationID,
        participants: Set<UserID>,
        isDistinct: Bool,
        metadata: Metadata,
        deliveryReceiptsEnabled: Bool,
        readReceiptsEnabled: Bool? = nil,
        createdAt: Timestamp,
        creator: UserID
    ) {
        self.id = id
        self.participants = participants
        self.isDistinct = isDistinct
        self.metadata = metadata
        self.deliveryReceiptsEnabled = deliveryReceiptsEnabled
        // Nil: the single receipts flag of clients before the two switches (both on or both off).
        self.readReceiptsEnabled = readReceiptsEnabled ?? deliveryReceiptsEnabled
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
            readReceiptsEnabled: options.readReceiptsEnabled,
            createdAt: createdAt,
            creator: creator
        )
        try validate()
    }

    /// The most participants this conversation may have, given its read receipts switch.
    public var participantLimit: Int {
        Self.participantLimit(readReceiptsEnabled: readReceiptsEnabled)
    }

    /// 25 with read receipts, 250 without (Layer: the larger limit only with read receipts off).
    public static func participantLimit(readReceiptsEnabled: Bool) -> Int {
        readReceiptsEnabled ? Limits.maxParticipantsWithReceipts : Limits.maxParticipants
    }

    /// Whether any recipient status is shared with the other participants (not when both
    /// switches are off, the old single flag's "off").
    public var sharesStatuses: Bool { deliveryReceiptsEnabled || readReceiptsEnabled }

    /// Checks participants (users, not system senders) and metadata against `Limits`.
    public func validate() throws(ModelError) {
        guard !participants.isEmpty else {
            throw ModelError(.noParticipants, "a conversation needs at least one participant")
        }
        for participant in participants { try participant.checkIsUser() }
        guard participants.count <= participantLimit else {
            throw ModelError(
                .tooManyParticipants,
                "a conversation with read receipts \(readReceiptsEnabled ? "enabled" : "disabled") has at most \(participantLimit) participants, this one has \(participants.count)"
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
