import Foundation
import GRDB
import LaminaModel

/// A query turned into SQL: a WHERE condition and an ORDER BY, with every caller value
/// bound as a parameter (never spliced into the text).
struct CompiledQuery {
    var condition: SQLFragment
    var order: SQLFragment
    var limit: Int?
    var offset: Int

    var arguments: StatementArguments {
        StatementArguments(condition.arguments + order.arguments)
    }
}

/// Checks a query against its target's properties and `QueryLimits`, and compiles it.
struct QueryCompiler {
    let target: QueryTarget
    private var comparisons = 0
    private var argumentCount = 0

    init(target: QueryTarget) { self.target = target }

    static func compile(
        target: QueryTarget, predicate: QueryPredicate?, sort: [QuerySortDescriptor], limit: Int?, offset: Int
    ) throws(ClientError) -> CompiledQuery {
        var compiler = QueryCompiler(target: target)
        var condition =
            try predicate.map { p throws(ClientError) in try compiler.compile(p, depth: 1) } ?? SQLFragment(sql: "1")
        if let base = target.baseCondition { condition.sql = "\(base) AND (\(condition.sql))" }
        let order = try compiler.compileOrder(sort)
        if let limit, !(0...QueryLimits.maxLimit).contains(limit) {
            throw ClientError(.queryTooComplex, "a query limit is 0...\(QueryLimits.maxLimit), not \(limit)")
        }
        guard (0...QueryLimits.maxLimit).contains(offset) else {
            throw ClientError(.queryTooComplex, "a query offset is 0...\(QueryLimits.maxLimit), not \(offset)")
        }
        return CompiledQuery(condition: condition, order: order, limit: limit, offset: offset)
    }

    private mutating func compile(_ predicate: QueryPredicate, depth: Int) throws(ClientError) -> SQLFragment {
        guard depth <= QueryLimits.maxDepth else {
            throw ClientError(.queryTooComplex, "a predicate nests at most \(QueryLimits.maxDepth) levels deep")
        }
        switch predicate {
        case .and(let items), .or(let items):
            let isAnd: Bool = if case .and = predicate { true } else { false }
            guard !items.isEmpty else { return SQLFragment(sql: isAnd ? "1" : "0") }
            var parts: [SQLFragment] = []
            for item in items { parts.append(try compile(item, depth: depth + 1)) }
            return SQLFragment(
                sql: "(" + parts.map(\.sql).joined(separator: isAnd ? " AND " : " OR ") + ")",
                arguments: parts.flatMap(\.arguments))
        case .not(let inner):
            let f = try compile(inner, depth: depth + 1)
            return SQLFragment(sql: "(NOT COALESCE(\(f.sql), 0))", arguments: f.arguments)
        case .compare(let name, let op, let value):
            comparisons += 1
            guard comparisons <= QueryLimits.maxComparisons else {
                throw ClientError(.queryTooComplex, "a predicate has at most \(QueryLimits.maxComparisons) comparisons")
            }
            let fragment = try comparison(name, op, value)
            argumentCount += fragment.arguments.count
            guard argumentCount <= QueryLimits.maxArguments else {
                throw ClientError(.queryTooComplex, "a query binds at most \(QueryLimits.maxArguments) values")
            }
            return fragment
        }
    }

    private func mismatch(_ name: String, _ op: PredicateOperator, _ value: QueryValue, _ kind: QueryPropertyKind)
        -> ClientError
    {
        ClientError(
            .typeMismatch,
            "'\(name.prefix(200))' (\(kind.rawValue)) cannot be compared with \(op.rawValue) to \(Self.describe(value))"
        )
    }

    static func describe(_ value: QueryValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "a bool"
        case .integer: "an integer"
        case .string: "a string"
        case .user: "a user"
        case .users: "a set of users"
        case .conversation: "a conversation id"
        case .message: "a message id"
        case .channel: "a channel id"
        case .timestamp: "a timestamp"
        case .position: "a position"
        case .list: "a list"
        }
    }

    /// The bound values of one scalar value for a property of `kind`, or nil when the value
    /// is not of that kind.
    private static func bind(_ value: QueryValue, as kind: QueryPropertyKind) throws(ClientError) -> [DatabaseValue]? {
        switch (kind, value) {
        case (.bool, .bool(let b)): return [b.databaseValue]
        case (.integer, .integer(let i)): return [i.databaseValue]
        case (.text, .string(let s)):
            guard s.utf8.count <= QueryLimits.maxStringBytes else {
                throw ClientError(
                    .queryTooComplex, "a query string is at most \(QueryLimits.maxStringBytes) UTF-8 bytes")
            }
            return [s.databaseValue]
        case (.user, .user(let u)): return [u.rawValue.databaseValue]
        case (.conversationID, .conversation(let id)): return [StoreCoding.blob(id).databaseValue]
        case (.messageID, .message(let id)): return [StoreCoding.blob(id).databaseValue]
        case (.channelID, .channel(let id)): return [StoreCoding.blob(id).databaseValue]
        case (.timestamp, .timestamp(let t)): return [t.millisecondsSince1970.databaseValue]
        case (.position, .position(let p)):
            let c = StoreCoding.positionColumns(p)
            return [c.0.databaseValue, c.1.databaseValue, c.2.databaseValue]
        default: return nil
        }
    }

    private func comparison(_ name: String, _ op: PredicateOperator, _ value: QueryValue) throws(ClientError)
        -> SQLFragment
    {
        let property = try target.property(name)
        let kind = property.kind
        switch kind {
        case .participants: return try participants(name, op, value)
        case .reactors:
            guard op == .contains, case .user(let user) = value else { throw mismatch(name, op, value, kind) }
            return SQLFragment(
                sql: "EXISTS (SELECT 1 FROM message_reaction mr WHERE mr.message_id = message.id AND mr.user_id = ?)",
                arguments: [user.rawValue.databaseValue])
        case .mentions:
            guard op == .contains, case .user(let user) = value else { throw mismatch(name, op, value, kind) }
            return SQLFragment(
                sql: "EXISTS (SELECT 1 FROM message_mention mm WHERE mm.message_id = message.id AND mm.user_id = ?)",
                arguments: [user.rawValue.databaseValue])
        case .mimeTypes:
            guard op == .contains, case .string(let mime) = value else { throw mismatch(name, op, value, kind) }
            // A channel message's parts are in `part` too (`v13-channel-content`).
            let owner = target == .channelMessages ? "channel_message.id" : "message.id"
            return SQLFragment(
                sql: "EXISTS (SELECT 1 FROM part pt WHERE pt.message_id = \(owner) AND pt.mime_type = ?)",
                arguments: [mime.databaseValue])
        default: break
        }
        // The property as one SQL operand: a column, or a row value of three for positions.
        let columnArgs = property.columns.flatMap(\.arguments)
        let operand =
            property.columns.count == 1
            ? property.columns[0].sql : "(" + property.columns.map(\.sql).joined(separator: ", ") + ")"
        let firstColumn = property.columns[0].sql
        let marks =
            property.columns.count == 1
            ? "?" : "(" + Array(repeating: "?", count: property.columns.count).joined(separator: ", ") + ")"
        let firstArgs = property.columns[0].arguments

        if value == .null {
            guard property.nullable, op == .equalTo || op == .notEqualTo else { throw mismatch(name, op, value, kind) }
            return SQLFragment(sql: "(\(firstColumn) IS \(op == .equalTo ? "" : "NOT ")NULL)", arguments: firstArgs)
        }
        switch op {
        case .equalTo, .notEqualTo, .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo:
            guard let bound = try Self.bind(value, as: kind) else { throw mismatch(name, op, value, kind) }
            if kind == .bool, op != .equalTo, op != .notEqualTo { throw mismatch(name, op, value, kind) }
            let sqlOp: String =
                switch op {
                case .equalTo: "="
                case .notEqualTo: "="
                case .lessThan: "<"
                case .lessThanOrEqualTo: "<="
                case .greaterThan: ">"
                default: ">="
                }
            let test = "\(operand) \(sqlOp) \(marks)"
            // != counts a missing value as different: NOT COALESCE(x = v, 0).
            let sql = op == .notEqualTo ? "(NOT COALESCE(\(test), 0))" : "(\(test))"
            return SQLFragment(sql: sql, arguments: columnArgs + bound)
        case .in, .notIn:
            guard case .list(let items) = value else { throw mismatch(name, op, value, kind) }
            guard items.count <= QueryLimits.maxListCount else {
                throw ClientError(
                    .queryTooComplex,
                    "an in-list has at most \(QueryLimits.maxListCount) values, this one has \(items.count)")
            }
            var bound: [DatabaseValue] = []
            for item in items {
                guard let b = try Self.bind(item, as: kind) else { throw mismatch(name, op, item, kind) }
                bound += b
            }
            let list =
                property.columns.count == 1
                ? "(" + Array(repeating: "?", count: items.count).joined(separator: ", ") + ")"
                : "(VALUES " + Array(repeating: marks, count: items.count).joined(separator: ", ") + ")"
            if items.isEmpty { return SQLFragment(sql: op == .in ? "0" : "1") }
            let test = "\(operand) IN \(list)"
            let sql = op == .in ? "(\(test))" : "(NOT COALESCE(\(test), 0))"
            return SQLFragment(sql: sql, arguments: columnArgs + bound)
        case .like:
            guard kind == .text || kind == .user, case .string(let pattern) = value else {
                throw mismatch(name, op, value, kind)
            }
            guard pattern.utf8.count <= QueryLimits.maxStringBytes else {
                throw ClientError(
                    .queryTooComplex, "a query string is at most \(QueryLimits.maxStringBytes) UTF-8 bytes")
            }
            return SQLFragment(sql: "(\(operand) LIKE ? ESCAPE '\\')", arguments: columnArgs + [pattern.databaseValue])
        case .contains:
            throw mismatch(name, op, value, kind)
        }
    }

    private func participants(_ name: String, _ op: PredicateOperator, _ value: QueryValue) throws(ClientError)
        -> SQLFragment
    {
        switch (op, value) {
        case (.contains, .user(let user)):
            return SQLFragment(
                sql:
                    "EXISTS (SELECT 1 FROM participant pp WHERE pp.conversation_id = conversation.id AND pp.user_id = ?)",
                arguments: [user.rawValue.databaseValue])
        case (.equalTo, .users(let users)), (.notEqualTo, .users(let users)):
            guard users.count <= QueryLimits.maxListCount else {
                throw ClientError(
                    .queryTooComplex,
                    "a user set has at most \(QueryLimits.maxListCount) users, this one has \(users.count)")
            }
            guard !users.isEmpty else { return SQLFragment(sql: op == .equalTo ? "0" : "1") }
            let marks = Array(repeating: "?", count: users.count).joined(separator: ", ")
            let test = """
                ((SELECT COUNT(*) FROM participant pp WHERE pp.conversation_id = conversation.id) = ? \
                AND (SELECT COUNT(*) FROM participant pp WHERE pp.conversation_id = conversation.id AND pp.user_id IN (\(marks))) = ?)
                """
            let args =
                [users.count.databaseValue] + users.sorted().map { $0.rawValue.databaseValue } + [
                    users.count.databaseValue
                ]
            return SQLFragment(sql: op == .equalTo ? test : "(NOT \(test))", arguments: args)
        default:
            throw mismatch(name, op, value, .participants)
        }
    }

    private func compileOrder(_ sort: [QuerySortDescriptor]) throws(ClientError) -> SQLFragment {
        guard sort.count <= QueryLimits.maxSortDescriptors else {
            throw ClientError(
                .queryTooComplex, "a query has at most \(QueryLimits.maxSortDescriptors) sort descriptors")
        }
        var terms: [String] = []
        var args: [DatabaseValue] = []
        for descriptor in sort {
            let property = try target.property(descriptor.property)
            guard !property.columns.isEmpty else {
                throw ClientError(
                    .typeMismatch, "'\(descriptor.property)' (\(property.kind.rawValue)) cannot be sorted on")
            }
            let dir = descriptor.ascending ? "ASC" : "DESC"
            if property.kind == .position {
                // Messages without a position (not yet sent) sort after all others.
                terms.append("(\(property.columns[0].sql) IS NULL) \(dir)")
                args += property.columns[0].arguments
            }
            for column in property.columns {
                terms.append("\(column.sql) \(dir)")
                args += column.arguments
            }
        }
        terms.append("\(target.table).\(target.tieBreakColumn) ASC")
        return SQLFragment(sql: terms.joined(separator: ", "), arguments: args)
    }
}
