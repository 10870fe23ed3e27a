import LaminaModel

/// The creation of a conversation created distinct, as the concurrency rule sees it: the
/// candidate (id, participant set, creation reading), the operation that created it (origin
/// and counter), and what its origin held then (its version vector, the creation excluded).
public struct DistinctBirth: Hashable, Sendable {
    public var candidate: DistinctCandidate
    public var origin: NodeID
    /// The creation's counter at its origin; 0 for a conversation created before births were
    /// recorded (what it saw is unknown: see `saw(_:)`).
    public var counter: UInt64
    /// The origin's version vector when it created the conversation.
    public var seen: VersionVector

    public init(candidate: DistinctCandidate, origin: NodeID, counter: UInt64, seen: VersionVector) {
        self.candidate = candidate
        self.origin = origin
        self.counter = counter
        self.seen = seen
    }

    public var id: ConversationID { candidate.id }

    /// Whether this creation's origin held `other` when it created this one (`other`
    /// happened before it). A birth of unknown counter (0) counts as seen by every other.
    public func saw(_ other: DistinctBirth) -> Bool {
        other.counter == 0 || seen.counters[other.origin, default: 0] >= other.counter
    }

    /// Neither origin held the other conversation when creating its own.
    public func isConcurrent(with other: DistinctBirth) -> Bool {
        id != other.id && !saw(other) && !other.saw(self)
    }
}

/// What joining a newly arrived distinct creation to the ones held does (see
/// `DistinctResolution.join`).
public struct DistinctJoin: Hashable, Sendable {
    /// The survivor of the newcomer's class (possibly the newcomer).
    public var survivor: ConversationID
    /// The conversations retired into `survivor`: the former survivors of the classes the
    /// newcomer joins, and the newcomer unless it survives. Empty when it joins none.
    public var retired: [ConversationID]

    public init(survivor: ConversationID, retired: [ConversationID]) {
        self.survivor = survivor
        self.retired = retired
    }
}

extension DistinctResolution {
    /// The merge classes of the distinct creations of one participant set: two conversations
    /// belong to one class when neither's origin had seen the other when creating its own
    /// (they were created concurrently), and classes are closed under that (connected
    /// components). Each class maps to its survivor, its earliest creation (`ranksBefore`).
    ///
    /// Every node ends with the same births, so every node derives the same classes. A node
    /// applies them incrementally (`join`): since operations arrive in causal order, a
    /// newcomer arrives after every birth it saw, so joining never splits a class: classes only
    /// merge, and the incremental result is this one whatever the order of arrival.
    ///
    /// Returns every conversation of `group` mapped to its class's survivor (itself included).
    public static func classes(of group: [DistinctBirth]) -> [ConversationID: ConversationID] {
        var parent: [ConversationID: ConversationID] = [:]
        for b in group { parent[b.id] = b.id }
        func root(_ id: ConversationID) -> ConversationID {
            var r = id
            while let p = parent[r], p != r { r = p }
            return r
        }
        let byID = Dictionary(group.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        for (i, a) in group.enumerated() {
            for b in group[(i + 1)...] where a.isConcurrent(with: b) {
                let ra = root(a.id)
                let rb = root(b.id)
                guard ra != rb, let ca = byID[ra]?.candidate, let cb = byID[rb]?.candidate else { continue }
                // The root of a class is its survivor: the earlier of the two roots.
                if DistinctCandidate.ranksBefore(ca, cb) { parent[rb] = ra } else { parent[ra] = rb }
            }
        }
        var out: [ConversationID: ConversationID] = [:]
        for b in group { out[b.id] = root(b.id) }
        return out
    }

    /// What a node holding `group` (the births of `newcomer`'s participant set it holds, the
    /// newcomer excluded) does when `newcomer` arrives: `survivorOf` gives each held
    /// conversation's current class survivor. The newcomer joins every class holding a
    /// conversation concurrent with it, and `alsoJoin` (the live distinct conversation of the
    /// set, if any: under causal delivery one that saw it would have found it non-distinct, so
    /// it is concurrent; this also covers births of unknown counter). The joined classes and the
    /// newcomer become one class whose survivor is the earliest of their survivors.
    public static func join(
        _ newcomer: DistinctBirth, group: [DistinctBirth], survivorOf: (ConversationID) -> ConversationID,
        alsoJoin: ConversationID? = nil
    ) -> DistinctJoin {
        let byID = Dictionary(group.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        var joined = Set(group.filter { $0.isConcurrent(with: newcomer) }.map { survivorOf($0.id) })
        if let alsoJoin { joined.insert(survivorOf(alsoJoin)) }
        joined.remove(newcomer.id)
        var survivor = newcomer.candidate
        for id in joined {
            guard let c = byID[id]?.candidate else { continue }
            if DistinctCandidate.ranksBefore(c, survivor) { survivor = c }
        }
        var retired = joined.subtracting([survivor.id])
        if survivor.id != newcomer.id { retired.insert(newcomer.id) }
        return DistinctJoin(survivor: survivor.id, retired: retired.sorted { $0.uuid.uuidString < $1.uuid.uuidString })
    }
}
