import LaminaModel
import LaminaWire

/// Which TYPING frames to send, and when (SPEC §6.1: clients re-send `started` every 2.5 s
/// while typing; the node treats an indicator not refreshed for 6 s as finished). Pure: the
/// caller passes the time in and sends what comes out.
public struct TypingScheduler: Hashable, Sendable {
    /// How often `started` is re-sent while the user types.
    public static let refreshInterval: Int64 = Typing.refreshMilliseconds
    /// The most conversations with an indicator at once.
    public static let maxConversations = 64

    private struct Entry: Hashable, Sendable {
        var state: TypingState
        var lastSent: Timestamp
    }
    private var entries: [ConversationID: Entry] = [:]

    public init() {}

    /// The local user's typing state in a conversation changed. Returns the frames to send now.
    public mutating func set(_ state: TypingState, in conversation: ConversationID, now: Timestamp) throws(ClientError)
        -> [Typing]
    {
        let current = entries[conversation]
        switch state {
        case .started:
            if let current, current.state == .started,
                now.millisecondsSince1970 - current.lastSent.millisecondsSince1970 < Self.refreshInterval
            {
                return []
            }
            if current == nil, entries.count >= Self.maxConversations {
                throw ClientError(
                    .invalidArgument, "typing indicators run in at most \(Self.maxConversations) conversations at once")
            }
            entries[conversation] = Entry(state: .started, lastSent: now)
        case .paused:
            guard let current, current.state == .started else { return [] }
            entries[conversation] = Entry(state: .paused, lastSent: now)
        case .finished:
            guard current != nil else { return [] }
            entries[conversation] = nil
        }
        return [Typing(conversationID: conversation, state: state)]
    }

    /// The refreshes due at `now`: `started` again for every conversation typed in for 2.5 s
    /// since the last send.
    public mutating func due(now: Timestamp) -> [Typing] {
        var out: [Typing] = []
        for (id, entry) in entries.sorted(by: { $0.key < $1.key })
        where entry.state == .started
            && now.millisecondsSince1970 - entry.lastSent.millisecondsSince1970 >= Self.refreshInterval
        {
            entries[id] = Entry(state: .started, lastSent: now)
            out.append(Typing(conversationID: id, state: .started))
        }
        return out
    }

    /// When the next refresh is due; nil when no one is typing.
    public var nextDeadline: Timestamp? {
        entries.values.filter { $0.state == .started }
            .map { Timestamp(millisecondsSince1970: $0.lastSent.millisecondsSince1970 + Self.refreshInterval) }.min()
    }

    /// The state in a conversation (nil: finished or never started).
    public func state(in conversation: ConversationID) -> TypingState? { entries[conversation]?.state }
}
