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
    public static func precedes(_ a: MembershipOperation, _ b: MembershipOperation) -> Bool {
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
        self.init(
            participants: conversation.participants, creator: conversation.creator, isDistinct: conversation.isDistinct,
            at: timestamp)
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
/// - **Standing** (`standing(of:)`, `MembershipStanding`): a user's operations replayed in
///   the order they take effect, each one that changes the user's state (an add of a
///   non-member, a removal of a member) starting a new state; the others change nothing.
/// - **Visibility** (`canSee`): a user may see the message at position p iff they are a
///   participant *now*, or p is before the removal that ended their latest membership. So a
///   new participant sees all earlier messages; a removed one keeps everything that came
///   before the removal and gets nothing after it; re-adding restores access to everything,
///   the gap included.
/// - **Distinctness** (`isDistinct`): distinct iff the genesis was distinct and the log holds
///   no add or remove operation at all, and the flag never returns to distinct. A node logs
///   an operation for every user an ADD/REMOVE_PARTICIPANTS names, also one that changes
///   nobody's standing (`addOperations` and `removeOperations` give only those that do), so
///   any such command makes a conversation non-distinct: decided by the operations alone,
///   the same on every node whatever their order (SPEC §6.1, §6.5).
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

    /// `user`'s standing now (nil: never a participant): `MembershipStanding.of` over the
    /// user's operations, the genesis counting as an addition at its timestamp.
    public func standing(of user: UserID) -> MembershipStanding? {
        var ops = operations.filter { $0.user == user }
        if let genesis, genesis.participants.contains(user) {
            ops.insert(MembershipOperation(.add, user: user, actor: genesis.creator, at: genesis.timestamp))
        }
        return MembershipStanding.of(ops)
    }

    /// Whether `user` may see the message at `position` (see the type's rules).
    public func canSee(_ user: UserID, messageAt position: MessagePosition) -> Bool {
        MembershipStanding.canSee(standing(of: user), messageAt: position)
    }

    /// The operations that add `users` (those not already participants), checked first:
    /// `actor` must be a participant and the result must stay within `limit`.
    public func addOperations(
        _ users: Set<UserID>, by actor: UserID, at timestamp: HLCTimestamp, limit: Int
    ) throws(MergeError) -> [MembershipOperation] {
        let current = participants
        guard current.contains(actor) else {
            throw MergeError(.notAParticipant, "\(actor) is not a participant and cannot add participants")
        }
        let added = users.subtracting(current)
        guard current.count + added.count <= limit else {
            throw MergeError(
                .tooManyParticipants,
                "adding \(added.count) would make \(current.count + added.count) participants; at most \(limit)")
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
        guard current.contains(actor) else {
            throw MergeError(.notAParticipant, "\(actor) is not a participant and cannot remove participants")
        }
        let removed = users.intersection(current)
        guard removed.count < current.count else {
            throw MergeError(.noParticipants, "removing every participant would leave the conversation empty")
        }
        return removed.sorted().map { MembershipOperation(.remove, user: $0, actor: actor, at: timestamp) }
    }
}

/// One user's standing in a conversation: the slice of the membership log that decides
/// what the user may see. Stores that keep one row per (conversation, user) hold this and
/// update it with `applying(_:)`; `MembershipLog` derives it from the whole log with `of`.
public struct MembershipStanding: Hashable, Sendable {
    /// Whether the user takes part.
    public var isMember: Bool
    /// When the current state began: the operation that made the user a member, or the
    /// removal that ended their latest membership.
    public var since: HLCTimestamp
    /// The latest operation about the user (the one that decides `isMember`).
    public var latest: HLCTimestamp

    public init(isMember: Bool, since: HLCTimestamp, latest: HLCTimestamp) {
        self.isMember = isMember
        self.since = since
        self.latest = latest
    }

    /// The standing after `operation` when operations arrive in the order they take effect
    /// (a node applying its own commands): nil when it changes nothing, i.e. it is not later
    /// than the latest operation, or it adds a member or removes a non-member (a no-op).
    /// `current` nil: the user never took part.
    public static func applying(_ operation: MembershipOperation, to current: MembershipStanding?)
        -> MembershipStanding?
    {
        guard let current else {
            guard operation.kind == .add else { return nil }
            return MembershipStanding(isMember: true, since: operation.timestamp, latest: operation.timestamp)
        }
        guard operation.timestamp > current.latest else { return nil }
        return following(operation, current)
    }

    /// The standing after `operation`, taken as the next one in effect order: nil when it
    /// adds a member or removes a non-member.
    static func following(_ operation: MembershipOperation, _ current: MembershipStanding?) -> MembershipStanding? {
        let isMember = operation.kind == .add
        guard isMember != (current?.isMember ?? false) else { return nil }
        return MembershipStanding(isMember: isMember, since: operation.timestamp, latest: operation.timestamp)
    }

    /// The standing a user's operations give, whatever order they arrived in: replayed in
    /// the order they take effect; nil when the user never became a participant.
    public static func of(_ operations: some Sequence<MembershipOperation>) -> MembershipStanding? {
        var standing: MembershipStanding?
        for op in operations.sorted(by: MembershipOperation.precedes) {
            if let next = following(op, standing) {
                standing = next
            } else if var s = standing, op.timestamp > s.latest {
                s.latest = op.timestamp
                standing = s
            }
        }
        return standing
    }

    /// Whether a user with `standing` may see the message at `position`: a member sees
    /// everything; a removed user what was positioned before their removal; a user who never
    /// took part nothing.
    public static func canSee(_ standing: MembershipStanding?, messageAt position: MessagePosition) -> Bool {
        guard let standing else { return false }
        return standing.isMember || position < standing.since
    }
}
