import Foundation
import GRDB
import GRDBSQLite
import LaminaModel

/// A statement of the write path's hot path, prepared once on the writer's connection and
/// run by binding values straight into SQLite: no SQL-keyed cache lookup, no argument
/// arrays, no row objects. The only place in the node that calls SQLite's C API; GRDB owns
/// the statement (and finalizes it when this is dropped, before the connection closes).
final class HotStatement: SQLiteBinding {
    private let statement: Statement
    private let connection: OpaquePointer
    private var handle: OpaquePointer { statement.sqliteStatement }
    var bindingHandle: OpaquePointer { handle }

    init(_ db: Database, _ sql: String) throws(StorageError) {
        do {
            statement = try db.makeStatement(sql: sql)
        } catch {
            throw StorageError.wrapping(error)
        }
        connection = db.sqliteConnection!
    }

    /// Runs the bound statement to its end and resets it. Returns the first column of its
    /// first row, for statements that return one (`RETURNING`), else nil.
    @discardableResult
    func run() throws(StorageError) -> Int64? {
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

/// Binding values into a statement's parameters (SQLite copies blobs and text).
protocol SQLiteBinding {
    var bindingHandle: OpaquePointer { get }
}

extension SQLiteBinding {
    func bind(_ index: Int32, _ value: Int64) {
        sqlite3_bind_int64(bindingHandle, index, value)
    }

    func bind(_ index: Int32, _ uuid: UUID) {
        withUnsafeBytes(of: uuid.uuid) { _ = sqlite3_bind_blob(bindingHandle, index, $0.baseAddress, 16, transientDestructor) }
    }

    func bind(_ index: Int32, _ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            guard let base = utf8.baseAddress, utf8.count > 0 else {
                _ = sqlite3_bind_text(bindingHandle, index, "", 0, transientDestructor)
                return
            }
            _ = sqlite3_bind_text(bindingHandle, index, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), Int32(utf8.count), transientDestructor)
        }
    }

    func bindNull(_ index: Int32) {
        sqlite3_bind_null(bindingHandle, index)
    }

    func bind(_ index: Int32, _ bytes: [UInt8]?) {
        guard let bytes else { return bindNull(index) }
        bytes.withUnsafeBytes {
            _ = sqlite3_bind_blob(bindingHandle, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count), transientDestructor)
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
    let insertFeedEntry: HotStatement
    let insertOperation: HotStatement

    init(_ db: Database) throws(StorageError) {
        savepoint = try HotStatement(db, "SAVEPOINT command")
        release = try HotStatement(db, "RELEASE command")
        rollback = try HotStatement(db, "ROLLBACK TO command")
        anyMessage = try HotStatement(db, "SELECT 1 FROM messages WHERE conversation_id = ? LIMIT 1")
        insertMessage = try HotStatement(db, """
            INSERT INTO messages (id, conversation_id, sender, pos_physical, pos_logical, pos_node, sent_at, body, request_digest,
                origin_node, hlc_physical, hlc_logical, hlc_node)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        feedHead = try HotStatement(db, FeedHead.sql)
        insertFeedEntry = try HotStatement(db, """
            INSERT INTO feed_entries (user_id, seq, kind, conversation_id, message_id, payload, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
            """)
        insertOperation = try HotStatement(db, """
            INSERT INTO replication_log (origin_node, counter, hlc_physical, hlc_logical, hlc_node, op) VALUES (?, ?, ?, ?, ?, ?)
            """)
    }

    /// Runs `body` in a savepoint named `command` (nested savepoints may reuse the name:
    /// SQLite releases and rolls back the innermost one): kept if it returns, rolled back
    /// (and the error rethrown) if it throws.
    func inSavepoint<T>(_ body: () throws -> T) throws -> T {
        try savepoint.run()
        let result: T
        do {
            result = try body()
        } catch {
            // When SQLite already rolled back the whole transaction (e.g. a full disk) there is
            // no savepoint left; the caller learns that from the transaction state.
            _ = try? rollback.run()
            _ = try? release.run()
            throw error
        }
        try release.run()
        return result
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

extension Row: ColumnRow {
    func isNull(_ index: Int) -> Bool { (self[index] as DatabaseValue).isNull }
    func int64(_ index: Int) -> Int64 { (self[index] as Int64?) ?? 0 }
    func bytes(_ index: Int) -> [UInt8]? { (self[index] as Data?).map { [UInt8]($0) } }
    func uuid(_ index: Int) -> UUID? {
        guard let data = self[index] as Data?, data.count == 16 else { return nil }
        return try? Columns.uuid(data, column: "")
    }
    func text(_ index: Int) -> String? { self[index] }
}

/// The current row of a statement being stepped: valid only inside the callback it is
/// passed to.
struct RawRow: ColumnRow {
    fileprivate let handle: OpaquePointer

    func isNull(_ index: Int) -> Bool { sqlite3_column_type(handle, Int32(index)) == SQLITE_NULL }
    func int64(_ index: Int) -> Int64 { sqlite3_column_int64(handle, Int32(index)) }

    func bytes(_ index: Int) -> [UInt8]? {
        guard !isNull(index) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, Int32(index)))
        guard count > 0, let base = sqlite3_column_blob(handle, Int32(index)) else { return [] }
        return [UInt8](UnsafeRawBufferPointer(start: base, count: count))
    }

    func uuid(_ index: Int) -> UUID? {
        guard sqlite3_column_type(handle, Int32(index)) == SQLITE_BLOB, sqlite3_column_bytes(handle, Int32(index)) == 16,
              let base = sqlite3_column_blob(handle, Int32(index)) else { return nil }
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { $0.copyMemory(from: UnsafeRawBufferPointer(start: base, count: 16)) }
        return UUID(uuid: bytes)
    }

    func text(_ index: Int) -> String? {
        guard !isNull(index), let base = sqlite3_column_text(handle, Int32(index)) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, Int32(index)))
        return String(decoding: UnsafeBufferPointer(start: base, count: count), as: UTF8.self)
    }
}

extension Database {
    /// Runs a query through GRDB's statement cache, binding `bind`'s values, and calls `body`
    /// with each row read straight from SQLite (no row objects): for the hot read paths.
    func eachRow(_ sql: String, bind: (HotBinder) -> Void, _ body: (RawRow) throws(StorageError) -> Void) throws(StorageError) {
        let statement: Statement
        do { statement = try cachedStatement(sql: sql) } catch { throw StorageError.wrapping(error) }
        let handle = statement.sqliteStatement
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        defer { sqlite3_reset(handle) }
        bind(HotBinder(bindingHandle: handle))
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
    func runRaw(_ sql: String, bind: (HotBinder) -> Void) throws(StorageError) -> Int {
        try eachRow(sql, bind: bind) { _ in }
        return changesCount
    }
}

/// Binds values of a statement run by `Database.eachRow`.
struct HotBinder: SQLiteBinding {
    let bindingHandle: OpaquePointer
}
