/// Names of the store's own threads, as `top -H`, `perf` and `/proc/PID/task/*/comm` show them.
/// Linux keeps a thread name of at most ``maxBytes`` bytes and refuses a longer one, so each
/// fits; and Foundation on Linux gives the system a thread's name only when the thread names
/// itself (a name set before `start()` stays Foundation's), so each thread does, first thing.
package enum StorageThreadName {
    /// The storage writer (group commit).
    package static let writer = "lamina-writer"
    /// The thread that completes committed groups while the writer starts the next one.
    package static let completions = "lamina-complete"
    /// The PostgreSQL store's LISTEN connection.
    package static let listener = "lamina-pglisten"
    /// The longest thread name Linux keeps.
    package static let maxBytes = 15
    static let all = [writer, completions, listener]
}
