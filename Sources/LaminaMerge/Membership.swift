import LaminaModel

/// One change of a conversation's participants: `actor` added or removed `user` at `timestamp`.
public struct MembershipOperation: Hashable, Sendable {
    public enum Kind: UInt8, Hashable, Sendable {
        case add = 1
        case remove = 2
    }

    public var kind: Kind
    public var user: UserID
    public var actor: UserID
    public var timestamp: HLCTimestamp

    public init(_ kind: Kind, user: UserID, actor: UserID, at timestamp: HLCTimestamp) {
        self.kind = kind
        self.user = user
        self.actor = actor
        self.timestamp = timestamp
    }

    /// The order in which operations take effect: by timestamp; for the same timestamp
    /// (possible only for a faulty clock) a removal comes before an addition, so add wins,
    /// then by user and actor, so the order is total.
    static func precedes(_ a: MembershipOperation, _ b: MembershipOperation) -> Bool {
        if a.timestamp != b.timestamp { return a.timestamp < b.timestamp }
        if a.kind != b.kind { return a.kind == .remove }
        if a.user != b.user { return a.user < b.user }
        return a.actor < b.actor
    }
}

/// How a conversation began: its first participants (the creator included) and whether
/// it was created distinct. Every replica of a conversation holds the same genesis.
public struct MembershipGenesis: Hashable, Sendable {
    public var participants: Set<UserID>
    public var creator: UserID
    public var isDistinct: Bool
    public var timestamp: HLCTimestamp

    public init(participants: Set<UserID>, creator: UserID, isDistinct: Bool, at timestamp: HLCTimestamp) {
        self.participants = participants.union([creator])
        self.creator = creator
        self.isDistinct = isDistinct
        self.timestamp = timestamp
    }

    /// The genesis of `conversation`, accepted at `timestamp`.
    public init(_ conversation: Conversation, at timestamp: HLCTimestamp) {
        self.init(participants: conversation.participants, creator: conversation.creator, isDistinct: conversation.isDistinct, at: timestamp)
    }

    /// A total order so that two (faulty) replicas holding different geneses pick the same one.
    static func precedes(_ a: MembershipGenesis, _ b: MembershipGenesis) -> Bool {
        if a.timestamp != b.timestamp { return a.timestamp < b.timestamp }
        if a.isDistinct != b.isDistinct { return a.isDistinct }
        if a.creator != b.creator { return a.creator < b.creator }
        return a.participants.sorted().lexicographicallyPrecedes(b.participants.sorted())
    }
}

/// A conversation's membership as an operation log: a CRDT whose merge is the union of
/// operations (and the earliest genesis). Everything else is derived from the log, so
/// the result does not depend on the order in which operations arrived.
///
/// Rules:
/// - **Participation** of a user at time t: the latest operation about that user with a
///   timestamp ≤ t decides (the genesis counts as an addition at its timestamp); none means
///   not a participant. An operation at t takes effect for positions ≥ t.
/// - **Visibility** (`canSee`): a user may see the message at position p iff they are a
///   participant *now* (the whole log), or were a participant *at p*. So a new participant
///   sees all earlier messages; a removed one keeps what came before the removal and gets
///   nothing after it; re-adding restores access to everything, the gap included.
/// - **Distinctness** (`isDistinct`): distinct iff the genesis was distinct and the log holds
///   no add or remove operation at all. Commands (`addOperations`, `removeOperations`)
///   never emit no-op operations, so only real changes make a conversation non-distinct,
///   and the flag never returns to distinct.
public struct MembershipLog: ReplicatedState, Hashable {
    public enum Operation: Hashable, Sendable {
        case genesis(MembershipGenesis)
        case change(MembershipOperation)
    }

    public private(set) var genesis: MembershipGenesis?
    public private(set) var operations: Set<MembershipOperation>

    public init() {
        genesis = nil
        operations = []
    }

    /// The log of a conversation that has just been created.
    public init(genesis: MembershipGenesis) {
        self.genesis = genesis
        self.operations = []
    }

    public mutating func apply(_ operation: Operation) {
        switch operation {
        case .genesis(let g):
            if let current = genesis, !MembershipGenesis.precedes(g, current) { return }
            genesis = g
        case .change(let op):
            operations.insert(op)
        }
    }

    public func merged(with other: MembershipLog) -> MembershipLog {
        var out = self
        if let g = other.genesis { out.apply(.genesis(g)) }
        out.operations.formUnion(other.operations)
        return out
    }

    /// Operations in the order they take effect.
    public var orderedOperations: [MembershipOperation] { operations.sorted(by: MembershipOperation.precedes) }

    /// Whether the conversation is still distinct (see the type's rules).
    public var isDistinct: Bool { (genesis?.isDistinct ?? false) && operations.isEmpty }

    /// The earliest operation that made a distinct conversation non-distinct, if any.
    public var nonDistinctSince: HLCTimestamp? {
        guard genesis?.isDistinct == true else { return nil }
        return operations.map(\.timestamp).min()
    }

    /// Who takes part now.
    public var participants: Set<UserID> { participants(at: nil) }

    /// Who took part at `time` (nil: now, i.e. after every operation).
    public func participants(at time: HLCTimestamp?) -> Set<UserID> {
        var everyone = genesis?.participants ?? []
        for op in operations { everyone.insert(op.user) }
        return everyone.filter { isParticipant($0, at: time) }
    }

    /// Whether `user` took part at `time` (nil: now). The genesis counts as an addition
    /// of its participants at its timestamp.
    public func isParticipant(_ user: UserID, at time: HLCTimestamp? = nil) -> Bool {
        var decisive: MembershipOperation?
        if let genesis, genesis.participants.contains(user) {
            decisive = MembershipOperation(.add, user: user, actor: genesis.creator, at: genesis.timestamp)
            if let time, genesis.timestamp > time { decisive = nil }
        }
        for op in operations where op.user == user {
            if let time, op.timestamp > time { continue }
            if let d = decisive, !MembershipOperation.precedes(d, op) { continue }
            decisive = op
        }
        return decisive?.kind == .add
    }

    /// Whether `user` may see the message at `position`: a participant now, or at `position`.
    public func canSee(_ user: UserID, messageAt position: MessagePosition) -> Bool {
        isParticipant(user) || isParticipant(user, at: position)
    }

    /// The operations that add `users` (those not already participants), checked first:
    /// `actor` must be a participant and the result must stay within `limit`.
    public func addOperations(
        _ users: Set<UserID>, by actor: UserID, at timestamp: HLCTimestamp, limit: Int
    ) throws(MergeError) -> [MembershipOperation] {
        let current = participants
        guard current.contains(actor) else { throw MergeError(.notAParticipant, "\(actor) is not a participant and cannot add participants") }
        let added = users.subtracting(current)
        guard current.count + added.count <= limit else {
            throw MergeError(.tooManyParticipants, "adding \(added.count) would make \(current.count + added.count) participants; at most \(limit)")
        }
        return added.sorted().map { MembershipOperation(.add, user: $0, actor: actor, at: timestamp) }
    }

    /// The operations that remove `users` (those who are participants), checked first:
    /// `actor` must be a participant and at least one participant must remain.
    /// A user removing themselves is leaving.
    public func removeOperations(
        _ users: Set<UserID>, by actor: UserID, at timestamp: HLCTimestamp
    ) throws(MergeError) -> [MembershipOperation] {
        let current = participants
        guard current.contains(actor) else { throw MergeError(.notAParticipant, "\(actor) is not a participant and cannot remove participants") }
        let removed = users.intersection(current)
        guard removed.count < current.count else {
            throw MergeError(.noParticipants, "removing every participant would leave the conversation empty")
        }
        return removed.sorted().map { MembershipOperation(.remove, user: $0, actor: actor, at: timestamp) }
    }
}
