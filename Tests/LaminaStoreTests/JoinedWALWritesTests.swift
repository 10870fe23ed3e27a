import Foundation
import GRDB
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

/// The writer's WAL writes joined into one per commit (`JoinedWALWrites`, `CLaminaSQLiteWAL`):
/// fewer system calls, the same database.
@Suite struct JoinedWALWritesTests {
    /// A connection as the store's writer has it: WAL, every commit synced.
    private func syncedQueue(at path: String, cachePages: Int = 2_000) throws -> DatabaseQueue {
        try JoinedWALWrites.register()
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let queue = try DatabaseQueue(path: path)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try db.execute(sql: "PRAGMA cache_size = \(cachePages)")
            try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        }
        return queue
    }

    private static func body(_ i: Int, size: Int = 3_000) -> Data {
        Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i) })
    }

    @Test func eachCommitReachesTheWALAsOneWriteAndReadsBackWhole() throws {
        let (path, cleanup) = temporaryDatabasePath()
        defer { cleanup() }
        let queue = try syncedQueue(at: path)
        // A reader, as the pool's, reads each commit while the writer's scope is still open.
        let reader = try DatabaseQueue(path: path)
        var seen: [Int] = []
        let (requested, issued) = try queue.writeWithoutTransaction { db in
            try JoinedWALWrites.joining {
                let before = JoinedWALWrites.counters
                for i in 0..<20 {
                    try db.inTransaction {
                        try db.execute(sql: "INSERT INTO t (id, body) VALUES (?, ?)", arguments: [i, Self.body(i)])
                        try db.execute(
                            sql: "INSERT INTO t (id, body) VALUES (?, ?)", arguments: [100 + i, Self.body(i)])
                        return .commit
                    }
                    seen.append(
                        try reader.read { r in try Int.fetchOne(r, sql: "SELECT sum(length(body)) FROM t") ?? 0 })
                }
                let after = JoinedWALWrites.counters
                return (after.requested - before.requested, after.issued - before.issued)
            }
        }
        #expect(seen == (1...20).map { $0 * 6_000 })
        // Two rows of 3,000 bytes are at least two pages a commit, each page two writes.
        #expect(requested >= 80)
        #expect(issued == 20)

        // And every commit, byte for byte, once the scope ended.
        let rows = try reader.read { db in try Row.fetchAll(db, sql: "SELECT id, body FROM t ORDER BY id") }
        #expect(rows.count == 40)
        for row in rows {
            let id: Int = row["id"]
            #expect(row["body"] as Data == Self.body(id % 100))
        }
        #expect(try reader.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
    }

    /// More than the unix VFS writes at once (128 KiB), and pages the connection spills to
    /// the WAL mid-transaction and reads back: the commit succeeds and reads what it wrote.
    @Test func aLargeTransactionThatSpillsCommitsAndReadsItsOwnPages() throws {
        let (path, cleanup) = temporaryDatabasePath()
        defer { cleanup() }
        let queue = try syncedQueue(at: path, cachePages: 10)
        let (sum, issued, requested) = try queue.writeWithoutTransaction { db in
            try JoinedWALWrites.joining {
                let before = JoinedWALWrites.counters
                var sum = 0
                try db.inTransaction {
                    for i in 0..<200 {
                        try db.execute(sql: "INSERT INTO t (id, body) VALUES (?, ?)", arguments: [i, Self.body(i)])
                    }
                    sum = try Int.fetchOne(db, sql: "SELECT sum(length(body)) FROM t") ?? 0
                    return .commit
                }
                let after = JoinedWALWrites.counters
                return (sum, after.issued - before.issued, after.requested - before.requested)
            }
        }
        #expect(sum == 200 * 3_000)
        // ~150 pages, 600 KB of frames: joined in writes of at most 128 KiB.
        #expect(requested >= 300)
        #expect(issued >= 5)
        #expect(issued < requested / 10)

        let reader = try DatabaseQueue(path: path)
        let bodies = try reader.read { db in try Data.fetchAll(db, sql: "SELECT body FROM t ORDER BY id") }
        #expect(bodies == (0..<200).map { Self.body($0) })
        #expect(try reader.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
    }

    /// After a checkpoint the WAL starts again at its beginning: writes that go back in the
    /// file are not joined to the ones before, and the database stays whole.
    @Test func aRestartedWALKeepsEveryCommit() throws {
        let (path, cleanup) = temporaryDatabasePath()
        defer { cleanup() }
        let queue = try syncedQueue(at: path)
        try queue.writeWithoutTransaction { db in
            try JoinedWALWrites.joining {
                for i in 0..<30 {
                    try db.inTransaction {
                        try db.execute(sql: "INSERT INTO t (id, body) VALUES (?, ?)", arguments: [i, Self.body(i)])
                        return .commit
                    }
                    if i % 10 == 9 { try db.execute(sql: "PRAGMA wal_checkpoint(RESTART)") }
                }
            }
        }
        let reader = try DatabaseQueue(path: path)
        let bodies = try reader.read { db in try Data.fetchAll(db, sql: "SELECT body FROM t ORDER BY id") }
        #expect(bodies == (0..<30).map { Self.body($0) })
        #expect(try reader.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
    }

    /// Outside a joining scope every write is passed through as it comes.
    @Test func outsideAScopeNothingIsJoined() throws {
        let (path, cleanup) = temporaryDatabasePath()
        defer { cleanup() }
        let queue = try syncedQueue(at: path)
        let (requested, issued) = try queue.writeWithoutTransaction { db in
            let before = JoinedWALWrites.counters
            for i in 0..<5 {
                try db.inTransaction {
                    try db.execute(sql: "INSERT INTO t (id, body) VALUES (?, ?)", arguments: [i, Self.body(i)])
                    return .commit
                }
            }
            let after = JoinedWALWrites.counters
            return (after.requested - before.requested, after.issued - before.issued)
        }
        #expect(requested >= 20)
        #expect(issued == requested)
    }
}
