import LaminaModel

/// One change of a thread: a reply to its root arrived, or a reply was deleted for everyone.
public enum ThreadOperation: Hashable, Sendable {
    /// A reply, at its position in the conversation.
    case replied(MessageID, at: HLCTimestamp)
    /// A reply deleted for everyone (it stays deleted whatever arrives after).
    case deleted(MessageID)
}

/// What a thread's root shows: how many replies it has and the last one, derived from the set
/// of replies and the set of deleted ones (two grow-only sets, so replicas that see the same
/// replies and deletions in any order show the same summary; a deletion seen before its reply
/// still hides it).
public struct ThreadSummary: ReplicatedState, Hashable {
    public typealias Operation = ThreadOperation

    /// Every reply seen, with its position.
    public private(set) var replies: [MessageID: HLCTimestamp] = [:]
    /// Every reply deleted for everyone.
    public private(set) var deleted: Set<MessageID> = []

    public init() {}

    public mutating func apply(_ operation: ThreadOperation) {
        switch operation {
        case .replied(let id, let at):
            // A message's position is fixed; the earliest reading is kept should two disagree.
            if let known = replies[id], known <= at { return }
            replies[id] = at
        case .deleted(let id): deleted.insert(id)
        }
    }

    public func merged(with other: ThreadSummary) -> ThreadSummary {
        var out = self
        for (id, at) in other.replies { out.apply(.replied(id, at: at)) }
        out.deleted.formUnion(other.deleted)
        return out
    }

    /// Replies not deleted.
    public var replyCount: Int { replies.keys.count { !deleted.contains($0) } }

    /// The latest reply not deleted, and its position (two at one reading: the greater id, so
    /// every replica names the same).
    public var lastReply: (id: MessageID, at: HLCTimestamp)? {
        replies.filter { !deleted.contains($0.key) }.max { a, b in
            a.value != b.value ? a.value < b.value : a.key.uuid.uuidString < b.key.uuid.uuidString
        }.map { ($0.key, $0.value) }
    }
}
