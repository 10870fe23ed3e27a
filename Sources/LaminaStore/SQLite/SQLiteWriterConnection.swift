import GRDB

/// The writer's connection on SQLite: the pool's one writer connection.
struct SQLiteWriterConnection: WriterConnection {
    let pool: DatabasePool
    /// Whether a group's WAL writes are joined (``JoinedWALWrites``): when every commit syncs.
    let joinsWALWrites: Bool

    func withSession<T>(_ body: (any SQLSession, _ fresh: Bool) throws -> T) throws -> T {
        try pool.writeWithoutTransaction { db in
            // The scope is the thread's that runs the connection: opened inside GRDB's closure.
            guard joinsWALWrites else { return try body(SQLiteSession(db), false) }
            return try JoinedWALWrites.joining { try body(SQLiteSession(db), false) }
        }
    }

    func finish(_ body: (any SQLSession) -> Void) {
        pool.writeWithoutTransaction { db in body(SQLiteSession(db)) }
    }
}
