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

    /// The candidate for a conversation created distinct, accepted at `createdAt`.
    public init(_ conversation: Conversation, createdAt: HLCTimestamp) {
        self.init(id: conversation.id, participants: conversation.participants, createdAt: createdAt)
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
        guard requested.isDistinct, let existing, existing.isDistinct, existing.participants == requested.participants
        else {
            return .created
        }
        if requested.metadata.isEmpty || requested.metadata == existing.metadata { return .matches(existing) }
        return .conflicts(existing: existing)
    }

    /// The surviving conversation among distinct conversations that share a participant set.
    public static func survivor(of candidates: some Sequence<DistinctCandidate>) -> DistinctCandidate? {
        candidates.reduce(nil) { best, c in best.map { survivor($0, c) } ?? c }
    }

    /// The survivor of two distinct conversations of the same participant set (earliest
    /// `createdAt`, then the smallest id): what a store holding the two decides with.
    public static func survivor(_ a: DistinctCandidate, _ b: DistinctCandidate) -> DistinctCandidate {
        DistinctCandidate.ranksBefore(b, a) ? b : a
    }

    /// The redirects (merged id → survivor id) within one group of candidates that share a
    /// participant set, given when each stopped being distinct (see `DistinctRegistry` for
    /// the rule). A node can call this with the group read from its storage.
    public static func redirects(
        group: some Sequence<DistinctCandidate>, nonDistinctSince: (ConversationID) -> HLCTimestamp?
    ) -> [ConversationID: ConversationID] {
        var out: [ConversationID: ConversationID] = [:]
        var survivors: [DistinctCandidate] = []
        for x in group.sorted(by: DistinctCandidate.ranksBefore) {
            let host = survivors.first { s in
                guard let end = nonDistinctSince(s.id) else { return true }
                return end > x.createdAt
            }
            if let host { out[x.id] = host.id } else { survivors.append(x) }
        }
        return out
    }

    /// The change a client reports when a conversation it knows as `old` was merged into
    /// `survivor`: an update of the conversation's identifier.
    public static func identifierChange(of old: Conversation, to survivor: ConversationID) -> ObjectChange {
        var moved = old
        moved.id = survivor
        return ObjectChange(
            type: .update, object: .conversation(moved), property: ConversationProperty.identifier,
            before: .conversationID(old.id), after: .conversationID(survivor)
        )
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
/// This is the model of one replica that sees every creation and change in HLC order (the
/// SDK's and the single-node tests' view). Nodes of a cluster, which cannot tell from HLC
/// readings alone whether a creation's node had seen another conversation, decide merges by
/// `DistinctBirth` and `DistinctResolution.classes(of:)` (SPEC §6.5).
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
    /// Candidate ids by sorted participant set (derived from `candidates`).
    private var groups: [[UserID]: Set<ConversationID>]

    public init() {
        candidates = [:]
        nonDistinctSince = [:]
        groups = [:]
    }

    public mutating func apply(_ operation: Operation) {
        switch operation {
        case .created(let c):
            if let current = candidates[c.id] {
                guard Self.canonicallyBefore(c, current) else { return }
                let old = current.participants.sorted()
                groups[old]?.remove(c.id)
                if groups[old]?.isEmpty == true { groups[old] = nil }
            }
            candidates[c.id] = c
            groups[c.participants.sorted(), default: []].insert(c.id)
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
    public func target(of id: ConversationID) -> ConversationID {
        guard let c = candidates[id] else { return id }
        return redirects(for: c.participants)[id] ?? id
    }

    /// Every merged conversation mapped to its survivor.
    public var redirects: [ConversationID: ConversationID] {
        var out: [ConversationID: ConversationID] = [:]
        for key in groups.keys { out.merge(redirects(forKey: key)) { a, _ in a } }
        return out
    }

    /// The redirects among the conversations created distinct with `participants`.
    public func redirects(for participants: Set<UserID>) -> [ConversationID: ConversationID] {
        redirects(forKey: participants.sorted())
    }

    private func redirects(forKey key: [UserID]) -> [ConversationID: ConversationID] {
        let group = (groups[key] ?? []).compactMap { candidates[$0] }
        return DistinctResolution.redirects(group: group) { nonDistinctSince[$0] }
    }

    /// The distinct conversation that creating one with `participants` resolves to now:
    /// the survivor of that set that is still distinct, if any (there is at most one).
    public func existing(for participants: Set<UserID>) -> ConversationID? {
        let key = participants.sorted()
        let merged = redirects(forKey: key)
        return (groups[key] ?? []).compactMap { candidates[$0] }
            .filter { merged[$0.id] == nil && nonDistinctSince[$0.id] == nil }
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
