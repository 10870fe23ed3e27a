import Foundation
import LaminaModel

/// The PostgreSQL backend of `SQLSession`: one connection, used by one thread at a time (the
/// writer, or one read), over a driver (`PostgresWire`: libpq). Calls block
/// until the server answers: never call it on an event loop. Statements are translated from
/// the storage's SQL (`?` placeholders, `INSERT OR IGNORE`) once per connection, and each is
/// prepared on the connection on first use (parsed and planned once, not each time; see
/// `statement`).
final class PostgresSession: SQLSession, @unchecked Sendable {
    let wire: any PostgresWire
    /// The storage's SQL in PostgreSQL's dialect, and whether it can be prepared, per SQL text.
    private var translations: [String: (text: String, preparable: Bool)] = [:]
    /// The statements prepared on this connection: translated SQL and parameter types → name.
    private var named: [String: String] = [:]
    private var nextName = 0
    /// Statements prepared per connection at most; past it, a new one runs unnamed (parsed
    /// each time). The storage's distinct statements are far fewer, but some are built per
    /// call (a list of `?` as long as the list).
    static let maxNamedStatements = 512
    private var hooks: [(commit: @Sendable (Any?) -> Void, rollback: @Sendable (Any?) -> Void)] = []
    /// Statements sent but not waited for (`run` inside the writer's transaction), in order:
    /// the wire's tickets.
    private var inFlight: [Int] = []
    /// The first failure among them, thrown at the next statement waited for.
    private var deferredError: StorageError?
    private var lastChanges = 0
    /// Rows changed by the latest statement that changes rows (waits for those in flight).
    var changesCount: Int {
        settle()
        return lastChanges
    }
    private(set) var isInsideTransaction = false
    /// Set once the connection failed.
    private var failed = false
    /// Whether the connection failed or was closed (by the server, say): the session must be replaced.
    var isBroken: Bool { failed || wire.isClosed }

    /// The store's counters (statements and their time), when kept.
    private let counters: PostgresCounters?

    init(_ wire: any PostgresWire, counters: PostgresCounters? = nil) {
        self.wire = wire
        self.counters = counters
    }

    var dialect: SQLDialect { .postgres }

    func measuringWork(_ body: () throws(StorageError) -> Void) throws(StorageError) -> Int64 {
        let read =
            "SELECT CAST(coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0) AS BIGINT) FROM pg_stat_xact_user_tables"
        let before = try int64(read) ?? 0
        try body()
        return (try int64(read) ?? 0) - before
    }

    // MARK: Running statements

    /// Runs `sql` (as `statement` says) and waits for its result (its command tag gives the
    /// changed rows). A statement sent before it without waiting (`run`) that failed is
    /// thrown first: it came first, and this one then failed or ran in a failed transaction.
    @discardableResult
    func query(_ sql: String, _ values: [SQLValue]) throws(StorageError) -> PostgresResult {
        try flushBatchBefore(sql)
        let query = try statement(sql, values)
        let started = ContinuousClock.now
        defer { counters?.statement(took: ContinuousClock.now - started) }
        let outcome = wire.result(wire.enqueue(query))
        // The connection runs statements in order: every one sent before has finished.
        try throwDeferred()
        switch outcome {
        case .success(let result):
            if result.command != "SELECT" { lastChanges = result.rowCount ?? 0 }
            return result
        case .failure(let error):
            throw failure(error)
        }
    }

    // MARK: Statements not waited for

    /// Sends `sql` without waiting for it (the writer's transaction, a read's BEGIN and COMMIT): the connection runs
    /// statements in the order they were sent, so the writer goes on at once and learns of a
    /// failure at the next statement it waits for (at the latest the command's `RELEASE`,
    /// which is waited for, so a failure stays the failing command's). Saves the writer a
    /// wait per statement whose result nothing reads.
    private func send(_ sql: String, _ values: [SQLValue]) throws(StorageError) {
        try flushBatchBefore(sql)
        let query = try statement(sql, values)
        counters?.statement(took: .zero)
        inFlight.append(wire.enqueue(query))
    }

    /// Sends `sql` (no values) without waiting for it, in or out of a transaction: a read's
    /// BEGIN and COMMIT. Its failure is thrown by the next statement waited for. `now`: handed
    /// to the connection at once (a COMMIT must not wait for the connection's next use).
    func sendWithoutWaiting(_ sql: String, now: Bool = false) throws(StorageError) {
        try send(sql, [])
        if now { wire.flush() }
    }

    // MARK: Set-oriented group commits

    /// Set by the writer while it runs a group without savepoints: the hot-path writes
    /// (`HotStatement.batchKind`, and feed appends through `deferFeedAppend`) are held back
    /// and sent as one statement per kind (`PostgresWriteBatch`) before the next other
    /// statement, or at `checkSent`. Cleared at COMMIT, ROLLBACK and BEGIN.
    var deferring = false
    private var batch = PostgresWriteBatch()
    /// The provisional seq last handed out per user in this group (`PostgresWriteBatch`).
    private var provisionalSeqs: [UserID: Int64] = [:]
    /// Per user appended to in this group: the base of its provisional seqs (real seq = base +
    /// provisional) and its head, known once its entries were sent.
    private(set) var feedBases: [UserID: (base: Int64, head: Int64)] = [:]
    /// Statements the batch does not have to be sent before: they read nothing it writes (a
    /// conversation's header: its flags and participants).
    static let independentOfBatch: Set<String> = [
        ConversationHeaderSQL.plain, ConversationHeaderSQL.locking,
    ]

    /// Holds back one row of a hot statement (see `deferring`).
    func deferRow(_ kind: PostgresWriteBatch.Kind, _ values: [SQLValue]) throws(StorageError) {
        batch.add(kind, values)
        if batch.rowCount >= PostgresWriteBatch.maxRows { try flushBatch() }
    }

    /// Holds back one entry in the feed of each user (see `deferring`) and returns each one's
    /// provisional seq: the writer replaces them in the commands' results once the group's
    /// feeds were written (`StorageCommand.resolveFeedSeqs`).
    func deferFeedAppend(
        to users: Set<UserID>, kind: Int64, conversation: Data?, message: Data?, payload: Data?, at time: Int64
    ) throws(StorageError) -> [UserID: UInt64] {
        var seqs: [UserID: UInt64] = [:]
        for user in users.sorted() {
            let k = (provisionalSeqs[user] ?? 0) + 1
            provisionalSeqs[user] = k
            batch.add(
                PostgresWriteBatch.FeedRow(
                    user: user.rawValue, k: k, kind: kind, conversation: conversation, message: message,
                    payload: payload, createdAt: time))
            seqs[user] = UInt64(k)
        }
        if batch.rowCount >= PostgresWriteBatch.maxRows { try flushBatch() }
        return seqs
    }

    private func endBatch() {
        batch.removeAll()
        provisionalSeqs.removeAll(keepingCapacity: true)
        feedBases.removeAll(keepingCapacity: true)
        deferring = false
    }

    private func flushBatchBefore(_ sql: String) throws(StorageError) {
        guard !batch.isEmpty, !Self.independentOfBatch.contains(sql) else { return }
        try flushBatch()
    }

    /// Sends what the batch holds, one statement per kind, in one hand-over to the connection,
    /// and waits for them: messages, counts, replication log, feeds (the order the single-row
    /// statements of one send ran in). A taken message id or position fails it (`.alreadyExists`):
    /// the writer then runs the group again with a savepoint per command.
    private func flushBatch() throws(StorageError) {
        guard !batch.isEmpty else { return }
        let taken = batch
        batch.removeAll()
        func enqueue(_ statement: (text: String, values: [PostgresValue])) throws(StorageError) -> Int {
            counters?.statement(took: .zero)
            return wire.enqueue(try batchStatement(statement.text, statement.values))
        }
        var inserted: Int?
        if !taken.messages.isEmpty {
            let ticket = try enqueue(taken.messagesStatement())
            inFlight.append(ticket)
            inserted = ticket
        }
        if !taken.counts.isEmpty { inFlight.append(try enqueue(taken.countsStatement())) }
        if !taken.operations.isEmpty { inFlight.append(try enqueue(taken.operationsStatement())) }
        let feeds = taken.feeds.isEmpty ? nil : try enqueue(taken.feedsStatement())
        wire.flush()
        // Results are read in order: the feeds' result reads (and keeps) those before it.
        let feedOutcome = feeds.map { wire.result($0) }
        // In the order sent: statements before the batch, then its messages, counts and log.
        let insertedCount = settle(keeping: inserted)?.firstValue.flatMap { Int64.fromSQL($0) }
        try throwDeferred()
        if inserted != nil {
            guard insertedCount == Int64(taken.messages.count) else {
                throw StorageError(
                    .alreadyExists,
                    "\(taken.messages.count - Int(insertedCount ?? 0)) of the group's \(taken.messages.count) message ids or positions are taken"
                )
            }
        }
        switch feedOutcome {
        case .none:
            break
        case .failure(let error):
            throw failure(error)
        case .success(let result):
            var byRawValue: [String: UserID] = [:]
            for user in provisionalSeqs.keys { byRawValue[user.rawValue] = user }
            var answered = Set<String>()
            for cells in result.rows {
                guard cells.count == 3, case .text(let id) = cells[0], let user = byRawValue[id],
                    let base = Int64.fromSQL(cells[1]), let head = Int64.fromSQL(cells[2])
                else { continue }
                if let known = feedBases[user], known.base != base {
                    throw StorageError(
                        .database,
                        "the feed of \(id) moved between two sends of one group (base \(known.base), then \(base))")
                }
                feedBases[user] = (base, head)
                answered.insert(id)
            }
            let appended = Set(taken.feeds.map(\.user))
            guard answered == appended else {
                throw StorageError(
                    .database, "appending to \(appended.count) feeds returned the heads of \(answered.count)")
            }
        }
    }

    // MARK: Prepared statements

    /// What runs `sql` with `values`: the statement prepared for it on this connection
    /// (prepared on first use), or the statement itself with its values bound when it cannot be
    /// prepared (not a query or DML statement, past `maxNamedStatements`).
    ///
    /// libpq: `PQsendPrepare` once, then `PQsendQueryPrepared` with the values bound in binary.
    /// postgres-nio: `PREPARE`, then `EXECUTE name(literals)` with the values as literals in its
    /// text (`literalValues`; larger values run unprepared, bound): PostgreSQL does not let
    /// `EXECUTE` refer to the parameters of the protocol's Bind ("there is no parameter $1"),
    /// and postgres-nio runs protocol-level prepared statements only from async code, which
    /// would not keep the order of the statements the writer sends without waiting.
    private func statement(_ sql: String, _ values: [SQLValue]) throws(StorageError) -> PostgresStatement {
        let (text, preparable) = translation(sql)
        let bound = values.map(PostgresValue.init)
        guard preparable else { return .unnamed(text, bound) }
        if wire.bindsPreparedParameters {
            guard let name = try preparedName(text, bound) else { return .unnamed(text, bound) }
            return .prepared(name: name, bound)
        }
        guard let literals = Self.literalValues(values), let name = try preparedName(text, bound) else {
            return .unnamed(text, bound)
        }
        return .execute(name: name, literals: literals)
    }

    /// A set-oriented statement of the held-back batch (`PostgresWriteBatch`): prepared on
    /// libpq (its arrays bound), unnamed on postgres-nio (arrays do not go into literals).
    private func batchStatement(_ text: String, _ values: [PostgresValue]) throws(StorageError) -> PostgresStatement {
        guard wire.bindsPreparedParameters, let name = try preparedName(text, values) else {
            return .unnamed(text, values)
        }
        return .prepared(name: name, values)
    }

    /// The name `text` is prepared under on this connection for parameters of `values`' types,
    /// preparing it first (waited for: a PREPARE that fails aborts the transaction, and the
    /// name must not be recorded); nil past `maxNamedStatements`.
    private func preparedName(_ text: String, _ values: [PostgresValue]) throws(StorageError) -> String? {
        var key = text
        key.append("\u{0}")
        for value in values { key.append(String(value.typeOID, radix: 36) + ",") }
        if let known = named[key] { return known }
        guard named.count < Self.maxNamedStatements else { return nil }
        let name = "lamina_\(nextName)"
        nextName += 1
        // Parameter types as the values bind (a NULL's is inferred, as for an unnamed
        // statement): another set of types is another prepared statement.
        let ticket = wire.enqueue(.prepare(name: name, text: text, types: values.map(\.typeOID)))
        if case .failure(let error) = wire.result(ticket) {
            try throwDeferred()  // an earlier failure aborted the transaction: it is the one to report
            throw failure(error)
        }
        named[key] = name
        return name
    }

    /// Literals of at most this many bytes in all go into an `EXECUTE`'s text; larger values
    /// (a message body with big inline parts) are bound in binary, unprepared.
    static let maxLiteralBytes = 8_192

    /// `values` as SQL literals, comma-separated: integers and reals as numbers, text as an
    /// escape string (`E'…'`, quote and backslash escaped, so the setting of
    /// `standard_conforming_strings` does not matter), bytes as hex (`E'\\x…'`), NULL. Nil when
    /// they are too large or a text holds a NUL (PostgreSQL's text cannot; bound, it fails as
    /// it should, while in a statement's text it would end the text).
    static func literalValues(_ values: [SQLValue]) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for (i, value) in values.enumerated() {
            if i > 0 { out.append(contentsOf: ", ".utf8) }
            switch value {
            case .null:
                out.append(contentsOf: "NULL".utf8)
            case .integer(let v):
                out.append(contentsOf: String(v).utf8)
            case .real(let v):
                let text = v.isNaN ? "'NaN'" : v.isInfinite ? (v < 0 ? "'-Infinity'" : "'Infinity'") : "\(v)"
                out.append(contentsOf: text.utf8)
            case .text(let v):
                if out.count + v.utf8.count > maxLiteralBytes { return nil }
                out.append(contentsOf: "E'".utf8)
                for byte in v.utf8 {
                    switch byte {
                    case 0: return nil
                    case UInt8(ascii: "'"): out.append(contentsOf: "''".utf8)
                    case UInt8(ascii: "\\"): out.append(contentsOf: "\\\\".utf8)
                    default: out.append(byte)
                    }
                }
                out.append(UInt8(ascii: "'"))
            case .blob(let v):
                if out.count + 2 * v.count > maxLiteralBytes { return nil }
                out.append(contentsOf: "E'\\\\x".utf8)
                for byte in v {
                    out.append(Self.hexDigits[Int(byte >> 4)])
                    out.append(Self.hexDigits[Int(byte & 0xF)])
                }
                out.append(UInt8(ascii: "'"))
            }
            if out.count > maxLiteralBytes { return nil }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Whether PostgreSQL can `PREPARE` the statement (a query or DML statement).
    static func isPreparable(_ text: String) -> Bool {
        let head = text.drop(while: { $0 == " " || $0 == "\n" || $0 == "\t" }).prefix(7).uppercased()
        return head.hasPrefix("SELECT") || head.hasPrefix("INSERT") || head.hasPrefix("UPDATE")
            || head.hasPrefix("DELETE")
            || head.hasPrefix("WITH")
    }

    /// Waits for the statements in flight (they finished when a later one did) and keeps the
    /// first failure for `throwDeferred`.
    /// `keeping`: a ticket among them whose result the caller reads (returned).
    @discardableResult
    private func settle(keeping kept: Int? = nil) -> PostgresResult? {
        guard !inFlight.isEmpty else { return nil }
        wire.flush()
        var keptResult: PostgresResult?
        for ticket in inFlight {
            switch wire.result(ticket) {
            case .success(let result):
                if result.command != "SELECT" { lastChanges = result.rowCount ?? 0 }
                if ticket == kept { keptResult = result }
            case .failure(let error):
                if deferredError == nil { deferredError = failure(error) }
            }
        }
        inFlight.removeAll(keepingCapacity: true)
        return keptResult
    }

    func checkSent() throws(StorageError) {
        try flushBatch()
        try throwDeferred()
    }

    private func throwDeferred() throws(StorageError) {
        settle()
        if let error = deferredError {
            deferredError = nil
            throw error
        }
    }

    /// Runs a statement and returns the first column of its first row, if any.
    func firstInteger(_ sql: String, _ values: [SQLValue]) throws(StorageError) -> Int64? {
        try query(sql, values).firstValue.flatMap { Int64.fromSQL($0) }
    }

    /// In the writer's transaction the statement is sent without waiting (see `send`).
    func run(_ sql: String, _ arguments: SQLArguments) throws(StorageError) {
        try execute(sql, arguments.values)
    }

    /// A statement whose result nothing reads (`run`, a hot statement's `execute`): in the
    /// writer's transaction sent without waiting, else waited for.
    func execute(_ sql: String, _ values: [SQLValue]) throws(StorageError) {
        if isInsideTransaction {
            try send(sql, values)
        } else {
            try query(sql, values)
        }
    }

    func rows(_ sql: String, _ arguments: SQLArguments) throws(StorageError) -> [SQLRow] {
        Self.rows(try query(sql, arguments.values))
    }

    func row(_ sql: String, _ arguments: SQLArguments) throws(StorageError) -> SQLRow? {
        try rows(sql, arguments).first
    }

    func int64(_ sql: String, _ arguments: SQLArguments) throws(StorageError) -> Int64? {
        try query(sql, arguments.values).firstValue.flatMap { Int64.fromSQL($0) }
    }

    func eachRow(_ sql: String, bind: (HotBinder) -> Void, _ body: (RawRow) throws(StorageError) -> Void)
        throws(StorageError)
    {
        let values = SQLBindings()
        bind(HotBinder(bindingHandle: nil, collected: values))
        for row in Self.rows(try query(sql, values.values)) {
            try body(RawRow(row))
        }
    }

    @discardableResult
    func runRaw(_ sql: String, bind: (HotBinder) -> Void) throws(StorageError) -> Int {
        let values = SQLBindings()
        bind(HotBinder(bindingHandle: nil, collected: values))
        try query(sql, values.values)
        return changesCount
    }

    func hotStatement(_ sql: String) throws(StorageError) -> HotStatement { HotStatement(self, sql) }

    func afterNextTransaction(
        onCommit: @escaping @Sendable (Any?) -> Void, onRollback: @escaping @Sendable (Any?) -> Void
    ) {
        hooks.append((onCommit, onRollback))
    }

    // MARK: Transactions

    func begin() throws(StorageError) {
        settle()
        deferredError = nil
        endBatch()
        try query("BEGIN", [])
        isInsideTransaction = true
    }

    func commit() throws(StorageError) {
        do throws(StorageError) {
            let result = try query("COMMIT", [])
            // A COMMIT of a transaction a failed statement aborted rolls it back, without an error.
            if result.command == "ROLLBACK" {
                throw StorageError(
                    .commitFailed, "PostgreSQL rolled the transaction back at COMMIT (a statement in it had failed)")
            }
        } catch {
            isInsideTransaction = false
            rollback()
            throw error
        }
        isInsideTransaction = false
        deferring = false
        let done = hooks
        hooks.removeAll()
        for hook in done { hook.commit(nil) }
    }

    func rollback() {
        // What was held back was never sent: it goes with the transaction.
        endBatch()
        settle()
        deferredError = nil
        if isInsideTransaction, !isBroken { _ = try? query("ROLLBACK", []) }
        isInsideTransaction = false
        let done = hooks
        hooks.removeAll()
        for hook in done { hook.rollback(nil) }
    }

    // MARK: Dialect

    /// The storage's SQL in PostgreSQL's dialect: `?`/`?N` placeholders become `$N`, and
    /// `INSERT OR IGNORE` becomes `INSERT ... ON CONFLICT DO NOTHING`. The only place the
    /// storage's SQL is rewritten; everything else is written in the SQL both backends share.
    func translate(_ sql: String) -> String { translation(sql).text }

    /// `translate`'s text and whether PostgreSQL can prepare it, worked out once per SQL text.
    private func translation(_ sql: String) -> (text: String, preparable: Bool) {
        if let known = translations[sql] { return known }
        let text = Self.translated(sql)
        let made = (text, Self.isPreparable(text))
        translations[sql] = made
        return made
    }

    static func translated(_ sql: String) -> String {
        var out = ""
        out.reserveCapacity(sql.utf8.count + 16)
        var next = 1
        var inString = false
        var chars = Array(sql)
        var i = 0
        while i < chars.count {
            let c = chars[i]
            if c == "'" { inString.toggle() }
            if c == "?", !inString {
                var j = i + 1
                var digits = ""
                while j < chars.count, chars[j].isNumber {
                    digits.append(chars[j])
                    j += 1
                }
                if digits.isEmpty {
                    out += "$\(next)"
                    next += 1
                } else {
                    out += "$\(digits)"
                }
                i = j
                continue
            }
            out.append(c)
            i += 1
        }
        chars = []
        let ignoring = "INSERT OR IGNORE INTO"
        if let range = out.range(of: ignoring) {
            out.replaceSubrange(range, with: "INSERT INTO")
            if let returning = out.range(of: " RETURNING ") {
                out.insert(contentsOf: " ON CONFLICT DO NOTHING", at: returning.lowerBound)
            } else {
                out += " ON CONFLICT DO NOTHING"
            }
        }
        return out
    }

    // MARK: Values

    static func rows(_ result: PostgresResult) -> [SQLRow] {
        guard !result.rows.isEmpty else { return [] }
        let names = SQLColumnNames(result.columns)
        return result.rows.map { SQLRow(names: names, values: $0) }
    }

    // MARK: Errors

    /// The storage error for a failure of this connection; a connection-level failure marks
    /// the session broken (the pool replaces it).
    private func failure(_ error: StorageError) -> StorageError {
        if error.code == .databaseUnavailable { failed = true }
        return error
    }
}
