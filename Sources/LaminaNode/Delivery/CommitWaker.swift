import Foundation
import LaminaStore
import NIOConcurrencyHelpers

/// The wake-up half of a transactional outbox: rows queued inside a transaction are counted
/// per key (a webhook, a push provider), and once the transaction commits the delivery is told
/// which keys got rows (a rollback forgets them, so nobody is woken for rows that never were).
/// Used on the writer thread, one transaction at a time.
final class CommitWaker<Key: Hashable & Sendable>: Sendable {
    private struct Pending {
        var counts: [Key: Int] = [:]
        /// The rows of the command running now (forgotten if its savepoint rolls back).
        var command: [Key: Int] = [:]
        var armed = false
        var commandArmed = false
    }
    private let pending = NIOLockedValueBox(Pending())
    /// In a struct: a bare function value in `Locked` gains two reabstraction thunks per access.
    private struct Waker {
        let wake: @Sendable ([Key: Int]) -> Void
    }
    private let waker = NIOLockedValueBox<Waker?>(nil)

    /// Whom to wake after commits (replaces the previous one).
    func setWaker(_ waker: @escaping @Sendable ([Key: Int]) -> Void) {
        self.waker.withLockedValue { $0 = Waker(wake: waker) }
    }

    /// `count` rows were queued for `key` in `tx`. They count once the command that queued
    /// them ends well and its group commits: a command that fails inside a group that commits
    /// the others' writes loses its rows, and they are not counted.
    func queued(_ count: Int, for key: Key, in tx: StorageTransaction) {
        let (arm, armCommand) = pending.withLockedValue { p -> (Bool, Bool) in
            p.command[key, default: 0] += count
            defer { (p.armed, p.commandArmed) = (true, true) }
            return (!p.armed, !p.commandArmed)
        }
        let pending = self.pending
        let waker = self.waker
        if armCommand {
            tx.afterCommand { succeeded in
                pending.withLockedValue { p in
                    if succeeded { p.counts.merge(p.command, uniquingKeysWith: +) }
                    p.command = [:]
                    p.commandArmed = false
                }
            }
        }
        guard arm else { return }
        // Runs when the group ends; a rollback forgets the rows, so nobody is woken.
        tx.afterTransaction { committed in
            let woken = pending.withLockedValue { p -> [Key: Int] in
                defer { p = Pending() }
                return p.counts.filter { $0.value > 0 }
            }
            if committed, !woken.isEmpty { waker.withLockedValue { $0 }?.wake(woken) }
        }
    }
}
