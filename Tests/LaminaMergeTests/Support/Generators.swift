import Foundation
import LaminaMerge
import LaminaModel

/// Small pools of values so that random operations collide often (same users, paths,
/// messages, timestamps), which is where merge bugs live.
enum Gen {
    static let users: [UserID] = ["u1", "u2", "u3", "u4", "u5"]
    static let nodes: [NodeID] = [NodeID(1), NodeID(2), NodeID(3)]

    static func uuid(_ n: UInt8) -> UUID { UUID(uuid: (n, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, n)) }
    static let conversations: [ConversationID] = (1...4).map { ConversationID(uuid: uuid($0)) }
    static let messages: [MessageID] = (1...8).map { MessageID(uuid: uuid($0)) }
    static let paths: [MetadataKeyPath] = ["a", "a.b", "a.c", "a.b.c", "b", "b.x", "c"].map {
        try! MetadataKeyPath(parsing: $0)
    }
    static let strings = ["red", "blue", "green", ""]

    static func user(_ r: inout SplitMix64) -> UserID { r.pick(users) }
    static func node(_ r: inout SplitMix64) -> NodeID { r.pick(nodes) }

    /// A timestamp from a narrow range, so equal physical parts and ties are common.
    static func hlc(_ r: inout SplitMix64) -> HLCTimestamp {
        HLCTimestamp(
            physical: UInt64.random(in: 0..<12, using: &r), logical: UInt32.random(in: 0..<3, using: &r), node: node(&r)
        )
    }

    static func users(_ r: inout SplitMix64, min: Int = 1) -> Set<UserID> {
        var set = Set(users.filter { _ in r.chance(0.4) })
        while set.count < min { set.insert(user(&r)) }
        return set
    }

    static func count(_ r: inout SplitMix64, _ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &r) }

    // MARK: operations per replicated type

    /// Genesis timestamps are shared per conversation in real life; here one fixed genesis
    /// plus, rarely, a competing one (a faulty replica) to exercise the tie rule.
    static let genesis = MembershipGenesis(
        participants: ["u1", "u2"], creator: "u1", isDistinct: true,
        at: HLCTimestamp(physical: 1, logical: 0, node: NodeID(1)))

    static func membershipOps(_ r: inout SplitMix64) -> [MembershipLog.Operation] {
        var ops: [MembershipLog.Operation] = []
        if r.chance(0.8) { ops.append(.genesis(genesis)) }
        if r.chance(0.1) {
            ops.append(
                .genesis(
                    MembershipGenesis(
                        participants: users(&r), creator: user(&r), isDistinct: r.chance(0.5), at: hlc(&r))))
        }
        for _ in 0..<count(&r, 0...8) {
            ops.append(
                .change(
                    MembershipOperation(r.chance(0.5) ? .add : .remove, user: user(&r), actor: user(&r), at: hlc(&r))))
        }
        return ops
    }

    static func statusOps(_ r: inout SplitMix64) -> [RecipientStatusLattice.Operation] {
        (0..<count(&r, 0...10)).map { _ in
            if r.chance(0.7) {
                return .status(
                    MessageUserKey(message: r.pick(messages), user: user(&r)), r.pick(RecipientStatus.allCases))
            }
            return .readUpTo(ConversationUserKey(conversation: r.pick(conversations), user: user(&r)), hlc(&r))
        }
    }

    static func metadataOp(_ r: inout SplitMix64) -> MetadataOperation {
        MetadataOperation(r.chance(0.7) ? .set(r.pick(strings)) : .delete, at: r.pick(paths), timestamp: hlc(&r))
    }

    static func metadataOps(_ r: inout SplitMix64) -> [MetadataOperation] {
        (0..<count(&r, 0...10)).map { _ in metadataOp(&r) }
    }

    static func presenceOps(_ r: inout SplitMix64) -> [PresenceReport] {
        (0..<count(&r, 0...8)).map { _ in
            let choice =
                r.chance(0.6)
                ? PresenceChoice(status: r.pick([.available, .away, .busy, .invisible]), at: hlc(&r)) : nil
            return PresenceReport(node: node(&r), devices: count(&r, 0...2), choice: choice, at: hlc(&r))
        }
    }

    static func channelOps(_ r: inout SplitMix64) -> [ChannelMembershipOperation] {
        (0..<count(&r, 0...8)).map { _ in
            let roll = count(&r, 0...9)
            if roll == 0 { return .deleted(at: hlc(&r)) }
            return roll % 2 == 0 ? .joined(user(&r), at: hlc(&r)) : .left(user(&r), at: hlc(&r))
        }
    }

    static let reactionKeys = ["👍", "❤️", "x"]

    static func reaction(_ r: inout SplitMix64) -> Reaction { Reaction(user: user(&r), key: r.pick(reactionKeys)) }

    /// Adds, and removes naming a few tags (some of adds that exist, some of none).
    static func reactionOps(_ r: inout SplitMix64) -> [ReactionOperation] {
        (0..<count(&r, 0...10)).map { _ in
            if r.chance(0.6) { return .added(reaction(&r), tag: hlc(&r)) }
            return .removed(reaction(&r), observed: Set((0..<count(&r, 0...3)).map { _ in hlc(&r) }))
        }
    }

    static func notificationOps(_ r: inout SplitMix64) -> [NotificationSetting.Write] {
        (0..<count(&r, 0...6)).map { _ in
            NotificationSetting.Write(
                level: r.pick(NotificationLevel.allCases), until: r.chance(0.5) ? UInt64(count(&r, 0...12)) : nil,
                at: hlc(&r))
        }
    }

    /// A few part ids and values, so writes of one part collide (equal readings too).
    static let partIDs: [UUID] = (1...4).map { uuid(0x50 + $0) }
    static func part(_ r: inout SplitMix64, id: UUID) -> MessagePart {
        MessagePart(id: id, mimeType: .textPlain, content: .inline(Array(r.pick(strings).utf8)))
    }

    static func partsOps(_ r: inout SplitMix64) -> [MessagePartsEdit] {
        (0..<count(&r, 0...6)).map { _ in
            let ids = partIDs.filter { _ in r.chance(0.5) }
            let set = ids.filter { _ in r.chance(0.6) }.map { part(&r, id: $0) }
            let removed = partIDs.filter { id in !set.contains { $0.id == id } && r.chance(0.2) }
            let order = (ids + set.map(\.id)).reduce(into: [UUID]()) { out, id in
                if !out.contains(id) { out.append(id) }
            }
            return MessagePartsEdit(
                at: hlc(&r), set: set, removed: removed, order: r.chance(0.3) ? order.reversed() : order)
        }
    }

    static func threadOps(_ r: inout SplitMix64) -> [ThreadOperation] {
        (0..<count(&r, 0...10)).map { _ in
            r.chance(0.75) ? .replied(r.pick(messages), at: hlc(&r)) : .deleted(r.pick(messages))
        }
    }

    static func versionOps(_ r: inout SplitMix64) -> [OperationID] {
        (0..<count(&r, 0...8)).map { _ in OperationID(origin: node(&r), counter: UInt64.random(in: 1...20, using: &r)) }
    }

    static func candidate(_ r: inout SplitMix64) -> DistinctCandidate {
        // The participant set and creation time are a function of the id, as in real life.
        let index = Int.random(in: 0..<conversations.count, using: &r)
        let sets: [Set<UserID>] = [["u1", "u2"], ["u1", "u2"], ["u1", "u2", "u3"], ["u1", "u2"]]
        let times = [
            HLCTimestamp(physical: 5, logical: 0, node: NodeID(2)),
            HLCTimestamp(physical: 5, logical: 0, node: NodeID(1)),
            HLCTimestamp(physical: 3, logical: 0, node: NodeID(3)),
            HLCTimestamp(physical: 9, logical: 1, node: NodeID(1)),
        ]
        if r.chance(0.05) {  // a faulty replica's differing record of the same id
            return DistinctCandidate(id: conversations[index], participants: r.pick(sets), createdAt: hlc(&r))
        }
        return DistinctCandidate(id: conversations[index], participants: sets[index], createdAt: times[index])
    }

    static func distinctOps(_ r: inout SplitMix64) -> [DistinctRegistry.Operation] {
        (0..<count(&r, 0...6)).map { _ in
            r.chance(0.6) ? .created(candidate(&r)) : .becameNonDistinct(r.pick(conversations), at: hlc(&r))
        }
    }

    static let unreadConversation = UnreadCounts().conversation

    static func stamp(_ r: inout SplitMix64, _ index: Int) -> MessageStamp {
        // Position and sender are a function of the message id, as in real life.
        MessageStamp(
            id: messages[index], conversation: unreadConversation, sender: users[index % 3],
            position: HLCTimestamp(physical: UInt64(2 + index), logical: 0, node: nodes[index % 3])
        )
    }

    static func unreadOps(_ r: inout SplitMix64) -> [UnreadCounts.Operation] {
        var ops: [UnreadCounts.Operation] = []
        for _ in 0..<count(&r, 0...10) {
            switch Int.random(in: 0..<6, using: &r) {
            case 0, 1: ops.append(.created(stamp(&r, Int.random(in: 0..<messages.count, using: &r))))
            case 2: ops.append(.deleted(r.pick(messages), forUser: r.chance(0.5) ? user(&r) : nil))
            case 3:
                let user = user(&r)
                ops.append(
                    r.chance(0.5)
                        ? .receipt(
                            .readUpTo(ConversationUserKey(conversation: unreadConversation, user: user), hlc(&r)))
                        : .receipt(
                            .status(
                                MessageUserKey(message: r.pick(messages), user: user), r.pick(RecipientStatus.allCases))
                        ))
            case 4: ops.append(.historyCleared(upTo: hlc(&r), forUser: r.chance(0.5) ? user(&r) : nil))
            default: ops.append(contentsOf: membershipOps(&r).prefix(2).map { .membership($0) })
            }
        }
        return ops
    }
}
