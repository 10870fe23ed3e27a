import NIOConcurrencyHelpers

/// Work run one piece after another, each in its own task that awaits the one before (the
/// delivery services' lease changes and subscription reloads, which arrive from notification
/// callbacks in any order of threads but must apply in the order they came).
final class SerialTasks: Sendable {
    private let last = NIOLockedValueBox<Task<Void, Never>?>(nil)

    /// Runs `body` after everything enqueued before it.
    func enqueue(_ body: @escaping @Sendable () async -> Void) {
        last.withLockedValue { last in
            let previous = last
            last = Task {
                await previous?.value
                await body()
            }
        }
    }

    /// Returns once everything enqueued so far has run.
    func drain() async {
        await last.withLockedValue({ $0 })?.value
    }
}
