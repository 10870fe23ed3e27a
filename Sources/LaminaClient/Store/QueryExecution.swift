import Foundation
import GRDB
import LaminaModel

/// A row a query read from the local store, for ``QueryableObject/load(_:)``. Opaque: what
/// it holds is the store's own (the database is not part of the SDK's API).
public struct QueryRow {
    let db: Database
    let row: Row
}

extension Query {
    /// The SELECT for `columns` of the matching rows, in order, limited.
    func statement(_ columns: String) throws(ClientError) -> (String, StatementArguments) {
        let c = try compiled()
        let table = Object.queryTarget.table
        var sql = "SELECT \(columns) FROM \(table) WHERE \(c.condition.sql) ORDER BY \(c.order.sql)"
        var args = c.arguments
        if c.limit != nil || c.offset > 0 {
            sql += " LIMIT ? OFFSET ?"
            args += [c.limit ?? -1, c.offset]
        }
        return (sql, args)
    }
}

extension StoreReader {
    static func conversation(_ row: QueryRow) throws -> StoredConversation { try conversation(row.db, row: row.row) }
    static func message(_ row: QueryRow) throws -> StoredMessage { try message(row.db, row: row.row) }
}

extension LocalStore {
    /// The objects matching `query`, in its order.
    public func execute<Object>(_ query: Query<Object>) throws(ClientError) -> [Object] {
        let (sql, args) = try query.statement("\(Object.queryTarget.table).*")
        return try read { db in
            try Row.fetchAll(db, sql: sql, arguments: args).map { try Object.load(QueryRow(db: db, row: $0)) }
        }
    }

    /// The identifiers of the objects matching `query`, in its order.
    public func identifiers<Object>(_ query: Query<Object>) throws(ClientError) -> [Object.ID] {
        let target = Object.queryTarget
        let (sql, args) = try query.statement("\(target.table).\(target.idColumn)")
        return try read { db in
            try Row.fetchAll(db, sql: sql, arguments: args).map { try Object.identifier(QueryRow(db: db, row: $0)) }
        }
    }

    /// How many objects `query` returns (its limit and offset applied).
    public func count<Object>(_ query: Query<Object>) throws(ClientError) -> Int {
        let target = Object.queryTarget
        let (sql, args) = try query.statement("\(target.table).\(target.idColumn)")
        return try read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM (\(sql))", arguments: args) ?? 0 }
    }
}

extension LocalStore {
    /// The objects of `query` inside a pagination window, and how many `query` returns in
    /// all, read in one transaction. `window` n > 0: the first n; n < 0: the last -n; nil: all.
    func execute<Object>(_ query: Query<Object>, window: Int?) throws(ClientError) -> (objects: [Object], total: Int) {
        try query.validate()
        return try read(Self.windowBody(query, window: window))
    }

    /// As ``execute(_:window:)``, through GRDB's async API (a live query's refresh after a
    /// change runs on the cooperative pool).
    func executeAsync<Object>(_ query: Query<Object>, window: Int?) async throws(ClientError) -> (
        objects: [Object], total: Int
    ) {
        try query.validate()
        return try await readAsync(Self.windowBody(query, window: window))
    }

    private static func windowBody<Object>(_ query: Query<Object>, window: Int?)
        -> @Sendable (Database) throws -> ([Object], Int)
    {
        { db in
            let table = Object.queryTarget.table
            guard let window else {
                let (sql, arguments) = try query.statement("\(table).*")
                let all = try Row.fetchAll(db, sql: sql, arguments: arguments).map {
                    try Object.load(QueryRow(db: db, row: $0))
                }
                return (all, all.count)
            }
            let (countSQL, countArguments) = try query.statement("\(table).\(Object.queryTarget.idColumn)")
            let total = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM (\(countSQL))", arguments: countArguments) ?? 0
            let size = Int(window.magnitude)
            let start = window > 0 ? 0 : max(0, total - size)
            var windowed = query
            windowed.offset = query.offset + start
            windowed.limit = min(size, total - start)
            let (sql, arguments) = try windowed.statement("\(table).*")
            return (
                try Row.fetchAll(db, sql: sql, arguments: arguments).map { try Object.load(QueryRow(db: db, row: $0)) },
                total
            )
        }
    }
}
