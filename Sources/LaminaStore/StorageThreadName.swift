import Foundation

/// Names of the store's own threads, as `top -H`, `perf` and `/proc/PID/task/*/comm` show them.
/// Linux keeps a thread name of at most ``maxBytes`` bytes and refuses a longer one, so each
/// fits. Each thread names itself first thing with ``nameCurrentThread(_:)``: Foundation on
/// Linux gives the system a name only when it finds the named thread to be the current one,
/// which right after `start()` it sometimes does not (the name then stays the creator's).
package enum StorageThreadName {
    /// The storage writer (group commit).
    package static let writer = "lamina-writer"
    /// The thread that completes committed groups while the writer starts the next one.
    package static let completions = "lamina-complete"
    /// The PostgreSQL store's LISTEN connection.
    package static let listener = "lamina-pglisten"
    /// The libpq listening connection's own thread (notifications and the statements sent on it).
    package static let notifications = "lamina-pgnotify"
    /// A reader thread of the PostgreSQL store's pool (numbered from 1: `lamina-pgread1`).
    package static let reader = "lamina-pgread"
    /// The longest thread name Linux keeps.
    package static let maxBytes = 15
    static let all = [writer, completions, listener]

    /// Names the calling thread, for Foundation and for the system (Linux: the thread's own
    /// `comm`, which is where the system keeps it; elsewhere Foundation's name only).
    static func nameCurrentThread(_ name: String) {
        Thread.current.name = name
        #if os(Linux)
            try? name.write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
        #endif
    }
}
