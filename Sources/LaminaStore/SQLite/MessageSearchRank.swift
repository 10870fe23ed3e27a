import GRDB
import GRDBSQLite

/// `lamina_rank(message_search)`: the order of the node's search on SQLite, an FTS5 auxiliary
/// function registered on every connection (with `HotStatement`, the only code of the node on
/// SQLite's C API). BM25 over the `body` column as FTS5's `bm25()` computes it (k1 = 1.2,
/// b = 0.75: each word's count in the message, saturated, against the message's length in words
/// over the average), without the inverse document frequency: `bm25()` counts, on a search's
/// first row, every message of the node holding each word (a read of each word's whole
/// posting list), which made a search of a common word cost the node's matches, not the
/// user's. Every word weighs the same (as PostgreSQL's `ts_rank`); for one word the order is
/// BM25's. Lower is better (as FTS5's `rank`). Instances in other columns (the conversation
/// tokens) do not count.
enum MessageSearchRank {
    static let name = "lamina_rank"
    static let k1 = 1.2
    static let b = 0.75

    /// Registers the function on `db`'s connection.
    static func register(_ db: Database) throws(StorageError) {
        let api = FTS5.api(db)
        guard let create = api.pointee.xCreateFunction else {
            throw StorageError(.openFailed, "SQLite's FTS5 offers no xCreateFunction")
        }
        let code = create(UnsafeMutablePointer(mutating: api), name, nil, rank, nil)
        guard code == SQLITE_OK else {
            throw StorageError(.openFailed, "cannot register \(name) on SQLite's FTS5 (code \(code))")
        }
    }

    /// The function: the negated BM25 sum over the phrases found in column 0.
    private static let rank: fts5_extension_function = { api, fts, context, _, _ in
        guard let x = api?.pointee, let fts, let phraseCount = x.xPhraseCount, let instCount = x.xInstCount,
            let inst = x.xInst, let columnSize = x.xColumnSize, let totalSize = x.xColumnTotalSize,
            let rowCount = x.xRowCount
        else { return sqlite3_result_error_code(context, SQLITE_ERROR) }
        let phrases = Int(phraseCount(fts))
        var instances: Int32 = 0
        var code = instCount(fts, &instances)
        var tokens: Int32 = 0
        var total: sqlite3_int64 = 0
        var rows: sqlite3_int64 = 0
        if code == SQLITE_OK { code = columnSize(fts, 0, &tokens) }
        if code == SQLITE_OK { code = totalSize(fts, 0, &total) }
        if code == SQLITE_OK { code = rowCount(fts, &rows) }
        guard code == SQLITE_OK, phrases > 0 else { return sqlite3_result_error_code(context, code) }
        let score = withUnsafeTemporaryAllocation(of: Int32.self, capacity: phrases) { counts -> Double? in
            counts.initialize(repeating: 0)
            for i in 0..<instances {
                var phrase: Int32 = 0
                var column: Int32 = 0
                var offset: Int32 = 0
                guard inst(fts, i, &phrase, &column, &offset) == SQLITE_OK else { return nil }
                if column == 0, (0..<Int32(phrases)).contains(phrase) { counts[Int(phrase)] += 1 }
            }
            let average = rows > 0 && total > 0 ? Double(total) / Double(rows) : 1
            let norm = k1 * (1 - b + b * Double(tokens) / average)
            var score = 0.0
            for count in counts where count > 0 { score += Double(count) * (k1 + 1) / (Double(count) + norm) }
            return score
        }
        guard let score else { return sqlite3_result_error_code(context, SQLITE_ERROR) }
        sqlite3_result_double(context, -score)
    }
}
