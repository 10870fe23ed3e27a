#ifndef LAMINA_SQLITE_WAL_H
#define LAMINA_SQLITE_WAL_H

/// Registers, once per process, a SQLite VFS that wraps the default one and becomes the
/// default: every call is passed through, except that WAL writes made inside a joining
/// scope (below) are gathered in memory while they follow each other in the file, and
/// written with one `pwrite` when anything else touches the WAL (a sync, a read, a size,
/// a truncation, a write elsewhere, a close) or the scope ends. A commit's frames (a
/// 24-byte header and a page each, two writes per frame) then reach the kernel as one
/// write before the commit's sync. Returns SQLITE_OK or SQLite's error code.
int lamina_sqlite_wal_register(void);

/// Starts a joining scope on this thread. Only for a connection that syncs every commit
/// (`synchronous=FULL`): its commits end in a sync, which writes what was gathered before
/// the commit becomes visible to readers. Scopes nest.
void lamina_sqlite_wal_join_begin(void);

/// Ends this thread's joining scope; the outermost end writes what is still gathered.
/// Returns SQLITE_OK or the error of that write.
int lamina_sqlite_wal_join_end(void);

/// Counters of this thread: writes SQLite asked of WAL files, and writes made of them
/// (joined ones count once). For tests.
void lamina_sqlite_wal_counters(unsigned long long *requested, unsigned long long *issued);

#endif
