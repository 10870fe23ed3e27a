import LaminaModel
import LaminaWire

/// The typing indicators the node has relayed and not yet seen end (SPEC §6.1: an
/// indicator not refreshed for 6 s is `finished`). Pure: the caller passes the (monotonic)
/// time in and relays `finished` for what `expire` returns.
///
/// Every indicator lives exactly ``Typing/expiry`` after its last refresh, so deadlines are
/// recorded in increasing order: they queue first in, first out, and the earliest deadline
/// only ever moves later (a timer waiting for it never has to be woken early). A refresh
/// queues its new deadline and leaves the old one to be skipped when it comes up.
struct TypingTimeouts<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// The most indicators tracked at once, node-wide. A new indicator beyond it is not
    /// relayed (the node never relays an indicator it could not end).
    static var maxIndicators: Int { 50_000 }
    /// The most queued deadlines (live and superseded): at a client's pace, a refresh every
    /// 2.5 s, an indicator has at most 3 within its 6 s. An indicator that would queue one
    /// more is not relayed.
    static var maxQueued: Int { 4 * maxIndicators }

    struct Key: Hashable, Sendable {
        var conversation: ConversationID
        var user: UserID
    }

    /// The live deadline of each indicator.
    private var deadlines: [Key: Instant] = [:]
    /// Deadlines in the order recorded (ascending); those no longer in `deadlines` are stale.
    private var queue: [(key: Key, deadline: Instant)] = []
    private var head = 0

    /// Records an indicator of `user` in `conversation` received at `now`. Returns false when
    /// it must not be relayed (a table full).
    mutating func record(_ state: TypingState, of user: UserID, in conversation: ConversationID, at now: Instant)
        -> Bool
    {
        let key = Key(conversation: conversation, user: user)
        switch state {
        case .finished:
            deadlines[key] = nil
        case .started, .paused:
            guard queue.count - head < Self.maxQueued else { return false }
            if deadlines[key] == nil, deadlines.count >= Self.maxIndicators { return false }
            let deadline = now.advanced(by: Typing.expiry)
            deadlines[key] = deadline
            queue.append((key, deadline))
        }
        return true
    }

    /// Removes and returns the indicators whose deadline is at or before `now`, in deadline order.
    mutating func expire(at now: Instant) -> [Key] {
        var due: [Key] = []
        while head < queue.count, queue[head].deadline <= now {
            let (key, deadline) = queue[head]
            head += 1
            if deadlines[key] == deadline {
                deadlines[key] = nil
                due.append(key)
            }
        }
        if head > 1_024, head * 2 > queue.count {
            queue.removeFirst(head)
            head = 0
        }
        return due
    }

    /// When the next queued deadline comes (maybe a superseded one); nil when none is queued.
    var nextDeadline: Instant? { head < queue.count ? queue[head].deadline : nil }

    /// The indicators tracked.
    var count: Int { deadlines.count }
}
