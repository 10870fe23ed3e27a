import Foundation
import NIOConcurrencyHelpers

/// Wakes a delivery lane: ``signal()`` (something was queued, the webhook changed) ends the
/// current or the next ``wait(timeout:)``; signals while nobody waits collapse into one.
final class LaneSignal: Sendable {
    private struct State {
        var pending = false
        var finished = false
        var waiter: (id: UInt64, continuation: CheckedContinuation<Bool, Never>, timer: Task<Void, Never>?)?
        var nextID: UInt64 = 0
    }
    private let state = NIOLockedValueBox(State())

    /// Wakes the lane (now, or at its next wait).
    func signal() {
        let woken = state.withLockedValue { s -> (CheckedContinuation<Bool, Never>, Task<Void, Never>?)? in
            guard let w = s.waiter else {
                s.pending = true
                return nil
            }
            s.waiter = nil
            return (w.continuation, w.timer)
        }
        woken?.1?.cancel()
        woken?.0.resume(returning: true)
    }

    /// Ends every wait, now and later: they return false.
    func finish() {
        let woken = state.withLockedValue { s -> (CheckedContinuation<Bool, Never>, Task<Void, Never>?)? in
            s.finished = true
            defer { s.waiter = nil }
            return s.waiter.map { ($0.continuation, $0.timer) }
        }
        woken?.1?.cancel()
        woken?.0.resume(returning: false)
    }

    /// Waits for a signal, or until `timeout` has passed (nil: no limit). False once finished.
    /// (A wake-up may be spurious; the lane looks at its queue again either way.)
    func wait(timeout: Duration?) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let registered = state.withLockedValue { s -> Result<UInt64, Never>? in
                if s.finished || s.pending { return nil }
                s.nextID += 1
                s.waiter = (s.nextID, continuation, nil)
                return .success(s.nextID)
            }
            guard case .success(let id) = registered else {
                let finished = state.withLockedValue { s -> Bool in
                    s.pending = false
                    return s.finished
                }
                continuation.resume(returning: !finished)
                return
            }
            guard let timeout else { return }
            let state = self.state
            let timer = Task {
                try? await Task.sleep(for: timeout)
                let expired = state.withLockedValue { s -> CheckedContinuation<Bool, Never>? in
                    guard let w = s.waiter, w.id == id else { return nil }
                    s.waiter = nil
                    return w.continuation
                }
                expired?.resume(returning: true)
            }
            // The timer is cancelled with its wait when a signal ends the wait first.
            let current = state.withLockedValue { s -> Bool in
                guard var w = s.waiter, w.id == id else { return false }
                w.timer = timer
                s.waiter = w
                return true
            }
            if !current { timer.cancel() }
        }
    }
}
