import LaminaModel

/// A (message, user) pair: whose status for which message.
public struct MessageUserKey: Hashable, Sendable {
    public var message: MessageID
    public var user: UserID
    public init(message: MessageID, user: UserID) {
        self.message = message
        self.user = user
    }
}

/// A (conversation, user) pair: whose read-up-to position in which conversation.
public struct ConversationUserKey: Hashable, Sendable {
    public var conversation: ConversationID
    public var user: UserID
    public init(conversation: ConversationID, user: UserID) {
        self.conversation = conversation
        self.user = user
    }
}

/// What the status rules need to know about a message.
public struct MessageStamp: Hashable, Sendable {
    public var id: MessageID
    public var conversation: ConversationID
    public var sender: UserID
    /// Nil until the node accepts the message.
    public var position: MessagePosition?

    public init(id: MessageID, conversation: ConversationID, sender: UserID, position: MessagePosition?) {
        self.id = id
        self.conversation = conversation
        self.sender = sender
        self.position = position
    }

    public init(_ message: Message) {
        self.init(id: message.id, conversation: message.conversationID, sender: message.sender, position: message.position)
    }
}

/// Recipient statuses as a max-lattice: each (message, user) status only moves up
/// (invalid < pending < sent < delivered < read), and "mark all read" is a per
/// (conversation, user) read-up-to position, also a max-register. Merge is pointwise max.
///
/// Rules for `status(of:for:)`:
/// - The sender's own status is `read`.
/// - Otherwise the highest of: the recorded status; `sent` once the message has a position
///   (`pending` before); `read` when the user's read-up-to position is at or past the message.
///
/// With receipts disabled (`report(of:viewer:participants:receiptsEnabled:)`), statuses are
/// not shared: the viewer sees their own status and `invalid` ("cannot be determined") for
/// everyone else. The lattice still records each user's own reads, which unread counts need.
public struct RecipientStatusLattice: ReplicatedState, Hashable {
    public enum Operation: Hashable, Sendable {
        /// `user`'s status for `message` reached `status`.
        case status(MessageUserKey, RecipientStatus)
        /// `user` read every message of `conversation` up to and including `position`.
        case readUpTo(ConversationUserKey, MessagePosition)
    }

    public private(set) var statuses: [MessageUserKey: RecipientStatus]
    public private(set) var readUpTo: [ConversationUserKey: MessagePosition]

    public init() {
        statuses = [:]
        readUpTo = [:]
    }

    public mutating func apply(_ operation: Operation) {
        switch operation {
        case .status(let key, let status):
            if let current = statuses[key], current >= status { return }
            statuses[key] = status
        case .readUpTo(let key, let position):
            if let current = readUpTo[key], current >= position { return }
            readUpTo[key] = position
        }
    }

    public func merged(with other: RecipientStatusLattice) -> RecipientStatusLattice {
        var out = self
        out.statuses.merge(other.statuses) { Swift.max($0, $1) }
        out.readUpTo.merge(other.readUpTo) { Swift.max($0, $1) }
        return out
    }

    /// The operation an application may issue: marking a message read. Other statuses
    /// are set by nodes (`sent` on acceptance, `delivered` on reaching a device).
    public static func markRead(_ message: MessageID, by user: UserID) -> Operation {
        .status(MessageUserKey(message: message, user: user), .read)
    }

    /// Checks a status an application asks to set: only `read` is allowed.
    public static func checkApplicationStatus(_ status: RecipientStatus) throws(MergeError) {
        guard status == .read else { throw MergeError(.statusNotAllowed, "applications can only mark messages read, not \(status)") }
    }

    /// `user`'s status for `message` (see the type's rules).
    public func status(of message: MessageStamp, for user: UserID) -> RecipientStatus {
        if user == message.sender { return .read }
        var status: RecipientStatus = message.position == nil ? .pending : .sent
        if let recorded = statuses[MessageUserKey(message: message.id, user: user)] { status = Swift.max(status, recorded) }
        if let position = message.position, hasReadUpTo(position, in: message.conversation, user: user) { status = .read }
        return status
    }

    /// Whether `user` has read `message` (individually or by read-up-to), or sent it.
    public func isRead(_ message: MessageStamp, by user: UserID) -> Bool { status(of: message, for: user) == .read }

    /// The statuses `viewer` is shown for `message`, one per participant.
    public func report(
        of message: MessageStamp, viewer: UserID, participants: Set<UserID>, receiptsEnabled: Bool
    ) -> [UserID: RecipientStatus] {
        var out: [UserID: RecipientStatus] = [:]
        for user in participants {
            out[user] = receiptsEnabled || user == viewer ? status(of: message, for: user) : .invalid
        }
        return out
    }

    func hasReadUpTo(_ position: MessagePosition, in conversation: ConversationID, user: UserID) -> Bool {
        guard let upTo = readUpTo[ConversationUserKey(conversation: conversation, user: user)] else { return false }
        return position <= upTo
    }
}
