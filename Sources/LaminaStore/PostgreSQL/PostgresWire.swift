import Foundation

/// A value bound to a statement's parameter, as both drivers bind it (the same PostgreSQL
/// types postgres-nio gives Swift's `Int64`, `Double`, `String`, bytes, `Bool` and their arrays).
enum PostgresValue {
    case null
    case bigint(Int64)
    case double(Double)
    case text(String)
    case bytea(Data)
    case boolean(Bool)
    case bigints([Int64])
    case texts([String])
    case byteas([Data])
    case booleans([Bool])

    init(_ value: SQLValue) {
        switch value {
        case .null: self = .null
        case .integer(let v): self = .bigint(v)
        case .real(let v): self = .double(v)
        case .text(let v): self = .text(v)
        case .blob(let v): self = .bytea(v)
        }
    }

    /// The parameter's type OID (0 for NULL: inferred by the server, as for an unnamed statement).
    var typeOID: UInt32 {
        switch self {
        case .null: return 0
        case .bigint: return 20
        case .double: return 701
        case .text: return 25
        case .bytea: return 17
        case .boolean: return 16
        case .bigints: return 1016
        case .texts: return 1009
        case .byteas: return 1001
        case .booleans: return 1000
        }
    }
}

/// One statement handed to a driver.
enum PostgresStatement {
    /// A statement parsed for this run only, with its parameters (`$N`) bound.
    case unnamed(String, [PostgresValue])
    /// Prepares `text` as `name` on the connection, its parameters of `types` (0: inferred).
    case prepare(name: String, text: String, types: [UInt32])
    /// Runs the statement prepared as `name` with these parameters bound.
    case prepared(name: String, [PostgresValue])
    /// Runs the statement prepared as `name` by `EXECUTE name(literals)`: the values in the
    /// statement's text (postgres-nio, see `PostgresSession.literalValues`).
    case execute(name: String, literals: String)
}

/// What a statement returned: its command tag's verb and row count, and its rows.
struct PostgresResult {
    /// The command tag's first word (`SELECT`, `INSERT`, `COMMIT`, `ROLLBACK`, …).
    var command: String
    /// The rows the command tag reports (changed or returned), when it reports any.
    var rowCount: Int?
    var columns: [String]
    var rows: [[SQLValue]]

    static let empty = PostgresResult(command: "", rowCount: nil, columns: [], rows: [])

    /// The first column of the first row, if any.
    var firstValue: SQLValue? { rows.first?.first }

    /// Parses a command tag (`INSERT 0 5`, `UPDATE 3`, `SELECT 2`, `BEGIN`).
    static func tag(_ tag: String) -> (command: String, rows: Int?) {
        let words = tag.split(separator: " ")
        guard let first = words.first else { return ("", nil) }
        let rows = words.count > 1 ? words.last.flatMap { Int($0) } : nil
        return (String(first), rows)
    }
}

/// The seam between the store's PostgreSQL session (`PostgresSession`: statements, prepared
/// names, the held-back batch, deferred errors, counters) and a driver: libpq (`LibpqWire`;
/// postgres-nio's was removed after the comparison in POSTGRES.md). One connection, used by one
/// thread at a time.
/// Statements run in the order they are queued; each has a ticket, and waiting for a ticket's
/// result means every statement queued before it has finished.
protocol PostgresWire: AnyObject {
    /// Queues `statement` (not necessarily sent yet); its ticket.
    func enqueue(_ statement: PostgresStatement) -> Int
    /// Hands everything queued to the server, without waiting for results.
    func flush()
    /// Waits for the result of `ticket` (flushing first). A ticket's result is taken once.
    func result(_ ticket: Int) -> Result<PostgresResult, StorageError>
    /// Whether the connection failed or was closed: the session must be replaced.
    var isClosed: Bool { get }
    /// Closes the connection (waiting for it when the driver does).
    func close()
    /// Whether prepared statements take their values as bound parameters (libpq's
    /// `PQsendQueryPrepared`); otherwise as literals in an `EXECUTE` (postgres-nio).
    var bindsPreparedParameters: Bool { get }
    /// The driver's name, for logs and figures.
    var driverName: String { get }
}
