import Foundation
import GRDB

/// A value bound into, or read out of, a statement on either backend (SQLite or PostgreSQL):
/// the storage types both share. Positions, HLCs and counts are 64-bit integers (BIGINT);
/// identifiers and bodies are bytes (BLOB / BYTEA); flags are the integers 0 and 1.
enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)

    var isNull: Bool { if case .null = self { return true } else { return false } }

    /// The value for GRDB (the SQLite backend).
    var grdbValue: DatabaseValue {
        switch self {
        case .null: return .null
        case .integer(let v): return (v as any GRDB.DatabaseValueConvertible).databaseValue
        case .real(let v): return (v as any GRDB.DatabaseValueConvertible).databaseValue
        case .text(let v): return (v as any GRDB.DatabaseValueConvertible).databaseValue
        case .blob(let v): return (v as any GRDB.DatabaseValueConvertible).databaseValue
        }
    }
}

/// A Swift value the storage code binds as a statement argument. The storage files name it
/// `DatabaseValueConvertible` (the name they used with GRDB; see the aliases below).
protocol SQLArgument {
    /// The value as bound.
    var databaseValue: SQLValue { get }
}

extension Int64: SQLArgument { var databaseValue: SQLValue { .integer(self) } }
extension Int: SQLArgument { var databaseValue: SQLValue { .integer(Int64(self)) } }
extension Int32: SQLArgument { var databaseValue: SQLValue { .integer(Int64(self)) } }
extension UInt8: SQLArgument { var databaseValue: SQLValue { .integer(Int64(self)) } }
extension Bool: SQLArgument { var databaseValue: SQLValue { .integer(self ? 1 : 0) } }
extension Double: SQLArgument { var databaseValue: SQLValue { .real(self) } }
extension String: SQLArgument { var databaseValue: SQLValue { .text(self) } }
extension Data: SQLArgument { var databaseValue: SQLValue { .blob(self) } }
extension SQLValue: SQLArgument { var databaseValue: SQLValue { self } }
extension Optional: SQLArgument where Wrapped: SQLArgument {
    var databaseValue: SQLValue { self?.databaseValue ?? .null }
}

/// The positional arguments of a statement (`?` placeholders, in order).
struct SQLArguments: ExpressibleByArrayLiteral, Sendable {
    var values: [SQLValue]

    init() { values = [] }
    init(arrayLiteral elements: (any SQLArgument)?...) {
        values = elements.map { $0?.databaseValue ?? .null }
    }
    init<S: Sequence>(_ sequence: S) where S.Element: SQLArgument {
        values = sequence.map(\.databaseValue)
    }
    init(_ sequence: [any SQLArgument]) {
        values = sequence.map(\.databaseValue)
    }

    static func += (lhs: inout SQLArguments, rhs: SQLArguments) { lhs.values += rhs.values }
    static func + (lhs: SQLArguments, rhs: SQLArguments) -> SQLArguments {
        var out = lhs
        out.values += rhs.values
        return out
    }

    /// The arguments for GRDB (the SQLite backend).
    var grdbArguments: GRDB.StatementArguments { GRDB.StatementArguments(values.map(\.grdbValue)) }
}

// The storage files were written against GRDB's names; these keep their call shapes while
// every statement runs on either backend. Backend code spells GRDB's own types `GRDB.X`.
typealias DatabaseValueConvertible = SQLArgument
typealias Row = SQLRow
typealias StatementArguments = SQLArguments

/// A Swift value the storage code reads from a column.
protocol SQLColumnValue: GRDB.DatabaseValueConvertible {
    /// The value from a PostgreSQL column (nil for NULL or a value of another type).
    static func fromSQL(_ value: SQLValue) -> Self?
}

extension Int64: SQLColumnValue {
    static func fromSQL(_ value: SQLValue) -> Int64? {
        switch value {
        case .integer(let v): return v
        case .real(let v): return Int64(exactly: v.rounded(.towardZero))
        default: return nil
        }
    }
}
extension Int: SQLColumnValue {
    static func fromSQL(_ value: SQLValue) -> Int? { Int64.fromSQL(value).map { Int($0) } }
}
extension Int32: SQLColumnValue {
    static func fromSQL(_ value: SQLValue) -> Int32? { Int64.fromSQL(value).flatMap { Int32(exactly: $0) } }
}
extension UInt8: SQLColumnValue {
    static func fromSQL(_ value: SQLValue) -> UInt8? { Int64.fromSQL(value).flatMap { UInt8(exactly: $0) } }
}
extension Bool: SQLColumnValue {
    static func fromSQL(_ value: SQLValue) -> Bool? { Int64.fromSQL(value).map { $0 != 0 } }
}
extension Double: SQLColumnValue {
    static func fromSQL(_ value: SQLValue) -> Double? {
        switch value {
        case .real(let v): return v
        case .integer(let v): return Double(v)
        default: return nil
        }
    }
}
extension String: SQLColumnValue {
    static func fromSQL(_ value: SQLValue) -> String? {
        switch value {
        case .text(let v): return v
        case .blob(let v): return String(decoding: v, as: UTF8.self)
        case .integer(let v): return String(v)
        case .real(let v): return String(v)
        case .null: return nil
        }
    }
}
extension Data: SQLColumnValue {
    static func fromSQL(_ value: SQLValue) -> Data? {
        switch value {
        case .blob(let v): return v
        case .text(let v): return Data(v.utf8)
        default: return nil
        }
    }
}

/// Column names of a PostgreSQL result, shared by its rows.
final class SQLColumnNames: Sendable {
    let names: [String]
    init(_ names: [String]) { self.names = names }

    func index(of name: String) -> Int? {
        if let i = names.firstIndex(of: name) { return i }
        let lower = name.lowercased()
        return names.firstIndex { $0.lowercased() == lower }
    }
}

/// A row of a query result on either backend, read by column name or position with the
/// subscripts the storage code used on GRDB's rows: `let x: Int64 = row["x"]` (traps on NULL,
/// as GRDB does), `let y: Data? = row["y"]`.
struct SQLRow {
    enum Storage {
        case sqlite(GRDB.Row)
        case values(SQLColumnNames, [SQLValue])
    }
    let storage: Storage

    init(_ row: GRDB.Row) { storage = .sqlite(row) }
    init(names: SQLColumnNames, values: [SQLValue]) { storage = .values(names, values) }

    func value(_ index: Int) -> SQLValue {
        switch storage {
        case .sqlite(let row):
            return Self.value(row[index] as DatabaseValue)
        case .values(_, let values):
            return values[index]
        }
    }

    private static func value(_ value: DatabaseValue) -> SQLValue {
        switch value.storage {
        case .null: return .null
        case .int64(let v): return .integer(v)
        case .double(let v): return .real(v)
        case .string(let v): return .text(v)
        case .blob(let v): return .blob(v)
        }
    }

    func value(named column: String) -> SQLValue {
        switch storage {
        case .sqlite(let row):
            return Self.value((row[column] as DatabaseValue?) ?? .null)
        case .values(let names, let values):
            guard let index = names.index(of: column) else { return .null }
            return values[index]
        }
    }

    subscript<T: SQLColumnValue>(_ column: String) -> T? {
        switch storage {
        case .sqlite(let row): return row[column]
        case .values: return T.fromSQL(value(named: column))
        }
    }

    subscript<T: SQLColumnValue>(_ column: String) -> T {
        switch storage {
        case .sqlite(let row): return row[column]
        case .values:
            guard let value = T.fromSQL(value(named: column)) else {
                fatalError("column \(column) holds no \(T.self): \(value(named: column))")
            }
            return value
        }
    }

    subscript<T: SQLColumnValue>(_ index: Int) -> T? {
        switch storage {
        case .sqlite(let row): return row[index]
        case .values(_, let values): return T.fromSQL(values[index])
        }
    }

    subscript<T: SQLColumnValue>(_ index: Int) -> T {
        switch storage {
        case .sqlite(let row): return row[index]
        case .values(_, let values):
            guard let value = T.fromSQL(values[index]) else {
                fatalError("column \(index) holds no \(T.self): \(values[index])")
            }
            return value
        }
    }
}

extension SQLRow: ColumnRow {
    func isNull(_ index: Int) -> Bool { value(index).isNull }
    func int64(_ index: Int) -> Int64 { Int64.fromSQL(value(index)) ?? 0 }
    func bytes(_ index: Int) -> [UInt8]? { Data.fromSQL(value(index)).map { [UInt8]($0) } }
    func uuid(_ index: Int) -> UUID? {
        guard let data = Data.fromSQL(value(index)), data.count == 16 else { return nil }
        return try? Columns.uuid(data, column: "")
    }
    func text(_ index: Int) -> String? { String.fromSQL(value(index)) }
}
