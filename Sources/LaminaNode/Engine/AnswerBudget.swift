import LaminaModel
import NIOConcurrencyHelpers

/// The node's memory for large answers in flight (FETCH_HISTORY, a SYNC backlog, a snapshot):
/// an answer holds a ``Lease`` for each page it reads from the store, from before the read
/// until the page's frames have left the stream's paced queue (or the session closed). The
/// leases together never pass ``limit`` (but for one page when nothing else is held, so an
/// answer always progresses), and one user holds at most its share: the limit over the users
/// that hold or wait for a lease, at most half of it, so one client's answers (a hundred
/// streams that never read, say) leave the other half to everyone else. Waiters are served in
/// order; one whose user is at its share lets the next one pass.
public final class AnswerBudget: Sendable {
    /// Bytes of answer pages in flight over the node.
    public let limit: Int

    private struct Waiter {
        var id: UInt64
        var user: UserID
        var bytes: Int
        var owner: ObjectIdentifier
        var continuation: CheckedContinuation<Lease?, Never>
    }

    private struct State {
        var held = 0
        var peak = 0
        var byUser: [UserID: Int] = [:]
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
        var granted = 0
    }

    private let state = NIOLockedValueBox(State())

    public init(limit: Int) {
        self.limit = limit
    }

    /// Bytes held by leases now.
    public var held: Int { state.withLockedValue { $0.held } }
    /// The most bytes held at once since the start (or the last ``resetPeak()``).
    public var peak: Int { state.withLockedValue { $0.peak } }
    /// Leases granted since the start.
    public var grants: Int { state.withLockedValue { $0.granted } }
    /// Bytes held by `user`'s leases now.
    public func held(by user: UserID) -> Int { state.withLockedValue { $0.byUser[user] ?? 0 } }
    /// Answers waiting for a lease now.
    public var waiting: Int { state.withLockedValue { $0.waiters.count } }

    /// Starts a new high-water mark at what is held now.
    public func resetPeak() { state.withLockedValue { $0.peak = $0.held } }

    /// One page's bytes, held until released (idempotent; also on deinit).
    public final class Lease: Sendable {
        let budget: AnswerBudget
        let user: UserID
        private let bytes: NIOLockedValueBox<Int>

        fileprivate init(budget: AnswerBudget, user: UserID, bytes: Int) {
            self.budget = budget
            self.user = user
            self.bytes = NIOLockedValueBox(bytes)
        }

        /// Sets what the lease holds to what the page turned out to take (a smaller size frees
        /// room for waiters at once; a larger one is counted as it is, past the limit if so).
        public func resize(to newBytes: Int) {
            let delta = bytes.withLockedValue { b -> Int in
                guard b > 0 else { return 0 }
                let target = max(1, newBytes)
                defer { b = target }
                return target - b
            }
            if delta != 0 { budget.adjust(user, by: delta) }
        }

        /// Gives the bytes back.
        public func release() {
            let held = bytes.withLockedValue { b -> Int in
                defer { b = 0 }
                return b
            }
            if held > 0 { budget.adjust(user, by: -held) }
        }

        deinit { release() }
    }

    /// A lease of `bytes` for `user`'s answer on a session that `isOpen` reports on; waits for
    /// room. Nil once the session closed (``abandon(owner:)`` ends the wait).
    func acquire(user: UserID, bytes: Int, owner: ObjectIdentifier, isOpen: @Sendable () -> Bool) async -> Lease? {
        let bytes = max(1, min(bytes, limit))
        return await withCheckedContinuation { (continuation: CheckedContinuation<Lease?, Never>) in
            let open = state.withLockedValue { s -> Bool in
                guard isOpen() else { return false }
                s.nextID += 1
                s.waiters.append(
                    Waiter(id: s.nextID, user: user, bytes: bytes, owner: owner, continuation: continuation))
                return true
            }
            if open { grantWaiters() } else { continuation.resume(returning: nil) }
        }
    }

    /// A lease of `bytes` for `user` if it fits now and nobody waits for one; nil otherwise
    /// (nothing is queued: for a page read ahead, which the caller may as well read later).
    func tryAcquire(user: UserID, bytes: Int) -> Lease? {
        let bytes = max(1, min(bytes, limit))
        return state.withLockedValue { s -> Lease? in
            guard s.waiters.isEmpty, Self.fits(user, bytes, in: s, limit: limit) else { return nil }
            return take(user, bytes, in: &s)
        }
    }

    /// Ends the waits of `owner` (its session closed): they get nil.
    func abandon(owner: ObjectIdentifier) {
        let gone = state.withLockedValue { s -> [Waiter] in
            let gone = s.waiters.filter { $0.owner == owner }
            guard !gone.isEmpty else { return [] }
            s.waiters.removeAll { $0.owner == owner }
            return gone
        }
        for waiter in gone { waiter.continuation.resume(returning: nil) }
        if !gone.isEmpty { grantWaiters() }
    }

    private func adjust(_ user: UserID, by delta: Int) {
        state.withLockedValue { s in
            s.held += delta
            s.peak = max(s.peak, s.held)
            let now = (s.byUser[user] ?? 0) + delta
            s.byUser[user] = now > 0 ? now : nil
        }
        if delta < 0 { grantWaiters() }
    }

    /// Grants waiting leases that fit now, in order (one whose user is at its share is passed over).
    private func grantWaiters() {
        let granted = state.withLockedValue { s -> [(CheckedContinuation<Lease?, Never>, Lease)] in
            var granted: [(CheckedContinuation<Lease?, Never>, Lease)] = []
            var index = 0
            while index < s.waiters.count {
                let waiter = s.waiters[index]
                if Self.fits(waiter.user, waiter.bytes, in: s, limit: limit) {
                    s.waiters.remove(at: index)
                    granted.append((waiter.continuation, take(waiter.user, waiter.bytes, in: &s)))
                } else {
                    index += 1
                }
            }
            return granted
        }
        for (continuation, lease) in granted { continuation.resume(returning: lease) }
    }

    private func take(_ user: UserID, _ bytes: Int, in s: inout State) -> Lease {
        s.held += bytes
        s.peak = max(s.peak, s.held)
        s.byUser[user, default: 0] += bytes
        s.granted += 1
        return Lease(budget: self, user: user, bytes: bytes)
    }

    /// Whether `bytes` more for `user` fit: within the limit (or nothing is held) and within
    /// the user's share (or the user holds nothing).
    private static func fits(_ user: UserID, _ bytes: Int, in s: State, limit: Int) -> Bool {
        guard s.held == 0 || s.held + bytes <= limit else { return false }
        let mine = s.byUser[user] ?? 0
        guard mine > 0 else { return true }
        var users = Set(s.byUser.keys)
        for waiter in s.waiters { users.insert(waiter.user) }
        let share = limit / max(2, users.count)
        return mine + bytes <= share
    }
}
