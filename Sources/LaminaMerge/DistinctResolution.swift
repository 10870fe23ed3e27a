import LaminaModel

/// A conversation that was created distinct, as the resolution rule sees it.
public struct DistinctCandidate: Hashable, Sendable {
    public var id: ConversationID
    /// The participant set it was created with (the creator included).
    public var participants: Set<UserID>
    /// When it was created (the HLC reading of the node that accepted it).
    public var createdAt: HLCTimestamp

    public init(id: ConversationID, participants: Set<UserID>, createdAt: HLCTimestamp) {
        self.id = id
        self.participants = participants
        self.createdAt = createdAt
    }

    /// The survivor order: earliest `createdAt`, then the smallest id (UUID bytes).
    /// Total and the same on every node.
    public static func ranksBefore(_ a: DistinctCandidate, _ b: DistinctCandidate) -> Bool {
        if a.createdAt != b.createdAt { return a.createdAt < b.createdAt }
        return a.id < b.id
    }
}

/// What creating a distinct conversation resolves to (Server API status in brackets).
public enum DistinctCreateOutcome: Hashable, Sendable {
    /// No distinct conversation with these participants exists: the new one stands (201).
    case created
    /// One exists and the request's metadata is absent or identical: use it (200 + Location).
    case matches(Conversation)
    /// One exists with different metadata: refused, carrying the existing one (409).
    case conflicts(existing: Conversation)

    /// The Server API status code for this outcome.
    public var httpStatus: Int {
        switch self {
        case .created: 201
        case .matches: 200
        case .conflicts: 409
        }
    }
}

/// Resolves distinct conversations: the one conversation of a participant set.
public enum DistinctResolution {
    /// The outcome of creating `requested` when `existing` is the distinct conversation
    /// with the same participant set (if any). A non-distinct request is always created.
    public static func resolveCreate(_ requested: Conversation, existing: Conversation?) -> DistinctCreateOutcome {
        guard requested.isDistinct, let existing, existing.isDistinct, existing.participants == requested.participants else {
            return .created
        }
        if requested.metadata.isEmpty || requested.metadata == existing.metadata { return .matches(existing) }
        return .conflicts(existing: existing)
    }

    /// The surviving conversation among distinct conversations that share a participant set.
    public static func survivor(of candidates: some Sequence<DistinctCandidate>) -> DistinctCandidate? {
        candidates.min(by: DistinctCandidate.ranksBefore)
    }
}

/// Every distinct conversation a replica knows of, and when each stopped being distinct:
/// a CRDT (union of candidates, earliest non-distinct time per conversation) from which
/// the survivor of each participant set and the redirect of every merged conversation
/// are derived, identically on every node whatever the order of arrival.
///
/// Rule: candidates are taken in survivor order (earliest `createdAt`, then smallest id).
/// A candidate X is merged into the first earlier survivor S of the same participant set
/// that was still distinct when X was created (S created at or before X, and S not made
/// non-distinct at or before X's creation); otherwise X is itself a survivor. So
/// concurrently created duplicates collapse into the earliest, and a distinct conversation
/// created after the old one gained or lost participants stands on its own.
///
/// A merged conversation's messages belong to its survivor (`target(of:)`, `relocated(_:)`)
/// and clients follow `redirects` (old id → survivor id) to learn the identifier change.
/// Positions are HLC readings, so moved messages interleave in the survivor's total order.
public struct DistinctRegistry: ReplicatedState, Hashable {
    public enum Operation: Hashable, Sendable {
        /// A distinct conversation was created.
        case created(DistinctCandidate)
        /// A conversation stopped being distinct (its first membership change) at a time.
        case becameNonDistinct(ConversationID, at: HLCTimestamp)
    }

    public private(set) var candidates: [ConversationID: DistinctCandidate]
    public private(set) var nonDistinctSince: [ConversationID: HLCTimestamp]

    public init() {
        candidates = [:]
        nonDistinctSince = [:]
    }

    public mutating func apply(_ operation: Operation) {
        switch operation {
        case .created(let c):
            if let current = candidates[c.id], !Self.canonicallyBefore(c, current) { return }
            candidates[c.id] = c
        case .becameNonDistinct(let id, let time):
            if let current = nonDistinctSince[id], current <= time { return }
            nonDistinctSince[id] = time
        }
    }

    public func merged(with other: DistinctRegistry) -> DistinctRegistry {
        var out = self
        for c in other.candidates.values { out.apply(.created(c)) }
        for (id, time) in other.nonDistinctSince { out.apply(.becameNonDistinct(id, at: time)) }
        return out
    }

    /// The conversation whose messages a conversation's messages belong to: its survivor,
    /// or itself when it was not merged (or is unknown).
    public func target(of id: ConversationID) -> ConversationID { redirects[id] ?? id }

    /// Every merged conversation mapped to its survivor.
    public var redirects: [ConversationID: ConversationID] {
        var out: [ConversationID: ConversationID] = [:]
        var groups: [[UserID]: [DistinctCandidate]] = [:]
        for c in candidates.values { groups[c.participants.sorted(), default: []].append(c) }
        for group in groups.values {
            var survivors: [DistinctCandidate] = []
            for x in group.sorted(by: DistinctCandidate.ranksBefore) {
                let host = survivors.first { s in
                    guard let end = nonDistinctSince[s.id] else { return true }
                    return end > x.createdAt
                }
                if let host { out[x.id] = host.id } else { survivors.append(x) }
            }
        }
        return out
    }

    /// The distinct conversation that creating one with `participants` resolves to now:
    /// the survivor of that set that is still distinct, if any (there is at most one).
    public func existing(for participants: Set<UserID>) -> ConversationID? {
        let merged = redirects
        return candidates.values
            .filter { $0.participants == participants && merged[$0.id] == nil && nonDistinctSince[$0.id] == nil }
            .min(by: DistinctCandidate.ranksBefore)?.id
    }

    /// `message` moved to its conversation's survivor (unchanged when not merged).
    public func relocated(_ message: Message) -> Message {
        var m = message
        m.conversationID = target(of: message.conversationID)
        return m
    }

    /// A total order for two (faulty) records of the same conversation id.
    static func canonicallyBefore(_ a: DistinctCandidate, _ b: DistinctCandidate) -> Bool {
        if a.createdAt != b.createdAt { return a.createdAt < b.createdAt }
        return a.participants.sorted().lexicographicallyPrecedes(b.participants.sorted())
    }
}
