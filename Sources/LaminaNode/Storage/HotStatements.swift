import Foundation
import GRDB
import GRDBSQLite
import LaminaModel

/// A statement of the write path's hot path, prepared once on the writer's connection and
/// run by binding values straight into SQLite: no SQL-keyed cache lookup, no argument
/// arrays, no row objects. The only place in the node that calls SQLite's C API; GRDB owns
/// the statement (and finalizes it when this is dropped, before the connection closes).
final class HotStatement {
    private let statement: Statement
    private let connection: OpaquePointer
    private var handle: OpaquePointer { statement.sqliteStatement }

    init(_ db: Database, _ sql: String) throws(StorageError) {
        do {
            statement = try db.makeStatement(sql: sql)
        } catch {
            throw StorageError.wrapping(error)
        }
        connection = db.sqliteConnection!
    }

    func bind(_ index: Int32, _ value: Int64) {
        sqlite3_bind_int64(handle, index, value)
    }

    func bind(_ index: Int32, _ uuid: UUID) {
        withUnsafeBytes(of: uuid.uuid) { _ = sqlite3_bind_blob(handle, index, $0.baseAddress, 16, transient) }
    }

    func bind(_ index: Int32, _ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            _ = sqlite3_bind_text(handle, index, UnsafeRawPointer(utf8.baseAddress!).assumingMemoryBound(to: CChar.self), Int32(utf8.count), transient)
        }
    }

    func bindNull(_ index: Int32) {
        sqlite3_bind_null(handle, index)
    }

    func bind(_ index: Int32, _ bytes: [UInt8]?) {
        guard let bytes else {
            sqlite3_bind_null(handle, index)
            return
        }
        bytes.withUnsafeBytes { _ = sqlite3_bind_blob(handle, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count), transient) }
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
                let message = String(cString: sqlite3_errmsg(connection))
                if code & 0xff == SQLITE_CONSTRAINT { throw StorageError(.constraintViolation, message) }
                throw StorageError(.database, "SQLite error \(code): \(message)")
            }
        }
    }

    private var transient: sqlite3_destructor_type { unsafeBitCast(-1, to: sqlite3_destructor_type.self) }
}

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
