import Foundation
import NIOConcurrencyHelpers

/// Starts child processes one at a time: Foundation's `Process.run()` on Linux crashed once
/// (memmove in `run`) while several suites of this bundle launched processes at once.
enum ProcessLaunch {
    private static let lock = NIOLock()

    static func run(_ process: Process) throws {
        try lock.withLock { try process.run() }
    }
}
