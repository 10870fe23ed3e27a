import Foundation

/// The SQL dialect of a backend. The storage's statements are written once, in the SQL both
/// share; the few that differ are chosen by a switch on this, each in one place.
enum SQLDialect: Sendable {
    case sqlite
    case postgres

    /// A query of the integers in a JSON array bound as text (one `?`): SQLite's `json_each`,
    /// PostgreSQL's `jsonb_array_elements_text`.
    var jsonIntegers: String {
        switch self {
        case .sqlite: return "SELECT value FROM json_each(?)"
        case .postgres: return "SELECT CAST(jsonb_array_elements_text(CAST(? AS jsonb)) AS BIGINT)"
        }
    }

    /// The greater of two values in one row: `max(a, b)` in SQLite, `GREATEST(a, b)` in PostgreSQL.
    func greatest(_ a: String, _ b: String) -> String {
        switch self {
        case .sqlite: return "max(\(a), \(b))"
        case .postgres: return "GREATEST(\(a), \(b))"
        }
    }
}

/// A connection to the store inside a transaction (the writer's group, or a read snapshot):
/// what the `Storage+*.swift` operations run their statements on, on either backend.
/// Placeholders are `?` (or `?N`); values bind as `SQLValue`s.
protocol SQLSession: AnyObject {
    var dialect: SQLDialect { get }
    /// Runs one statement that returns no rows.
    func run(_ sql: String, _ arguments: SQLArguments) throws(StorageError)
    /// Fetches every row.
    func rows(_ sql: String, _ arguments: SQLArguments) throws(StorageError) -> [SQLRow]
    /// Fetches the first row, if any.
    func row(_ sql: String, _ arguments: SQLArguments) throws(StorageError) -> SQLRow?
    /// Fetches the first column of the first row as an integer (nil: no row, or NULL).
    func int64(_ sql: String, _ arguments: SQLArguments) throws(StorageError) -> Int64?
    /// Rows changed by the latest `run` (or `runRaw`).
    var changesCount: Int { get }
    /// Runs a query binding `bind`'s values, calling `body` with each row (on SQLite straight
    /// from the statement: for the hot read paths).
    func eachRow(_ sql: String, bind: (HotBinder) -> Void, _ body: (RawRow) throws(StorageError) -> Void)
        throws(StorageError)
    /// Runs a statement that returns no rows the way `eachRow` does; returns how many rows it changed.
    @discardableResult
    func runRaw(_ sql: String, bind: (HotBinder) -> Void) throws(StorageError) -> Int
    /// A statement of the hot path, prepared on this connection.
    func hotStatement(_ sql: String) throws(StorageError) -> HotStatement
    /// Calls one of the closures once the current transaction has ended.
    func afterNextTransaction(
        onCommit: @escaping @Sendable (Any?) -> Void, onRollback: @escaping @Sendable (Any?) -> Void)

    /// Waits for the statements sent without waiting for them (PostgreSQL's writer) and
    /// throws the first one's failure; nothing to do on SQLite, which runs each at once.
    func checkSent() throws(StorageError)

    // The writer's transaction.
    func begin() throws(StorageError)
    func commit() throws(StorageError)
    func rollback()
    var isInsideTransaction: Bool { get }

    /// The work `body`'s statements make the backend do, independent of the machine's load
    /// (for tests of what a change costs): SQLite's virtual machine steps, PostgreSQL's rows
    /// read in this transaction (`pg_stat_xact_user_tables`).
    func measuringWork(_ body: () throws(StorageError) -> Void) throws(StorageError) -> Int64
}

extension SQLSession {
    func run(_ sql: String) throws(StorageError) { try run(sql, SQLArguments()) }
    func rows(_ sql: String) throws(StorageError) -> [SQLRow] { try rows(sql, SQLArguments()) }
    func row(_ sql: String) throws(StorageError) -> SQLRow? { try row(sql, SQLArguments()) }
    func int64(_ sql: String) throws(StorageError) -> Int64? { try int64(sql, SQLArguments()) }
}
