import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

/// The SQLite schema (`StorageSchema`) and the PostgreSQL schema (`PostgresSchema`) are written
/// separately, one migration list each; every statement of the store runs on both. This
/// compares the two catalogs a fresh store of each backend reports: a table, column or index
/// one backend gains and the other lacks fails here, as does a column whose type differs.
@Suite struct SchemaParityTests {
    /// Where the backends differ on purpose, each with its reason. A difference found and not
    /// listed fails the test; so does one listed and no longer found (the list stays true).
    static let knownDifferences: Set<String> = [
        // Each backend records its applied migrations in a table of its own.
        "table grdb_migrations only on sqlite",
        "table lamina_migrations only on postgres",
        // Presence across nodes sharing one database (`PostgresSchema.liveDevices`).
        "table live_devices only on postgres",
        // The message search index (`MessageSearchSchema`): an FTS5 table and its shadow tables
        // on SQLite, a tsvector column with a GIN index on PostgreSQL.
        "table message_search only on sqlite", "table message_search_config only on sqlite",
        "table message_search_content only on sqlite", "table message_search_data only on sqlite",
        "table message_search_docsize only on sqlite", "table message_search_idx only on sqlite",
        "column messages.search only on postgres", "index messages_search only on postgres",
        // SQLite indexes messages in batches behind the writes (`SearchBacklog`); PostgreSQL's
        // insert fills the column.
        "table search_backlog only on sqlite",
    ]

    @Test func bothBackendsHaveTheSameTablesColumnsAndIndexes() async throws {
        let sqlite = try await withTemporaryStore(backend: .sqlite) { store, _ in try SchemaCatalog.read(store) }
        let postgres = try await withTemporaryStore(backend: .postgres) { store, _ in try SchemaCatalog.read(store) }
        let found = Self.differences(sqlite, postgres)
        #expect(found.subtracting(Self.knownDifferences).sorted() == [], "differences no one explained")
        #expect(Self.knownDifferences.subtracting(found).sorted() == [], "listed differences that are gone")
        // The comparison sees something: the catalogs are not empty, and a column or an index
        // one backend gains is a difference.
        #expect(sqlite.tables["messages"]?.isEmpty == false)
        #expect(!sqlite.indexes.isEmpty)
        var gained = postgres
        gained.tables["messages"]?["extra"] = "integer"
        gained.indexes["messages_extra"] = SchemaCatalog.Index(table: "messages", unique: false, columns: ["extra"])
        #expect(
            Self.differences(sqlite, gained)
                == found.union(["column messages.extra only on postgres", "index messages_extra only on postgres"]))
    }

    /// Each difference between the catalogs as one line.
    static func differences(_ sqlite: SchemaCatalog, _ postgres: SchemaCatalog) -> Set<String> {
        var out: Set<String> = []
        for table in Set(sqlite.tables.keys).union(postgres.tables.keys) {
            guard let a = sqlite.tables[table] else {
                out.insert("table \(table) only on postgres")
                continue
            }
            guard let b = postgres.tables[table] else {
                out.insert("table \(table) only on sqlite")
                continue
            }
            for column in Set(a.keys).union(b.keys) {
                switch (a[column], b[column]) {
                case (let x?, let y?) where x != y:
                    out.insert("column \(table).\(column) is \(x) on sqlite, \(y) on postgres")
                case (nil, _?): out.insert("column \(table).\(column) only on postgres")
                case (_?, nil): out.insert("column \(table).\(column) only on sqlite")
                default: break
                }
            }
        }
        for name in Set(sqlite.indexes.keys).union(postgres.indexes.keys) {
            switch (sqlite.indexes[name], postgres.indexes[name]) {
            case (let x?, let y?) where x != y: out.insert("index \(name) is \(x) on sqlite, \(y) on postgres")
            case (nil, _?): out.insert("index \(name) only on postgres")
            case (_?, nil): out.insert("index \(name) only on sqlite")
            default: break
            }
        }
        return out
    }
}
