import GRDB

/// The SQLite backend: a GRDB connection, statements through GRDB's statement cache.
final class SQLiteSession: SQLSession {
    let db: Database
    init(_ db: Database) { self.db = db }

    var dialect: SQLDialect { .sqlite }

    func checkSent() throws(StorageError) {}

    func run(_ sql: String, _ arguments: SQLArguments) throws(StorageError) {
        do {
            try db.cachedStatement(sql: sql).execute(arguments: arguments.grdbArguments)
        } catch {
            throw StorageError.wrapping(error)
        }
    }

    func rows(_ sql: String, _ arguments: SQLArguments) throws(StorageError) -> [SQLRow] {
        do {
            return try GRDB.Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments.grdbArguments).map(
                SQLRow.init)
        } catch {
            throw StorageError.wrapping(error)
        }
    }

    func row(_ sql: String, _ arguments: SQLArguments) throws(StorageError) -> SQLRow? {
        do {
            return try GRDB.Row.fetchOne(db.cachedStatement(sql: sql), arguments: arguments.grdbArguments).map(
                SQLRow.init)
        } catch {
            throw StorageError.wrapping(error)
        }
    }

    func int64(_ sql: String, _ arguments: SQLArguments) throws(StorageError) -> Int64? {
        do {
            return try Int64.fetchOne(db.cachedStatement(sql: sql), arguments: arguments.grdbArguments)
        } catch {
            throw StorageError.wrapping(error)
        }
    }

    var changesCount: Int { db.changesCount }

    func eachRow(_ sql: String, bind: (HotBinder) -> Void, _ body: (RawRow) throws(StorageError) -> Void)
        throws(StorageError)
    {
        try db.sqliteEachRow(sql, bind: bind, body)
    }

    @discardableResult
    func runRaw(_ sql: String, bind: (HotBinder) -> Void) throws(StorageError) -> Int {
        try db.sqliteRunRaw(sql, bind: bind)
    }

    func hotStatement(_ sql: String) throws(StorageError) -> HotStatement { try HotStatement(db, sql) }

    func measuringWork(_ body: () throws(StorageError) -> Void) throws(StorageError) -> Int64 {
        try db.countingVMSteps(body)
    }

    func afterNextTransaction(
        onCommit: @escaping @Sendable (Any?) -> Void, onRollback: @escaping @Sendable (Any?) -> Void
    ) {
        db.afterNextTransaction(onCommit: { onCommit($0) }, onRollback: { onRollback($0) })
    }

    /// BEGIN and COMMIT run as cached statements (the writer runs them once per group: parsing
    /// them each time was 2 % of the node's CPU in `rate --fanout 24`); GRDB still sees them.
    func begin() throws(StorageError) {
        do { try db.cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").execute() } catch {
            throw StorageError.wrapping(error)
        }
    }

    func commit() throws(StorageError) {
        do { try db.cachedStatement(sql: "COMMIT TRANSACTION").execute() } catch { throw StorageError.wrapping(error) }
    }

    func rollback() {
        if db.isInsideTransaction { try? db.rollback() }
    }

    var isInsideTransaction: Bool { db.isInsideTransaction }
}
