import Foundation
import LaminaModel

/// Everything one conversation's unread counts depend on, as a CRDT: the messages
/// created (grow-only), deletions (tombstones, grow-only), history cleared up to a
/// position (max-registers), reads (the recipient status lattice) and membership (the
/// operation log). Counts are derived from this state, never kept as counters, so they
/// are right whatever order the events arrive in, and with duplicates.
///
/// A message counts as unread for user U iff: U did not send it; U may see it
/// (`MembershipLog.canSee`); it is not deleted for everyone or for U; it is above the
/// history U (or everyone) cleared; and U has not read it, individually or through a
/// read-up-to position. Messages without a position (not yet accepted) never count.
///
/// After a distinct merge, the survivor's state holds the merged conversations' messages
/// too (`DistinctRegistry` says which); their stamps keep the conversation they were sent
/// to, so a read-up-to recorded in that conversation still covers them, and so does a
/// read-up-to in the survivor (`conversation`). Merge two states of the same conversation
/// only; the result keeps `self`'s `conversation`.
public struct UnreadCounts: ReplicatedState, Hashable {
    public enum Operation: Hashable, Sendable {
        /// A message was accepted into the conversation.
        case created(MessageStamp)
        /// A message was deleted for everyone (`forUser` nil) or for one user's devices.
        case deleted(MessageID, forUser: UserID?)
        /// Messages at or below `position` were deleted while the conversation stays,
        /// for everyone (`forUser` nil) or for one user.
        case historyCleared(upTo: MessagePosition, forUser: UserID?)
        /// A read (individual or read-up-to) or any other status change.
        case receipt(RecipientStatusLattice.Operation)
        /// A membership change or the conversation's genesis.
        case membership(MembershipLog.Operation)
    }

    public let conversation: ConversationID
    public private(set) var messages: [MessageID: MessageStamp]
    public private(set) var deletedForAll: Set<MessageID>
    public private(set) var deletedForUser: Set<MessageUserKey>
    public private(set) var clearedForAll: MessagePosition?
    public private(set) var clearedForUser: [UserID: MessagePosition]
    public private(set) var receipts: RecipientStatusLattice
    public private(set) var membership: MembershipLog

    /// An empty state for `conversation`.
    public init(conversation: ConversationID) {
        self.conversation = conversation
        messages = [:]
        deletedForAll = []
        deletedForUser = []
        clearedForAll = nil
        clearedForUser = [:]
        receipts = RecipientStatusLattice()
        membership = MembershipLog()
    }

    /// An empty state for a conversation with the nil UUID (for generic code; prefer
    /// `init(conversation:)`).
    public init() {
        self.init(conversation: ConversationID(uuid: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))))
    }

    public mutating func apply(_ operation: Operation) {
        switch operation {
        case .created(let m):
            guard m.position != nil else { return }
            if let current = messages[m.id], !Self.stampPrecedes(m, current) { return }
            messages[m.id] = m
        case .deleted(let id, let user):
            if let user {
                deletedForUser.insert(MessageUserKey(message: id, user: user))
            } else {
                deletedForAll.insert(id)
            }
        case .historyCleared(let position, let user):
            if let user {
                if let current = clearedForUser[user], current >= position { return }
                clearedForUser[user] = position
            } else {
                if let current = clearedForAll, current >= position { return }
                clearedForAll = position
            }
        case .receipt(let op):
            receipts.apply(op)
        case .membership(let op):
            membership.apply(op)
        }
    }

    /// Merges another replica's state of the same conversation.
    public func merged(with other: UnreadCounts) -> UnreadCounts {
        var out = self
        for m in other.messages.values { out.apply(.created(m)) }
        out.deletedForAll.formUnion(other.deletedForAll)
        out.deletedForUser.formUnion(other.deletedForUser)
        if let p = other.clearedForAll { out.apply(.historyCleared(upTo: p, forUser: nil)) }
        for (user, p) in other.clearedForUser { out.apply(.historyCleared(upTo: p, forUser: user)) }
        out.receipts.merge(other.receipts)
        out.membership.merge(other.membership)
        return out
    }

    /// The messages unread by `user`, in position order.
    public func unreadMessages(for user: UserID) -> [MessageStamp] {
        let cleared = [clearedForAll, clearedForUser[user]].compactMap { $0 }.max()
        let standing = membership.standing(of: user)
        let ownReadUpTo = receipts.readUpTo[ConversationUserKey(conversation: conversation, user: user)]
        return messages.values.filter { m in
            guard let position = m.position else { return false }
            let deleted =
                cleared.map { position <= $0 } == true
                || deletedForAll.contains(m.id) || deletedForUser.contains(MessageUserKey(message: m.id, user: user))
            // A merged conversation's messages keep their conversation: both read-up-to
            // positions (theirs and the survivor's) cover them.
            let readUpTo = [
                ownReadUpTo, receipts.readUpTo[ConversationUserKey(conversation: m.conversation, user: user)],
            ].compactMap { $0 }.max()
            return Self.isUnread(
                m, for: user, deleted: deleted, visible: MembershipStanding.canSee(standing, messageAt: position),
                recorded: receipts.statuses[MessageUserKey(message: m.id, user: user)], readUpTo: readUpTo
            )
        }.sorted { $0.position! < $1.position! }
    }

    /// How many messages `user` has not read.
    public func unreadCount(for user: UserID) -> Int { unreadMessages(for: user).count }

    /// The unread rule on the slice of state one (message, user) pair depends on, for stores
    /// that keep only that slice: a message counts as unread for `user` iff it has a position
    /// (the node accepted it), someone else sent it, it is not `deleted` for the user (deleted
    /// for everyone or for the user, or below a cleared history), the user may see it
    /// (`visible`: `MembershipStanding.canSee`), and its status for the user
    /// (`RecipientStatusLattice.status` from the `recorded` status and `readUpTo`) is not read.
    public static func isUnread(
        _ message: MessageStamp, for user: UserID, deleted: Bool, visible: Bool,
        recorded: RecipientStatus?, readUpTo: MessagePosition?
    ) -> Bool {
        guard message.position != nil, message.sender != user, !deleted, visible else { return false }
        return RecipientStatusLattice.status(
            of: message, for: user, recorded: recorded, deliveredUpTo: nil, readUpTo: readUpTo) != .read
    }

    /// How many messages `user` may see and has not deleted (the conversation's total).
    public func messageCount(for user: UserID) -> Int {
        let standing = membership.standing(of: user)
        let cleared = [clearedForAll, clearedForUser[user]].compactMap { $0 }.max()
        return messages.values.count { m in
            guard let position = m.position else { return false }
            if let cleared, position <= cleared { return false }
            if deletedForAll.contains(m.id) || deletedForUser.contains(MessageUserKey(message: m.id, user: user)) {
                return false
            }
            return MembershipStanding.canSee(standing, messageAt: position)
        }
    }

    /// A total order for two (faulty) records of the same message id.
    static func stampPrecedes(_ a: MessageStamp, _ b: MessageStamp) -> Bool {
        if a.position != b.position { return (a.position ?? .zero) < (b.position ?? .zero) }
        if a.sender != b.sender { return a.sender < b.sender }
        return a.conversation < b.conversation
    }
}
