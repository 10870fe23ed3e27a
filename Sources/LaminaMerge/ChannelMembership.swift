import LaminaModel

/// One change of a channel's membership (SPEC §6.8), stamped with the HLC reading of the node
/// that accepted it: a member joined or left (by themselves, or added or removed through the
/// Server API), or the channel was deleted.
public enum ChannelMembershipOperation: Hashable, Sendable {
    case joined(UserID, at: HLCTimestamp)
    case left(UserID, at: HLCTimestamp)
    case deleted(at: HLCTimestamp)
}

/// A channel's membership as a replicated state (SPEC §6.8): a last-writer-wins register per
/// user (joined or not, decided by the HLC readings of the operations) and a deletion that
/// absorbs everything. The result does not depend on the order in which operations arrive:
/// - a user is a member when their latest operation is a join, and the channel is not deleted;
/// - for the same reading (no node makes two operations about one user at one reading) a
///   leave wins, so the order is total;
/// - once deleted (at any reading), the channel has no members and never gets one again; the
///   earliest deletion is kept, so every replica shows the same one.
///
/// The member limit is not part of the lattice: a node checks it where a join enters
/// (``admission(of:limit:)``), against what it holds. Joins accepted concurrently on nodes
/// that had not yet seen each other's can leave a channel above the limit; every node then
/// refuses new joins until leaves bring it below.
public struct ChannelMembership: ReplicatedState, Hashable {
    public typealias Operation = ChannelMembershipOperation

    /// One user's latest operation: joined or not, at which reading.
    public struct Standing: Hashable, Sendable {
        public var isMember: Bool
        public var at: HLCTimestamp
        public init(isMember: Bool, at: HLCTimestamp) {
            self.isMember = isMember
            self.at = at
        }
    }

    /// The latest operation about each user who ever joined or left.
    public private(set) var standings: [UserID: Standing] = [:]
    /// When the channel was deleted (the earliest deletion), nil while it lives.
    public private(set) var deletedAt: HLCTimestamp?

    public init() {}

    public mutating func apply(_ operation: ChannelMembershipOperation) {
        switch operation {
        case .joined(let user, let at): record(user, Standing(isMember: true, at: at))
        case .left(let user, let at): record(user, Standing(isMember: false, at: at))
        case .deleted(let at): if deletedAt.map({ at < $0 }) ?? true { deletedAt = at }
        }
    }

    private mutating func record(_ user: UserID, _ incoming: Standing) {
        if let current = standings[user], !Self.replaces(incoming, current) { return }
        standings[user] = incoming
    }

    /// Whether `incoming` replaces `current` (same user): a later reading; at the same reading
    /// a leave over a join.
    static func replaces(_ incoming: Standing, _ current: Standing) -> Bool {
        if incoming.at != current.at { return current.at < incoming.at }
        return current.isMember && !incoming.isMember
    }

    public func merged(with other: ChannelMembership) -> ChannelMembership {
        var out = self
        for (user, standing) in other.standings { out.record(user, standing) }
        if let at = other.deletedAt { out.apply(.deleted(at: at)) }
        return out
    }

    public var isDeleted: Bool { deletedAt != nil }

    /// The members now: none once deleted.
    public var members: Set<UserID> {
        guard deletedAt == nil else { return [] }
        return Set(standings.compactMap { $0.value.isMember ? $0.key : nil })
    }

    /// Whether `user` is a member now.
    public func isMember(_ user: UserID) -> Bool {
        deletedAt == nil && standings[user]?.isMember == true
    }

    /// How many members the channel has now.
    public var memberCount: Int { deletedAt == nil ? standings.values.count(where: \.isMember) : 0 }

    /// What a join of `user` would do where it enters (a node's local check, not a merge rule).
    public enum Admission: Hashable, Sendable {
        /// The user becomes a member.
        case admitted
        /// The user is a member already: nothing changes.
        case alreadyMember
        /// The channel holds `limit` members or more: refused.
        case full
        /// The channel is deleted: refused.
        case deleted
    }

    /// Whether a join of `user` is admitted with at most `limit` members.
    public func admission(of user: UserID, limit: Int) -> Admission {
        if deletedAt != nil { return .deleted }
        if isMember(user) { return .alreadyMember }
        return memberCount < limit ? .admitted : .full
    }
}
