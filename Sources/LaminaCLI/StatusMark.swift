import LaminaModel

/// How far one of the local user's messages has got, over all other participants:
/// `· queued` (not yet accepted by the node), `✓ sent`, `✓✓ delivered` (to every other
/// participant's device), `✓✓ read` (by every other participant).
public enum StatusMark: Int, Hashable, Comparable, Sendable, CaseIterable, CustomStringConvertible {
    case queued, sent, delivered, read

    public static func < (lhs: StatusMark, rhs: StatusMark) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The mark alone: `·`, `✓`, `✓✓`, `✓✓`.
    public var symbol: String {
        switch self {
        case .queued: "·"
        case .sent: "✓"
        case .delivered, .read: "✓✓"
        }
    }

    /// The mark and its word: `· queued`, `✓ sent`, `✓✓ delivered`, `✓✓ read`.
    public var description: String {
        switch self {
        case .queued: "· queued"
        case .sent: "✓ sent"
        case .delivered: "✓✓ delivered"
        case .read: "✓✓ read"
        }
    }

    /// One recipient's status as a mark (`pending` and `invalid` count as sent once the
    /// node has the message).
    public init(recipient status: RecipientStatus, isSent: Bool) {
        guard isSent else {
            self = .queued
            return
        }
        switch status {
        case .read: self = .read
        case .delivered: self = .delivered
        case .invalid, .pending, .sent: self = .sent
        }
    }

    /// The mark of `message` over every participant but `sender`: the least advanced one.
    /// A message to nobody else is as far as the node (sent or queued).
    public init(message: Message, participants: Set<UserID>) {
        let others = participants.subtracting([message.sender])
        let marks = others.map {
            StatusMark(recipient: message.recipientStatus[$0] ?? .pending, isSent: message.isSent)
        }
        self = marks.min() ?? (message.isSent ? .sent : .queued)
    }
}

/// A change of one own message's status worth a status line: the node accepted it, or
/// one recipient's device got it or its user read it.
public struct StatusUpdate: Hashable, Sendable, CustomStringConvertible {
    public var message: MessageID
    public var mark: StatusMark
    /// The recipient, for delivered and read; nil for sent.
    public var recipient: UserID?

    public init(message: MessageID, mark: StatusMark, recipient: UserID?) {
        self.message = message
        self.mark = mark
        self.recipient = recipient
    }

    /// `✓ sent`, `✓✓ delivered to bob`, `✓✓ read by bob`.
    public var description: String {
        guard let recipient else { return mark.description }
        let who = Sanitizer.clip(recipient.rawValue, 64)
        switch mark {
        case .delivered: return "✓✓ delivered to \(who)"
        case .read: return "✓✓ read by \(who)"
        case .queued, .sent: return mark.description
        }
    }
}

/// Remembers what was last shown of each own message and reports what changed since:
/// the status lines of `lamina chat`. At most `capacity` messages are tracked (the oldest
/// are forgotten first).
public struct StatusTracker: Sendable {
    private struct Seen: Sendable {
        var isSent: Bool
        var marks: [UserID: StatusMark]
    }

    private var seen: [MessageID: Seen] = [:]
    private var order: [MessageID] = []
    public let capacity: Int

    public init(capacity: Int = 10_000) {
        self.capacity = max(1, capacity)
    }

    /// Starts tracking `message` as it is now (nothing reported for its current state).
    public mutating func track(_ message: Message) {
        if seen[message.id] == nil {
            order.append(message.id)
            if order.count > capacity {
                seen[order.removeFirst()] = nil
            }
        }
        seen[message.id] = Self.snapshot(message)
    }

    /// Whether `id` is tracked.
    public func isTracked(_ id: MessageID) -> Bool { seen[id] != nil }

    /// The updates between what was seen of `message` and `message` now, then remembers
    /// it. Untracked messages report nothing. Per recipient only the highest new mark is
    /// reported (read implies delivered); recipients in name order.
    public mutating func updates(for message: Message) -> [StatusUpdate] {
        guard let before = seen[message.id] else { return [] }
        let now = Self.snapshot(message)
        seen[message.id] = now
        var updates: [StatusUpdate] = []
        if now.isSent, !before.isSent {
            updates.append(StatusUpdate(message: message.id, mark: .sent, recipient: nil))
        }
        for user in now.marks.keys.sorted() {
            let mark = now.marks[user]!
            if mark >= .delivered, mark > (before.marks[user] ?? .queued) {
                updates.append(StatusUpdate(message: message.id, mark: mark, recipient: user))
            }
        }
        return updates
    }

    private static func snapshot(_ message: Message) -> Seen {
        var marks: [UserID: StatusMark] = [:]
        for (user, status) in message.recipientStatus where user != message.sender {
            marks[user] = StatusMark(recipient: status, isSent: message.isSent)
        }
        return Seen(isSent: message.isSent, marks: marks)
    }
}
