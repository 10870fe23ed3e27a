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
        self.init(
            id: message.id, conversation: message.conversationID, sender: message.sender, position: message.position)
    }
}

/// Recipient statuses as a max-lattice: each (message, user) status only moves up
/// (invalid < pending < sent < delivered < read), and "mark all read" is a per
/// (conversation, user) read-up-to position, also a max-register. Merge is pointwise max.
///
/// Rules for `status(of:for:)`:
/// - The sender's own status is `read`.
/// - Otherwise the highest of: the recorded status; `sent` once the message has a position
///   (`pending` before); `delivered` when the user's delivered-up-to position is at or past
///   the message; `read` when the user's read-up-to position is.
/// Stores that keep only a slice of this state decide with the static
/// `status(of:for:recorded:deliveredUpTo:readUpTo:)`, which this type's `status` calls.
///
/// What a viewer is shown of others follows the conversation's two receipt switches
/// (`reported(_:of:viewer:deliveryReceipts:readReceipts:)`, SPEC §6.2): delivery receipts off,
/// `delivered` is shown as `sent` (Layer: sent until read); read receipts off, `delivered` is
/// shown as `read` (implicitly read); both off, `invalid` ("cannot be determined"). The viewer's
/// own status is always shown as it is, and the lattice records each user's own reads, which
/// unread counts need.
public struct RecipientStatusLattice: ReplicatedState, Hashable {
    public enum Operation: Hashable, Sendable {
        /// `user`'s status for `message` reached `status`.
        case status(MessageUserKey, RecipientStatus)
        /// `user` read every message of `conversation` up to and including `position`.
        case readUpTo(ConversationUserKey, MessagePosition)
        /// `user`'s devices hold every message of `conversation` up to and including
        /// `position` (a delivery receipt).
        case deliveredUpTo(ConversationUserKey, MessagePosition)
    }

    public private(set) var statuses: [MessageUserKey: RecipientStatus]
    public private(set) var readUpTo: [ConversationUserKey: MessagePosition]
    public private(set) var deliveredUpTo: [ConversationUserKey: MessagePosition]

    public init() {
        statuses = [:]
        readUpTo = [:]
        deliveredUpTo = [:]
    }

    public mutating func apply(_ operation: Operation) {
        switch operation {
        case .status(let key, let status):
            if let current = statuses[key], current >= status { return }
            statuses[key] = status
        case .readUpTo(let key, let position):
            if let current = readUpTo[key], current >= position { return }
            readUpTo[key] = position
        case .deliveredUpTo(let key, let position):
            if let current = deliveredUpTo[key], current >= position { return }
            deliveredUpTo[key] = position
        }
    }

    public func merged(with other: RecipientStatusLattice) -> RecipientStatusLattice {
        var out = self
        out.statuses.merge(other.statuses) { Swift.max($0, $1) }
        out.readUpTo.merge(other.readUpTo) { Swift.max($0, $1) }
        out.deliveredUpTo.merge(other.deliveredUpTo) { Swift.max($0, $1) }
        return out
    }

    /// The operation an application may issue: marking a message read. Other statuses
    /// are set by nodes (`sent` on acceptance, `delivered` on reaching a device).
    public static func markRead(_ message: MessageID, by user: UserID) -> Operation {
        .status(MessageUserKey(message: message, user: user), .read)
    }

    /// Checks a status an application asks to set: only `read` is allowed.
    public static func checkApplicationStatus(_ status: RecipientStatus) throws(MergeError) {
        guard status == .read else {
            throw MergeError(.statusNotAllowed, "applications can only mark messages read, not \(status)")
        }
    }

    /// `user`'s status for `message` (see the type's rules).
    public func status(of message: MessageStamp, for user: UserID) -> RecipientStatus {
        let key = ConversationUserKey(conversation: message.conversation, user: user)
        return Self.status(
            of: message, for: user, recorded: statuses[MessageUserKey(message: message.id, user: user)],
            deliveredUpTo: deliveredUpTo[key], readUpTo: readUpTo[key]
        )
    }

    /// The status rule on the slice of state one (message, user) pair depends on: the status
    /// recorded for that pair (MARK_READ, or any status a replica recorded), and the user's
    /// delivered-up-to and read-up-to positions in the message's conversation. Stores that
    /// keep only those values (the node's, the SDK's) decide by calling this.
    ///
    /// The sender's own status is `read`; otherwise the highest of `pending` (no position yet)
    /// or `sent`, the recorded status, `delivered` when delivered-up-to is at or past the
    /// message, and `read` when read-up-to is.
    public static func status(
        of message: MessageStamp, for user: UserID, recorded: RecipientStatus?,
        deliveredUpTo: MessagePosition?, readUpTo: MessagePosition?
    ) -> RecipientStatus {
        if user == message.sender { return .read }
        guard let position = message.position else { return Swift.max(.pending, recorded ?? .pending) }
        if let readUpTo, position <= readUpTo { return .read }
        var status = Swift.max(RecipientStatus.sent, recorded ?? .sent)
        if let deliveredUpTo, position <= deliveredUpTo { status = Swift.max(status, .delivered) }
        return status
    }

    /// Whether a range status (`deliveredUpTo`/`readUpTo` of `status`) moving from `before`
    /// to `after` changes anything: the higher bound wins, and a bound never moves down.
    public static func raises(_ before: MessagePosition?, to after: MessagePosition) -> Bool {
        guard let before else { return true }
        return after > before
    }

    /// The statuses `viewer` is shown for `message`, one per participant.
    public func report(
        of message: MessageStamp, viewer: UserID, participants: Set<UserID>, deliveryReceipts: Bool,
        readReceipts: Bool
    ) -> [UserID: RecipientStatus] {
        var out: [UserID: RecipientStatus] = [:]
        for user in participants {
            out[user] = Self.reported(
                status(of: message, for: user), of: user, viewer: viewer, deliveryReceipts: deliveryReceipts,
                readReceipts: readReceipts)
        }
        return out
    }

    /// ``report(of:viewer:participants:deliveryReceipts:readReceipts:)`` with the single
    /// receipts flag of clients before the two switches: both on or both off.
    public func report(
        of message: MessageStamp, viewer: UserID, participants: Set<UserID>, receiptsEnabled: Bool
    ) -> [UserID: RecipientStatus] {
        report(
            of: message, viewer: viewer, participants: participants, deliveryReceipts: receiptsEnabled,
            readReceipts: receiptsEnabled)
    }

    /// What `viewer` is shown of `user`'s status `status` (SPEC §6.2). The viewer's own status
    /// as it is; another participant's (the sender included): with both switches on, the
    /// status; with delivery receipts off, `sent` until read (`delivered` is shown as `sent`);
    /// with read receipts off, `read` once delivered (implicitly read); with both off,
    /// `invalid` ("cannot be determined").
    public static func reported(
        _ status: RecipientStatus, of user: UserID, viewer: UserID, deliveryReceipts: Bool, readReceipts: Bool
    ) -> RecipientStatus {
        guard user != viewer else { return status }
        switch (deliveryReceipts, readReceipts) {
        case (true, true): return status
        case (false, true): return status == .delivered ? .sent : status
        case (true, false): return status >= .delivered ? .read : status
        case (false, false): return .invalid
        }
    }

    /// ``reported(_:of:viewer:deliveryReceipts:readReceipts:)`` with the single receipts flag.
    public static func reported(_ status: RecipientStatus, of user: UserID, viewer: UserID, receiptsEnabled: Bool)
        -> RecipientStatus
    {
        reported(status, of: user, viewer: viewer, deliveryReceipts: receiptsEnabled, readReceipts: receiptsEnabled)
    }
}
