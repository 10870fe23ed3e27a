import Foundation
import LaminaModel
import NIOConcurrencyHelpers

/// Content this node is fetching from a peer (CONTENT.md §9): a download of such content waits
/// here, bounded, for the fetch to finish, and asks the fetcher to look at once.
public final class ContentArrivals: Sendable {
    private struct Waiter {
        var token: UInt64
        var continuation: CheckedContinuation<Void, Never>
    }
    private struct State {
        var waiters: [ContentID: [Waiter]] = [:]
        var nextToken: UInt64 = 0
    }
    private let state = NIOLockedValueBox(State())
    private let wanted: @Sendable () -> Void

    /// `wanted` wakes the fetcher (a download is waiting).
    public init(wanted: @escaping @Sendable () -> Void = {}) {
        self.wanted = wanted
    }

    /// Returns once `id` arrived (``arrived(_:)``) or `timeout` passed, whichever is first.
    func wait(for id: ContentID, timeout: Duration) async {
        let token = state.withLockedValue { s -> UInt64 in
            s.nextToken += 1
            return s.nextToken
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            state.withLockedValue {
                $0.waiters[id, default: []].append(Waiter(token: token, continuation: continuation))
            }
            wanted()
            Task {
                try? await Task.sleep(for: timeout)
                self.resume(id) { $0.token == token }
            }
        }
    }

    /// `id` is now complete here: every download waiting for it goes on.
    public func arrived(_ id: ContentID) {
        resume(id) { _ in true }
    }

    private func resume(_ id: ContentID, where matches: (Waiter) -> Bool) {
        let resumed = state.withLockedValue { s -> [Waiter] in
            guard let list = s.waiters[id] else { return [] }
            let (go, stay) = (list.filter(matches), list.filter { !matches($0) })
            s.waiters[id] = stay.isEmpty ? nil : stay
            return go
        }
        for waiter in resumed { waiter.continuation.resume() }
    }
}
