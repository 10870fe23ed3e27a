@testable import LaminaStore

/// A store's schema as its database's catalog reports it, in terms both backends share:
/// tables, their columns with normalized types, and the indexes created by name (not those
/// backing a primary key or UNIQUE constraint, which the column lists already imply).
struct SchemaCatalog: Equatable {
    /// An index: its table, whether it is unique and its columns in order.
    struct Index: Equatable, CustomStringConvertible {
        var table: String
        var unique: Bool
        var columns: [String]

        var description: String { "\(table)(\(columns.joined(separator: ", ")))\(unique ? " unique" : "")" }
    }

    /// Table name → column name → normalized type.
    var tables: [String: [String: String]] = [:]
    /// Index name → index.
    var indexes: [String: Index] = [:]

    /// Reads the catalog of `store`'s database, on either backend.
    static func read(_ store: NodeStore) throws -> SchemaCatalog {
        try store.readNow { r in
            var catalog = SchemaCatalog()
            let dialect = r.db.dialect
            for row in try r.db.rows(columnsQuery(dialect)) {
                catalog.tables[row[0] as String, default: [:]][row[1] as String] = normalizedType(row[2] as String)
            }
            for row in try r.db.rows(indexesQuery(dialect)) {
                let columns = (row[3] as String).split(separator: ",").map(String.init)
                catalog.indexes[row[0] as String] = Index(
                    table: row[1] as String, unique: (row[2] as Int64) != 0, columns: columns)
            }
            return catalog
        }
    }

    /// (table, column, declared type) of every table of the store.
    private static func columnsQuery(_ dialect: SQLDialect) -> String {
        switch dialect {
        case .sqlite:
            """
            SELECT m.name, p.name, p.type FROM sqlite_master m, pragma_table_info(m.name) p
            WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'
            """
        case .postgres:
            """
            SELECT CAST(c.table_name AS TEXT), CAST(c.column_name AS TEXT), CAST(c.data_type AS TEXT)
            FROM information_schema.columns c JOIN information_schema.tables t
                ON t.table_schema = c.table_schema AND t.table_name = c.table_name
            WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
            """
        }
    }

    /// (index, table, unique 0/1, comma-separated columns) of every index created by name.
    private static func indexesQuery(_ dialect: SQLDialect) -> String {
        switch dialect {
        case .sqlite:
            """
            SELECT m.name, m.tbl_name, l."unique",
                (SELECT group_concat(name, ',') FROM (SELECT i.name FROM pragma_index_info(m.name) i ORDER BY i.seqno))
            FROM sqlite_master m JOIN pragma_index_list(m.tbl_name) l ON l.name = m.name
            WHERE m.type = 'index' AND m.sql IS NOT NULL
            """
        case .postgres:
            """
            SELECT CAST(i.relname AS TEXT), CAST(t.relname AS TEXT), CASE WHEN x.indisunique THEN 1 ELSE 0 END,
                array_to_string(ARRAY(
                    SELECT CAST(a.attname AS TEXT) FROM unnest(x.indkey) WITH ORDINALITY k(attnum, ord)
                    JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum ORDER BY k.ord), ',')
            FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
                JOIN pg_namespace n ON n.oid = t.relnamespace
            WHERE n.nspname = 'public' AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)
            """
        }
    }

    /// A declared type in the terms both backends share (`PostgresSchema`'s mapping: BLOB is
    /// BYTEA, INTEGER is BIGINT or INTEGER).
    static func normalizedType(_ declared: String) -> String {
        let type = declared.lowercased()
        if type.contains("int") { return "integer" }
        if type == "blob" || type == "bytea" { return "blob" }
        if type == "text" || type.hasPrefix("character") || type.hasPrefix("varchar") { return "text" }
        if type == "real" || type.hasPrefix("double") || type.hasPrefix("float") { return "real" }
        return type
    }
}
