import CLaminaSQLiteWAL

/// The writer's WAL writes joined into one system call per commit (`CLaminaSQLiteWAL`).
///
/// SQLite writes a WAL frame as two `pwrite`s (its 24-byte header, then the page), so a
/// commit of n pages costs 2n system calls before its sync. The writer connection, which
/// syncs every commit (`synchronous=FULL`), runs its groups in a joining scope: the frames
/// of a commit are gathered while they follow each other in the file and written with one
/// `pwrite` just before the sync. Readers see a commit only after that sync, so they never
/// read a gathered frame from the file before it is there.
enum JoinedWALWrites {
    /// Makes the joining VFS SQLite's default, once per process, before a pool opens (it
    /// passes every call through; only a joining scope gathers anything).
    static func register() throws(StorageError) {
        let code = lamina_sqlite_wal_register()
        guard code == 0 else {
            throw StorageError(.openFailed, "SQLite refused the joining VFS (error \(code))")
        }
    }

    /// Runs `body` with this thread's WAL writes joined. Only around a connection that syncs
    /// every commit: a commit that is not synced would be visible before it is written.
    static func joining<T>(_ body: () throws -> T) rethrows -> T {
        lamina_sqlite_wal_join_begin()
        // What a failed group left gathered lies past the last commit: written or not, no
        // reader looks there.
        defer { _ = lamina_sqlite_wal_join_end() }
        return try body()
    }

    /// Writes SQLite asked of WAL files on this thread, and writes made of them.
    package static var counters: (requested: UInt64, issued: UInt64) {
        var requested: UInt64 = 0
        var issued: UInt64 = 0
        lamina_sqlite_wal_counters(&requested, &issued)
        return (requested, issued)
    }
}
