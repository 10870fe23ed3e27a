import GRDB

/// The writer's connection on SQLite: the pool's one writer connection.
struct SQLiteWriterConnection: WriterConnection {
    let pool: DatabasePool

    func withSession<T>(_ body: (any SQLSession, _ fresh: Bool) throws -> T) throws -> T {
        try pool.writeWithoutTransaction { db in try body(SQLiteSession(db), false) }
    }

    func finish(_ body: (any SQLSession) -> Void) {
        pool.writeWithoutTransaction { db in body(SQLiteSession(db)) }
    }
}
