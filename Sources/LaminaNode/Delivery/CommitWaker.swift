import Foundation

/// The wake-up half of a transactional outbox: rows queued inside a transaction are counted
/// per key (a webhook, a push provider), and once the transaction commits the delivery is told
/// which keys got rows (a rollback forgets them, so nobody is woken for rows that never were).
/// Used on the writer thread, one transaction at a time.
final class CommitWaker<Key: Hashable & Sendable>: Sendable {
    private struct Pending {
        var counts: [Key: Int] = [:]
        var armed = false
    }
    private let pending = Locked(Pending())
    private let waker = Locked<(@Sendable ([Key: Int]) -> Void)?>(nil)

    /// Whom to wake after commits (replaces the previous one).
    func setWaker(_ waker: @escaping @Sendable ([Key: Int]) -> Void) {
        self.waker.withLock { $0 = waker }
    }

    /// `count` rows were queued for `key` in `tx`.
    func queued(_ count: Int, for key: Key, in tx: StorageTransaction) {
        let arm = pending.withLock { p -> Bool in
            p.counts[key, default: 0] += count
            defer { p.armed = true }
            return !p.armed
        }
        guard arm else { return }
        let pending = self.pending, waker = self.waker
        // Runs when the group ends; a rollback forgets the rows, so nobody is woken.
        tx.afterTransaction { committed in
            let woken = pending.withLock { p -> [Key: Int] in
                defer { p = Pending() }
                return p.counts
            }
            if committed { waker.withLock { $0 }?(woken) }
        }
    }
}
