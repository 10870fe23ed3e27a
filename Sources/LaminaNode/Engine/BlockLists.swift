import Foundation
import LaminaModel
import LaminaStore
import LaminaWire
import NIOConcurrencyHelpers

/// Every user's block list, held in memory (loaded when the engine starts, changed only
/// through ``NodeEngine/block(_:by:)`` and ``NodeEngine/unblock(_:by:)``): fan-out asks it
/// per message without a query.
final class BlockLists: Sendable {
    private let lists: NIOLockedValueBox<[UserID: Set<UserID>]>

    init(_ lists: [UserID: Set<UserID>]) { self.lists = NIOLockedValueBox(lists) }

    /// `recipients` without the users who block `sender`.
    func recipients(_ recipients: Set<UserID>, of sender: UserID) -> Set<UserID> {
        lists.withLockedValue { lists in
            guard !lists.isEmpty else { return recipients }
            return recipients.filter { lists[$0]?.contains(sender) != true }
        }
    }

    /// The users `blocker` blocks (their messages are left out of `blocker`'s counts).
    func blocked(by blocker: UserID) -> Set<UserID> {
        lists.withLockedValue { $0[blocker] ?? [] }
    }

    func set(_ blocked: UserID, by blocker: UserID, blocking: Bool) {
        lists.withLockedValue { lists in
            if blocking {
                lists[blocker, default: []].insert(blocked)
            } else {
                lists[blocker]?.remove(blocked)
                if lists[blocker]?.isEmpty == true { lists[blocker] = nil }
            }
        }
    }
}

extension NodeEngine {
    /// What ``block(_:by:limit:)`` did.
    enum BlockResult: Sendable { case added, alreadyBlocked, full, ownself }

    /// `blocker` stops receiving `blocked`'s messages (stored, then in the fan-out's lists);
    /// `full` (nothing changed) when `blocker` blocks `limit` users already, `ownself` when
    /// `blocked` is `blocker`. The one rule for the Server API and BLOCK_USER alike.
    func block(_ blocked: UserID, by blocker: UserID, limit: Int) async throws -> BlockResult {
        guard blocked != blocker else { return .ownself }
        let (result, changes) = try await store.write { [self] tx -> (BlockResult, [FeedChange]) in
            let current = try tx.read.blocks(of: blocker)
            if current.contains(blocked) { return (.alreadyBlocked, []) }
            guard current.count < limit else { return (.full, []) }
            try tx.block(blocked, by: blocker, at: .now())
            try recordUserState(.block(BlockChange(blocker: blocker, blocked: blocked, blocking: true)), in: tx)
            let changes = try countsAfterBlockChange(
                of: blocker, with: blocked, blocking: true, blocks: Set(current).union([blocked]), in: tx)
            return (.added, changes)
        }
        if result == .added {
            blockLists.set(blocked, by: blocker, blocking: true)
            publish(changes)
            replicationSignal.notify()
        }
        return result
    }

    /// SPEC §6.4: a block list change moves the blocker's counts of every live conversation
    /// they share with the other user; each gets a `conversation-updated` in the blocker's feed
    /// (same transaction), counted with the list as it is after the change.
    /// Before them, the blocker's devices are told the list changed (`block-list-changed`).
    private func countsAfterBlockChange(
        of blocker: UserID, with other: UserID, blocking: Bool, blocks: Set<UserID>, in tx: StorageTransaction
    ) throws -> [FeedChange] {
        var context = CommandContext(tx: tx, user: blocker, engine: self, now: .now())
        try context.emit(
            .blockListChanged(BlockListChanged(user: other, blocking: blocking)), to: [blocker], conversation: nil)
        for stored in try tx.read.conversations(of: blocker)
        where stored.isLive && stored.conversation.participants.contains(other) {
            try context.emitCounts(of: stored.conversation.id, to: [blocker], blocked: blocks)
        }
        return context.changes
    }

    /// `blocker` receives `blocked`'s messages again; false when it did not block them.
    func unblock(_ blocked: UserID, by blocker: UserID) async throws -> Bool {
        let (removed, changes) = try await store.write { [self] tx -> (Bool, [FeedChange]) in
            guard try tx.unblock(blocked, by: blocker) else { return (false, []) }
            try recordUserState(.block(BlockChange(blocker: blocker, blocked: blocked, blocking: false)), in: tx)
            return (
                true,
                try countsAfterBlockChange(
                    of: blocker, with: blocked, blocking: false, blocks: Set(try tx.read.blocks(of: blocker)), in: tx)
            )
        }
        blockLists.set(blocked, by: blocker, blocking: false)
        if removed {
            publish(changes)
            replicationSignal.notify()
        }
        return removed
    }
}
