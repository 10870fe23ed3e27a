import Foundation
import GRDB
import GRDBSQLite
import LaminaModel

/// A statement of the write path's hot path, prepared once on the writer's connection. On
/// SQLite it runs by binding values straight into SQLite: no SQL-keyed cache lookup, no
/// argument arrays, no row objects (with `MessageSearchRank`, the only code of the node on SQLite's C API;
/// GRDB owns the statement and finalizes it when this is dropped, before the connection
/// closes). On PostgreSQL it is a named prepared statement of the writer's connection.
final class HotStatement: SQLBinder {
    private let statement: Statement?
    private let connection: OpaquePointer?
    /// The SQLite statement; nil on PostgreSQL.
    let bindingHandle: OpaquePointer?
    private let postgres: (session: PostgresSession, sql: String)?
    /// The values bound for PostgreSQL (1-based parameter `i` at `i - 1`).
    var boundValues: [SQLValue] = []
    /// PostgreSQL: the set-oriented statement this one's rows can be held back for while the
    /// writer defers (`PostgresSession.deferring`, `PostgresWriteBatch`); nil: never held back.
    var batchKind: PostgresWriteBatch.Kind?

    init(_ db: Database, _ sql: String) throws(StorageError) {
        do {
            statement = try db.makeStatement(sql: sql)
        } catch {
            throw StorageError.wrapping(error)
        }
        connection = db.sqliteConnection!
        bindingHandle = statement!.sqliteStatement
        postgres = nil
    }

    init(_ session: PostgresSession, _ sql: String) {
        statement = nil
        connection = nil
        bindingHandle = nil
        postgres = (session, sql)
    }

    func bindValue(_ index: Int32, _ value: SQLValue) {
        let i = Int(index) - 1
        while boundValues.count <= i { boundValues.append(.null) }
        boundValues[i] = value
    }

    /// Runs the bound statement, whose result nothing reads: on PostgreSQL, inside the
    /// writer's transaction, sent without waiting for it (`PostgresSession.execute`).
    func execute() throws(StorageError) {
        guard bindingHandle == nil else {
            _ = try run()
            return
        }
        let (session, sql) = postgres!
        defer { boundValues.removeAll(keepingCapacity: true) }
        if let batchKind, session.deferring { return try session.deferRow(batchKind, boundValues) }
        try session.execute(sql, boundValues)
    }

    /// Runs a bound `INSERT … ON CONFLICT DO NOTHING` and returns whether it inserted a row.
    /// On SQLite the statement has no RETURNING clause (SQLite gathers RETURNING rows in a
    /// temporary B-tree it opens, with its pager and page allocations, on every run: the
    /// message insert was 50 % of the writer's samples in `closed 50×32` with it, 45 % without)
    /// and the answer is the connection's change count; on PostgreSQL it ends in `RETURNING 1`
    /// (``HotStatements/returningOnPostgres``).
    func runInsert() throws(StorageError) -> Bool {
        guard bindingHandle != nil else {
            if let batchKind, let session = postgres?.session, session.deferring {
                // Held back: a taken id or position fails the batch, and the group runs again
                // with a savepoint per command, where this insert is answered alone.
                defer { boundValues.removeAll(keepingCapacity: true) }
                try session.deferRow(batchKind, boundValues)
                return true
            }
            return try run() != nil
        }
        try run()
        return sqlite3_changes(connection) > 0
    }

    /// Runs the bound statement to its end and resets it. Returns the first column of its
    /// first row, for statements that return one (`RETURNING`), else nil.
    @discardableResult
    func run() throws(StorageError) -> Int64? {
        guard let handle = bindingHandle else {
            let (session, sql) = postgres!
            defer { boundValues.removeAll(keepingCapacity: true) }
            return try session.firstInteger(sql, boundValues)
        }
        defer { sqlite3_reset(handle) }
        var first: Int64?
        while true {
            let code = sqlite3_step(handle)
            switch code {
            case SQLITE_DONE:
                return first
            case SQLITE_ROW:
                if first == nil { first = sqlite3_column_int64(handle, 0) }
            default:
                throw stepError(code, connection)
            }
        }
    }
}

/// The error of a failed `sqlite3_step`.
private func stepError(_ code: Int32, _ connection: OpaquePointer?) -> StorageError {
    let message = connection.map { String(cString: sqlite3_errmsg($0)) } ?? "no connection"
    if code & 0xff == SQLITE_CONSTRAINT { return StorageError(.constraintViolation, message) }
    return StorageError(.database, "SQLite error \(code): \(message)")
}

/// Binding values into a statement's parameters: straight into SQLite (which copies blobs
/// and text) when `bindingHandle` is set, else collected for PostgreSQL.
protocol SQLBinder {
    var bindingHandle: OpaquePointer? { get }
    func bindValue(_ index: Int32, _ value: SQLValue)
}

extension SQLBinder {
    func bind(_ index: Int32, _ value: Int64) {
        guard let bindingHandle else { return bindValue(index, .integer(value)) }
        sqlite3_bind_int64(bindingHandle, index, value)
    }

    func bind(_ index: Int32, _ uuid: UUID) {
        guard let bindingHandle else { return bindValue(index, .blob(Columns.blob(uuid))) }
        withUnsafeBytes(of: uuid.uuid) {
            _ = sqlite3_bind_blob(bindingHandle, index, $0.baseAddress, 16, transientDestructor)
        }
    }

    func bind(_ index: Int32, _ text: String) {
        guard let bindingHandle else { return bindValue(index, .text(text)) }
        var text = text
        text.withUTF8 { utf8 in
            guard let base = utf8.baseAddress, utf8.count > 0 else {
                _ = sqlite3_bind_text(bindingHandle, index, "", 0, transientDestructor)
                return
            }
            _ = sqlite3_bind_text(
                bindingHandle, index, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), Int32(utf8.count),
                transientDestructor)
        }
    }

    func bindNull(_ index: Int32) {
        guard let bindingHandle else { return bindValue(index, .null) }
        sqlite3_bind_null(bindingHandle, index)
    }

    func bind(_ index: Int32, _ bytes: [UInt8]?) {
        guard let bytes else { return bindNull(index) }
        guard let bindingHandle else { return bindValue(index, .blob(Data(bytes))) }
        bytes.withUnsafeBytes {
            _ = sqlite3_bind_blob(
                bindingHandle, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count),
                transientDestructor)
        }
    }
}

private var transientDestructor: sqlite3_destructor_type { unsafeBitCast(-1, to: sqlite3_destructor_type.self) }

/// The writer's prepared hot-path statements, made on first use and kept for the writer's
/// life (see `WriterCache`).
final class HotStatements {
    let savepoint: HotStatement
    let release: HotStatement
    let rollback: HotStatement
    let anyMessage: HotStatement
    let insertMessage: HotStatement
    let feedHead: HotStatement
    /// Into the tail (`FeedTail`), or straight into `feed_entries` (`insertFeedEntryDirect`).
    let insertFeedEntry: HotStatement
    let insertFeedEntryDirect: HotStatement
    let insertOperation: HotStatement
    /// A stored message's counts (`countAppended`): on SQLite the sender's count
    /// (`countSender`) and then the unread counts (`countAppended`); on PostgreSQL
    /// `countAppended` does both and `countSender` is nil.
    let countSender: HotStatement?
    let countAppended: HotStatement

    /// What an insert run with ``HotStatement/runInsert()`` ends with on PostgreSQL, whose
    /// change count of a statement sent through the extended protocol is not at hand.
    static let returningOnPostgres = " RETURNING 1"

    init(_ db: any SQLSession) throws(StorageError) {
        savepoint = try db.hotStatement("SAVEPOINT command")
        release = try db.hotStatement("RELEASE command")
        rollback = try db.hotStatement("ROLLBACK TO command")
        anyMessage = try db.hotStatement("SELECT 1 FROM messages WHERE conversation_id = ? LIMIT 1")
        insertMessage = try db.hotStatement(
            """
            INSERT INTO messages (id, conversation_id, sender, pos_physical, pos_logical, pos_node, sent_at, body, request_digest,
                origin_node, hlc_physical, hlc_logical, hlc_node\(db.dialect == .postgres ? ", search" : ""))
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?\(db.dialect == .postgres ? ", " + MessageSearchSchema.postgresVector : ""))
            ON CONFLICT DO NOTHING
            """ + (db.dialect == .postgres ? Self.returningOnPostgres : ""))
        feedHead = try db.hotStatement(FeedHead.sql)
        insertFeedEntry = try db.hotStatement(FeedTail.insertSQL(into: "feed_tail"))
        insertFeedEntryDirect = try db.hotStatement(FeedTail.insertSQL(into: "feed_entries"))
        insertOperation = try db.hotStatement(
            """
            INSERT INTO replication_log (origin_node, counter, hlc_physical, hlc_logical, hlc_node, op) VALUES (?, ?, ?, ?, ?, ?)
            """)
        if db.dialect == .sqlite {
            countSender = try db.hotStatement(StoredCounts.countSender)
            countAppended = try db.hotStatement(StoredCounts.unreadAppended)
        } else {
            countSender = nil
            countAppended = try db.hotStatement(
                "WITH counted AS (\(StoredCounts.countSender)) \(StoredCounts.unreadAppended)")
        }
        if db.dialect == .postgres {
            insertMessage.batchKind = .messages
            insertOperation.batchKind = .operations
            countAppended.batchKind = .counts
        }
    }

    /// Runs `body` in a savepoint named `command` (nested savepoints may reuse the name:
    /// SQLite releases and rolls back the innermost one): kept if it returns, rolled back
    /// (and the error rethrown) if it throws.
    /// The RELEASE is waited for (on PostgreSQL the command's other statements may not have
    /// been: a failure among them fails the RELEASE, and is this command's).
    func inSavepoint<T>(_ body: () throws -> T) throws -> T {
        try savepoint.execute()
        do {
            let result = try body()
            try release.run()
            return result
        } catch {
            // When SQLite already rolled back the whole transaction (e.g. a full disk) there is
            // no savepoint left; the caller learns that from the transaction state.
            _ = try? rollback.run()
            _ = try? release.run()
            throw error
        }
    }
}

/// Column access by position, over GRDB's rows and over rows read straight from SQLite
/// (`RawRow`), so decoding code is written once for both.
protocol ColumnRow {
    func isNull(_ index: Int) -> Bool
    /// The integer in the column (0 for NULL).
    func int64(_ index: Int) -> Int64
    /// The bytes of a BLOB column (nil for NULL).
    func bytes(_ index: Int) -> [UInt8]?
    /// A 16-byte BLOB as a UUID (nil for NULL or another length).
    func uuid(_ index: Int) -> UUID?
    /// The text in the column (nil for NULL).
    func text(_ index: Int) -> String?
}

/// The current row of a statement being stepped: valid only inside the callback it is
/// passed to. On PostgreSQL, a row of the fetched result.
struct RawRow: ColumnRow {
    fileprivate let handle: OpaquePointer!
    private let fetched: SQLRow?

    fileprivate init(handle: OpaquePointer) {
        self.handle = handle
        fetched = nil
    }

    init(_ row: SQLRow) {
        handle = nil
        fetched = row
    }

    func isNull(_ index: Int) -> Bool {
        if let fetched { return fetched.isNull(index) }
        return sqlite3_column_type(handle, Int32(index)) == SQLITE_NULL
    }

    func int64(_ index: Int) -> Int64 {
        if let fetched { return fetched.int64(index) }
        return sqlite3_column_int64(handle, Int32(index))
    }

    func bytes(_ index: Int) -> [UInt8]? {
        if let fetched { return fetched.bytes(index) }
        guard !isNull(index) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, Int32(index)))
        guard count > 0, let base = sqlite3_column_blob(handle, Int32(index)) else { return [] }
        return [UInt8](UnsafeRawBufferPointer(start: base, count: count))
    }

    func uuid(_ index: Int) -> UUID? {
        if let fetched { return fetched.uuid(index) }
        guard sqlite3_column_type(handle, Int32(index)) == SQLITE_BLOB,
            sqlite3_column_bytes(handle, Int32(index)) == 16,
            let base = sqlite3_column_blob(handle, Int32(index))
        else { return nil }
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { $0.copyMemory(from: UnsafeRawBufferPointer(start: base, count: 16)) }
        return UUID(uuid: bytes)
    }

    func text(_ index: Int) -> String? {
        if let fetched { return fetched.text(index) }
        guard !isNull(index), let base = sqlite3_column_text(handle, Int32(index)) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, Int32(index)))
        return String(decoding: UnsafeBufferPointer(start: base, count: count), as: UTF8.self)
    }
}

extension Database {
    /// Runs a query through GRDB's statement cache, binding `bind`'s values, and calls `body`
    /// with each row read straight from SQLite (no row objects): for the hot read paths.
    func sqliteEachRow(_ sql: String, bind: (HotBinder) -> Void, _ body: (RawRow) throws(StorageError) -> Void)
        throws(StorageError)
    {
        let statement: Statement
        do { statement = try cachedStatement(sql: sql) } catch { throw StorageError.wrapping(error) }
        let handle = statement.sqliteStatement
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        defer { sqlite3_reset(handle) }
        bind(HotBinder(bindingHandle: handle, collected: nil))
        let row = RawRow(handle: handle)
        while true {
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { return }
            guard code == SQLITE_ROW else { throw stepError(code, sqliteConnection) }
            try body(row)
        }
    }

    /// Runs a statement that returns no rows the way `eachRow` does; returns how many rows
    /// it changed.
    @discardableResult
    func sqliteRunRaw(_ sql: String, bind: (HotBinder) -> Void) throws(StorageError) -> Int {
        try sqliteEachRow(sql, bind: bind) { _ in }
        return changesCount
    }
}

/// Binds values of a statement run by `SQLSession.eachRow`.
struct HotBinder: SQLBinder {
    let bindingHandle: OpaquePointer?
    /// Collects the values for PostgreSQL.
    let collected: SQLBindings?

    func bindValue(_ index: Int32, _ value: SQLValue) {
        collected?.set(index, value)
    }
}

/// Values bound by a `HotBinder` for PostgreSQL.
final class SQLBindings {
    var values: [SQLValue] = []

    func set(_ index: Int32, _ value: SQLValue) {
        let i = Int(index) - 1
        while values.count <= i { values.append(.null) }
        values[i] = value
    }
}

/// The steps counted by `Database.countingVMSteps`.
private final class VMStepTotal {
    var total: Int64 = 0
}

extension Database {
    /// The SQLite virtual machine steps of every statement `body` runs on this connection
    /// (`SQLITE_STMTSTATUS_VM_STEP`, read as each statement finishes): a measure of the work a
    /// change costs that does not depend on the machine's load. Replaces the connection's
    /// trace callback while it runs (for tests: the node sets none).
    func countingVMSteps(_ body: () throws(StorageError) -> Void) throws(StorageError) -> Int64 {
        let steps = VMStepTotal()
        // Steps counted before (cached statements) are not this body's.
        var statement = sqlite3_next_stmt(sqliteConnection, nil)
        while let s = statement {
            _ = sqlite3_stmt_status(s, SQLITE_STMTSTATUS_VM_STEP, 1)
            statement = sqlite3_next_stmt(sqliteConnection, s)
        }
        sqlite3_trace_v2(
            sqliteConnection, UInt32(SQLITE_TRACE_PROFILE),
            { _, context, statement, _ in
                guard let context, let statement else { return 0 }
                let steps = Unmanaged<VMStepTotal>.fromOpaque(context).takeUnretainedValue()
                steps.total += Int64(sqlite3_stmt_status(OpaquePointer(statement), SQLITE_STMTSTATUS_VM_STEP, 1))
                return 0
            }, Unmanaged.passUnretained(steps).toOpaque())
        defer { sqlite3_trace_v2(sqliteConnection, 0, nil, nil) }
        try withExtendedLifetime(steps) { () throws(StorageError) in try body() }
        return steps.total
    }
}
