import LaminaModel

/// One user's reaction on a message: a short string such as an emoji.
public struct Reaction: Hashable, Sendable {
    public var user: UserID
    public var key: String

    public init(user: UserID, key: String) {
        self.user = user
        self.key = key
    }
}

/// One change of a message's reactions, stamped by the node that accepted it.
public enum ReactionOperation: Hashable, Sendable {
    /// The user reacted. `tag` is the accepting node's HLC reading: it names this add, and no
    /// other add has the same one.
    case added(Reaction, tag: HLCTimestamp)
    /// The user took the reaction back: the adds the user's device had seen (`observed`, their
    /// tags) are removed. An add it had not seen (made concurrently on another device or node)
    /// survives.
    case removed(Reaction, observed: Set<HLCTimestamp>)
}

/// A message's reactions as an observed-remove set of (user, reaction): an add-wins set whose
/// result does not depend on the order, or the number of times, operations arrive. A reaction
/// is present while one of its adds has not been removed; a remove takes away only the adds it
/// names, so an add concurrent with a remove wins (the user's other device reacted meanwhile).
///
/// Each message has its own set; a reaction never touches the message itself, so its cost does
/// not grow with the reactions on other messages.
public struct ReactionSet: ReplicatedState, Hashable {
    public typealias Operation = ReactionOperation

    /// Every add seen, per reaction: its tags.
    public private(set) var adds: [Reaction: Set<HLCTimestamp>] = [:]
    /// Every add removed, per reaction: its tags (tombstones).
    public private(set) var removals: [Reaction: Set<HLCTimestamp>] = [:]

    public init() {}

    public mutating func apply(_ operation: ReactionOperation) {
        switch operation {
        case .added(let reaction, let tag): adds[reaction, default: []].insert(tag)
        case .removed(let reaction, let observed):
            guard !observed.isEmpty else { return }
            removals[reaction, default: []].formUnion(observed)
        }
    }

    public func merged(with other: ReactionSet) -> ReactionSet {
        var out = self
        out.adds.merge(other.adds) { $0.union($1) }
        out.removals.merge(other.removals) { $0.union($1) }
        return out
    }

    /// The tags of `reaction`'s adds that are not removed: what a remove made now must name.
    public func liveTags(of reaction: Reaction) -> Set<HLCTimestamp> {
        guard let tags = adds[reaction] else { return [] }
        guard let removed = removals[reaction] else { return tags }
        return tags.subtracting(removed)
    }

    /// Whether `reaction` is present.
    public func contains(_ reaction: Reaction) -> Bool { !liveTags(of: reaction).isEmpty }

    /// Every reaction present.
    public var present: Set<Reaction> { Set(adds.keys.filter(contains)) }

    /// How many users reacted with each key (keys with none are absent).
    public var counts: [String: Int] {
        var out: [String: Int] = [:]
        for reaction in present { out[reaction.key, default: 0] += 1 }
        return out
    }

    /// The keys `user` reacted with ("did I react").
    public func keys(of user: UserID) -> Set<String> {
        Set(present.lazy.filter { $0.user == user }.map(\.key))
    }
}
