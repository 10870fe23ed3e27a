import Foundation
import LaminaModel
import LaminaWire

/// Every user's block list, held in memory (loaded when the engine starts, changed only
/// through ``NodeEngine/block(_:by:)`` and ``NodeEngine/unblock(_:by:)``): fan-out asks it
/// per message without a query.
final class BlockLists: Sendable {
    private let lists: Locked<[UserID: Set<UserID>]>

    init(_ lists: [UserID: Set<UserID>]) { self.lists = Locked(lists) }

    /// `recipients` without the users who block `sender`.
    func recipients(_ recipients: Set<UserID>, of sender: UserID) -> Set<UserID> {
        lists.withLock { lists in
            guard !lists.isEmpty else { return recipients }
            return recipients.filter { lists[$0]?.contains(sender) != true }
        }
    }

    /// The users `blocker` blocks (their messages are left out of `blocker`'s counts).
    func blocked(by blocker: UserID) -> Set<UserID> {
        lists.withLock { $0[blocker] ?? [] }
    }

    func set(_ blocked: UserID, by blocker: UserID, blocking: Bool) {
        lists.withLock { lists in
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
    enum BlockResult: Sendable { case added, alreadyBlocked, full }

    /// `blocker` stops receiving `blocked`'s messages (stored, then in the fan-out's lists);
    /// `full` (nothing changed) when `blocker` blocks `limit` users already.
    func block(_ blocked: UserID, by blocker: UserID, limit: Int) async throws -> BlockResult {
        let result = try await store.write { [self] tx -> BlockResult in
            let current = try tx.read.blocks(of: blocker)
            if current.contains(blocked) { return .alreadyBlocked }
            guard current.count < limit else { return .full }
            try tx.block(blocked, by: blocker, at: .now())
            try recordUserState(.block(BlockChange(blocker: blocker, blocked: blocked, blocking: true)), in: tx)
            return .added
        }
        if result == .added {
            blockLists.set(blocked, by: blocker, blocking: true)
            replicationSignal.notify()
        }
        return result
    }

    /// `blocker` receives `blocked`'s messages again; false when it did not block them.
    func unblock(_ blocked: UserID, by blocker: UserID) async throws -> Bool {
        let removed = try await store.write { [self] tx -> Bool in
            guard try tx.unblock(blocked, by: blocker) else { return false }
            try recordUserState(.block(BlockChange(blocker: blocker, blocked: blocked, blocking: false)), in: tx)
            return true
        }
        blockLists.set(blocked, by: blocker, blocking: false)
        if removed { replicationSignal.notify() }
        return removed
    }
}
