import Foundation
import LaminaModel
import Logging
import NIOCore
import PostgresNIO

/// The PostgreSQL backend of `SQLSession`: one connection, used by one thread at a time (the
/// writer, or one read). Calls block on the connection's futures: never call it on an event
/// loop. Statements are translated from the storage's SQL (`?` placeholders, `INSERT OR
/// IGNORE`) once per connection, and each is prepared on the connection on first use
/// (`PREPARE`, then `EXECUTE` with the values as literals: parsed and planned once, not each
/// time; see `statement`).
final class PostgresSession: SQLSession, @unchecked Sendable {
    let connection: PostgresConnection
    private let logger: Logger
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
    /// Statements sent but not waited for (`run` inside the writer's transaction), in order.
    private var inFlight: [EventLoopFuture<PostgresQueryResult>] = []
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
    var isBroken: Bool { failed || connection.isClosed }

    /// The store's counters (statements and their time), when kept.
    private let counters: PostgresCounters?

    init(_ connection: PostgresConnection, logger: Logger, counters: PostgresCounters? = nil) {
        self.connection = connection
        self.logger = logger
        self.counters = counters
    }

    deinit {
        // Statements never handed over (the session dropped in the middle of a transaction).
        for (_, promise) in unsent {
            promise.fail(StorageError(.closed, "the session ended before the statement was sent"))
        }
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
    func query(_ sql: String, _ values: [SQLValue]) throws(StorageError) -> PostgresQueryResult {
        try flushBatchBefore(sql)
        let query = try statement(sql, values)
        let started = ContinuousClock.now
        defer { counters?.statement(took: ContinuousClock.now - started) }
        let outcome = Result { try submit(query).wait() }
        // The connection runs statements in order: every one sent before has finished.
        try throwDeferred()
        switch outcome {
        case .success(let result):
            if result.metadata.command != "SELECT" { lastChanges = result.metadata.rows ?? 0 }
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
        let promise = connection.eventLoop.makePromise(of: PostgresQueryResult.self)
        unsent.append((query, promise))
        inFlight.append(promise.futureResult)
    }

    /// Sends `sql` (no values) without waiting for it, in or out of a transaction: a read's
    /// BEGIN and COMMIT. Its failure is thrown by the next statement waited for. `now`: handed
    /// to the connection at once (a COMMIT must not wait for the connection's next use).
    func sendWithoutWaiting(_ sql: String, now: Bool = false) throws(StorageError) {
        try send(sql, [])
        if now { flush() }
    }

    /// Statements sent without waiting that are not yet handed to the connection: they go
    /// with the next statement waited for, in one task on the connection's event loop (one
    /// wake-up of the loop, not one per statement).
    private var unsent: [(PostgresQuery, EventLoopPromise<PostgresQueryResult>)] = []

    /// Hands the unsent statements and `query` to the connection, in order; `query`'s result.
    private func submit(_ query: PostgresQuery) -> EventLoopFuture<PostgresQueryResult> {
        let promise = connection.eventLoop.makePromise(of: PostgresQueryResult.self)
        unsent.append((query, promise))
        flush()
        return promise.futureResult
    }

    private func flush() {
        guard !unsent.isEmpty else { return }
        connection.queryIfOpen(unsent, logger: logger)
        unsent.removeAll(keepingCapacity: true)
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
        func enqueue(_ query: PostgresQuery) -> EventLoopFuture<PostgresQueryResult> {
            counters?.statement(took: .zero)
            let promise = connection.eventLoop.makePromise(of: PostgresQueryResult.self)
            unsent.append((query, promise))
            return promise.futureResult
        }
        var inserted: EventLoopFuture<PostgresQueryResult>?
        if !taken.messages.isEmpty {
            let future = enqueue(taken.messagesQuery())
            inFlight.append(future)
            inserted = future
        }
        if !taken.counts.isEmpty { inFlight.append(enqueue(taken.countsQuery())) }
        if !taken.operations.isEmpty { inFlight.append(enqueue(taken.operationsQuery())) }
        let feeds = taken.feeds.isEmpty ? nil : enqueue(taken.feedsQuery())
        flush()
        let feedOutcome = feeds.map { future in Result { try future.wait() } }
        // In the order sent: statements before the batch, then its messages, counts and log.
        try throwDeferred()
        if let inserted, let result = try? inserted.wait() {
            let count = result.rows.first.flatMap { $0.first }.map { Self.value($0) }.flatMap { Int64.fromSQL($0) }
            guard count == Int64(taken.messages.count) else {
                throw StorageError(
                    .alreadyExists,
                    "\(taken.messages.count - Int(count ?? 0)) of the group's \(taken.messages.count) message ids or positions are taken"
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
            for row in result.rows {
                let cells = Array(row)
                guard cells.count == 3, case .text(let id) = Self.value(cells[0]), let user = byRawValue[id],
                    let base = Int64.fromSQL(Self.value(cells[1])), let head = Int64.fromSQL(Self.value(cells[2]))
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

    /// What runs `sql` with `values`: `EXECUTE` of the statement prepared for it on this
    /// connection (preparing it on first use), or the statement itself with its values bound
    /// when it cannot be prepared (not a query or DML statement, past `maxNamedStatements`),
    /// or its values are large (`literalValues`).
    ///
    /// `EXECUTE` takes its values as literals in its text: PostgreSQL does not let it refer to
    /// the parameters of the protocol's Bind ("there is no parameter $1"), and postgres-nio
    /// runs protocol-level prepared statements only from async code, which would not keep the
    /// order of the statements the writer sends without waiting.
    private func statement(_ sql: String, _ values: [SQLValue]) throws(StorageError) -> PostgresQuery {
        let (text, preparable) = translation(sql)
        guard preparable, let literals = Self.literalValues(values) else {
            return PostgresQuery(unsafeSQL: text, binds: Self.bindings(values))
        }
        var key = text
        key.append("\u{0}")
        for value in values { key.append(Self.typeLetter(value)) }
        let name: String
        if let known = named[key] {
            name = known
        } else {
            guard named.count < Self.maxNamedStatements else {
                return PostgresQuery(unsafeSQL: text, binds: Self.bindings(values))
            }
            name = "lamina_\(nextName)"
            nextName += 1
            // Parameter types as the values bind (a NULL's is inferred, as for an unnamed
            // statement): another set of types is another prepared statement.
            let types = values.isEmpty ? "" : " (" + values.map(Self.typeName).joined(separator: ", ") + ")"
            do {
                // After the statements sent before it: a PREPARE that fails aborts the transaction.
                _ = try submit(PostgresQuery(unsafeSQL: "PREPARE \(name)\(types) AS \(text)")).wait()
            } catch {
                try throwDeferred()  // an earlier failure aborted the transaction: it is the one to report
                throw failure(error)
            }
            named[key] = name
        }
        return PostgresQuery(unsafeSQL: values.isEmpty ? "EXECUTE \(name)" : "EXECUTE \(name)(\(literals))")
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

    private static func typeLetter(_ value: SQLValue) -> Character {
        switch value {
        case .null: return "u"
        case .integer: return "i"
        case .real: return "r"
        case .text: return "t"
        case .blob: return "b"
        }
    }

    /// The parameter type of a value as `bindings` binds it.
    private static func typeName(_ value: SQLValue) -> String {
        switch value {
        case .null: return "unknown"
        case .integer: return "bigint"
        case .real: return "double precision"
        case .text: return "text"
        case .blob: return "bytea"
        }
    }

    /// Waits for the statements in flight (they finished when a later one did) and keeps the
    /// first failure for `throwDeferred`.
    private func settle() {
        guard !inFlight.isEmpty else { return }
        flush()
        for future in inFlight {
            do {
                let result = try future.wait()
                if result.metadata.command != "SELECT" { lastChanges = result.metadata.rows ?? 0 }
            } catch {
                if deferredError == nil { deferredError = failure(error) }
            }
        }
        inFlight.removeAll(keepingCapacity: true)
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
        let rows = try query(sql, values).rows
        guard let first = rows.first, let cell = first.first else { return nil }
        return Int64.fromSQL(Self.value(cell))
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
        Self.rows(try query(sql, arguments.values).rows)
    }

    func row(_ sql: String, _ arguments: SQLArguments) throws(StorageError) -> SQLRow? {
        try rows(sql, arguments).first
    }

    func int64(_ sql: String, _ arguments: SQLArguments) throws(StorageError) -> Int64? {
        guard let first = try query(sql, arguments.values).rows.first, let cell = first.first else { return nil }
        return Int64.fromSQL(Self.value(cell))
    }

    func eachRow(_ sql: String, bind: (HotBinder) -> Void, _ body: (RawRow) throws(StorageError) -> Void)
        throws(StorageError)
    {
        let values = SQLBindings()
        bind(HotBinder(bindingHandle: nil, collected: values))
        for row in Self.rows(try query(sql, values.values).rows) {
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
            if result.metadata.command == "ROLLBACK" {
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

    static func bindings(_ values: [SQLValue]) -> PostgresBindings {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values {
            switch value {
            case .null: bindings.appendNull()
            case .integer(let v): bindings.append(v)
            case .real(let v): bindings.append(v)
            case .text(let v): bindings.append(v)
            case .blob(let v): bindings.append(ByteBuffer(bytes: v))
            }
        }
        return bindings
    }

    static func rows(_ rows: [PostgresRow]) -> [SQLRow] {
        guard let first = rows.first else { return [] }
        let names = SQLColumnNames(first.map(\.columnName))
        return rows.map { row in SQLRow(names: names, values: row.map(Self.value)) }
    }

    /// A cell's value, from the binary or the text format.
    static func value(_ cell: PostgresCell) -> SQLValue {
        guard var bytes = cell.bytes else { return .null }
        let binary = cell.format == .binary
        switch cell.dataType {
        case .int2, .int4, .int8, .oid:
            if binary {
                switch bytes.readableBytes {
                case 2: return bytes.readInteger(as: Int16.self).map { .integer(Int64($0)) } ?? .null
                case 4: return bytes.readInteger(as: Int32.self).map { .integer(Int64($0)) } ?? .null
                case 8: return bytes.readInteger(as: Int64.self).map { .integer($0) } ?? .null
                default: return .null
                }
            }
            return Int64(String(buffer: bytes)).map { .integer($0) } ?? .null
        case .bool:
            if binary { return .integer(bytes.readInteger(as: UInt8.self) == 0 ? 0 : 1) }
            return .integer(String(buffer: bytes) == "t" ? 1 : 0)
        case .bytea:
            if binary { return .blob(Data(bytes.readableBytesView)) }
            let text = String(buffer: bytes)
            guard text.hasPrefix("\\x") else { return .blob(Data(text.utf8)) }
            var out = Data(capacity: (text.utf8.count - 2) / 2)
            var high: UInt8?
            for c in text.utf8.dropFirst(2) {
                guard let nibble = hexValue(c) else { continue }
                if let h = high {
                    out.append(h << 4 | nibble)
                    high = nil
                } else {
                    high = nibble
                }
            }
            return .blob(out)
        case .float4, .float8:
            if binary {
                if bytes.readableBytes == 8 {
                    return bytes.readInteger(as: UInt64.self).map { .real(Double(bitPattern: $0)) } ?? .null
                }
                return bytes.readInteger(as: UInt32.self).map { .real(Double(Float(bitPattern: $0))) } ?? .null
            }
            return Double(String(buffer: bytes)).map { .real($0) } ?? .null
        case .numeric:
            let text: String
            if binary {
                guard let decimal = try? cell.decode(Decimal.self) else { return .null }
                text = "\(decimal)"
            } else {
                text = String(buffer: bytes)
            }
            if let integer = Int64(text) { return .integer(integer) }
            return Double(text).map { .real($0) } ?? .null
        default:
            return .text(String(buffer: bytes))
        }
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    // MARK: Errors

    /// The storage error for a failure of this connection; a connection-level failure marks
    /// the session broken (the pool replaces it).
    private func failure(_ error: any Error) -> StorageError {
        let mapped = PostgresErrors.storageError(error)
        if mapped.code == .databaseUnavailable { failed = true }
        return mapped
    }
}

/// How PostgreSQL's failures map to `StorageError`s.
enum PostgresErrors {
    static func storageError(_ error: any Error, file: String = #fileID, line: Int = #line) -> StorageError {
        if let error = error as? StorageError { return error }
        guard let error = error as? PSQLError else {
            return StorageError(.databaseUnavailable, "PostgreSQL: \(error)", file: file, line: line)
        }
        if let info = error.serverInfo {
            let state = info[.sqlState] ?? ""
            let message = info[.message] ?? "no message"
            if state.hasPrefix("23") {
                // Worded as SQLite words it ("UNIQUE constraint failed: table.column, ..."),
                // which is what the storage code matches on.
                let table = info[.tableName] ?? "?"
                var columns: [String] = []
                if let detail = info[.detail], let open = detail.range(of: "Key ("),
                    let close = detail.range(of: ")=", range: open.upperBound..<detail.endIndex)
                {
                    columns = detail[open.upperBound..<close.lowerBound].split(separator: ",").map {
                        "\(table).\($0.trimmingCharacters(in: .whitespaces))"
                    }
                }
                let kind =
                    state == "23505"
                    ? "UNIQUE" : state == "23503" ? "FOREIGN KEY" : state == "23502" ? "NOT NULL" : "CHECK"
                return StorageError(
                    .constraintViolation, "\(kind) constraint failed: \(columns.joined(separator: ", ")) (\(message))",
                    file: file, line: line)
            }
            if state == "40P01" || state == "40001" {
                // Another node's transaction locked the same feed heads in the other order.
                return StorageError(
                    .writeConflict, "PostgreSQL undid a write that collided with another node's (\(state)): \(message)",
                    file: file, line: line)
            }
            if state == "28P01" || state == "28000" {
                return StorageError(
                    .authenticationFailed, "PostgreSQL refused the credentials: \(message)", file: file, line: line)
            }
            if state.hasPrefix("08") || state.hasPrefix("57P") {
                return StorageError(
                    .databaseUnavailable, "PostgreSQL connection failed (\(state)): \(message)", file: file, line: line)
            }
            return StorageError(.database, "PostgreSQL error \(state): \(message)", file: file, line: line)
        }
        switch error.code {
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown:
            let cause = error.underlying.map { "\($0)" } ?? "\(error.code)"
            return StorageError(.databaseUnavailable, "PostgreSQL is unreachable: \(cause)", file: file, line: line)
        case .unsupportedAuthMechanism, .authMechanismRequiresPassword, .saslError:
            return StorageError(
                .authenticationFailed, "PostgreSQL authentication failed: \(error.code)", file: file, line: line)
        default:
            return StorageError(
                .database, "PostgreSQL: \(error.code) \(error.underlying.map { "\($0)" } ?? "")", file: file, line: line
            )
        }
    }
}

extension PostgresConnection {
    /// Runs `query` if the connection is open, else fails at once. Decided on the
    /// connection's event loop, where the channel's state is exact: postgres-nio drops a
    /// query written to a closed channel without completing its future (a wait for it would
    /// never end, and NIO's debug builds trap on the dropped promise); one written while the
    /// channel is open is completed, failed when the connection closes.
    func queryIfOpen(_ query: PostgresQuery, logger: Logger) -> EventLoopFuture<PostgresQueryResult> {
        let promise = eventLoop.makePromise(of: PostgresQueryResult.self)
        queryIfOpen([(query, promise)], logger: logger)
        return promise.futureResult
    }

    /// ``queryIfOpen(_:logger:)`` for several queries, run in order, each completing its promise.
    func queryIfOpen(_ queries: [(PostgresQuery, EventLoopPromise<PostgresQueryResult>)], logger: Logger) {
        eventLoop.execute {
            for (query, promise) in queries {
                if self.isClosed {
                    promise.fail(StorageError(.databaseUnavailable, "the connection to PostgreSQL is closed"))
                } else {
                    self.query(query, logger: logger).cascade(to: promise)
                }
            }
        }
    }
}
