import LaminaModel
import LaminaWire

/// Other participants' typing state per conversation, as their indicators arrive (SPEC §6.1:
/// an indicator not refreshed for 6 s is `finished`, in the SDK as on the node). Pure: the
/// caller passes the time in, reports what `receive` and `expire` return, and wakes at
/// `nextDeadline`.
public struct TypingIndicators: Hashable, Sendable {
    /// The most indicators held at once; a new one beyond it is ignored.
    public static let maxIndicators = 1_024

    private struct Key: Hashable, Sendable {
        var conversation: ConversationID
        var user: UserID
    }
    private struct Entry: Hashable, Sendable {
        var state: TypingState
        var refreshedAt: Timestamp
    }
    private var entries: [Key: Entry] = [:]

    public init() {}

    /// An indicator arrived at `now`. Returns the change to report: nil for a refresh of the
    /// same state, a `finished` for an indicator not running, or a new one past the limit.
    public mutating func receive(_ typing: TypingChanged, now: Timestamp) -> TypingChanged? {
        let key = Key(conversation: typing.conversationID, user: typing.user)
        let previous = entries[key]
        switch typing.state {
        case .finished:
            guard previous != nil else { return nil }
            entries[key] = nil
        case .started, .paused:
            if previous == nil, entries.count >= Self.maxIndicators { return nil }
            entries[key] = Entry(state: typing.state, refreshedAt: now)
            if previous?.state == typing.state { return nil }
        }
        return typing
    }

    /// Ends the indicators not refreshed for LaminaWire's `Typing.expiryMilliseconds` at `now`: the
    /// `finished` changes to report, in conversation and user order.
    public mutating func expire(now: Timestamp) -> [TypingChanged] {
        let due = entries.filter {
            now.millisecondsSince1970 - $0.value.refreshedAt.millisecondsSince1970 >= Typing.expiryMilliseconds
        }
        .keys.sorted { ($0.conversation, $0.user) < ($1.conversation, $1.user) }
        for key in due { entries[key] = nil }
        return due.map { TypingChanged(conversationID: $0.conversation, user: $0.user, state: .finished) }
    }

    /// When the next indicator ends unless refreshed; nil when none runs.
    public var nextDeadline: Timestamp? {
        entries.values.map(\.refreshedAt.millisecondsSince1970).min()
            .map { Timestamp(millisecondsSince1970: $0 + Typing.expiryMilliseconds) }
    }

    /// Who is typing (or paused) in `conversation`, as of the last `receive` or `expire`.
    public func states(in conversation: ConversationID) -> [UserID: TypingState] {
        var out: [UserID: TypingState] = [:]
        for (key, entry) in entries where key.conversation == conversation { out[key.user] = entry.state }
        return out
    }
}
