#if canImport(PostgresNIO)
    import Foundation
    import Logging
    import NIOCore
    import PostgresNIO

    /// The postgres-nio driver of `PostgresWire`: the calling thread blocks on the connection's
    /// futures (never call it on an event loop). Statements queued without waiting go to the
    /// connection's event loop together, with the next one waited for (one wake-up of the loop);
    /// postgres-nio runs one query at a time per connection (no pipelining). Prepared statements
    /// are `PREPARE` / `EXECUTE name(literals)`: postgres-nio's protocol-level prepared
    /// statements are async-only, which would lose the order of the statements not waited for.
    final class PostgresNIOWire: PostgresWire {
        let connection: PostgresConnection
        private let logger: Logger
        private var unsent: [(PostgresQuery, EventLoopPromise<PostgresQueryResult>)] = []
        private var pending: [Int: EventLoopFuture<PostgresQueryResult>] = [:]
        private var nextTicket = 0

        init(_ connection: PostgresConnection, logger: Logger) {
            self.connection = connection
            self.logger = logger
        }

        deinit {
            // Statements never handed over (the session dropped in the middle of a transaction).
            for (_, promise) in unsent {
                promise.fail(StorageError(.closed, "the session ended before the statement was sent"))
            }
        }

        var bindsPreparedParameters: Bool { false }
        var driverName: String { "postgres-nio" }
        var isClosed: Bool { connection.isClosed }

        func enqueue(_ statement: PostgresStatement) -> Int {
            let query: PostgresQuery
            switch statement {
            case .unnamed(let text, let values):
                query = PostgresQuery(unsafeSQL: text, binds: Self.bindings(values))
            case .prepare(let name, let text, let types):
                let names = types.map(Self.typeName)
                let list = names.isEmpty ? "" : " (" + names.joined(separator: ", ") + ")"
                query = PostgresQuery(unsafeSQL: "PREPARE \(name)\(list) AS \(text)")
            case .prepared(let name, let values):
                // The session hands values that fit in literals only (`PostgresSession.literalValues`).
                let literals = PostgresSession.literalValues(values.map(Self.sqlValue)) ?? ""
                query = PostgresQuery(unsafeSQL: values.isEmpty ? "EXECUTE \(name)" : "EXECUTE \(name)(\(literals))")
            case .execute(let name, let literals):
                query = PostgresQuery(unsafeSQL: literals.isEmpty ? "EXECUTE \(name)" : "EXECUTE \(name)(\(literals))")
            }
            let promise = connection.eventLoop.makePromise(of: PostgresQueryResult.self)
            unsent.append((query, promise))
            nextTicket += 1
            pending[nextTicket] = promise.futureResult
            return nextTicket
        }

        func flush() {
            guard !unsent.isEmpty else { return }
            connection.queryIfOpen(unsent, logger: logger)
            unsent.removeAll(keepingCapacity: true)
        }

        func result(_ ticket: Int) -> Result<PostgresResult, StorageError> {
            flush()
            guard let future = pending.removeValue(forKey: ticket) else {
                return .failure(StorageError(.database, "no statement \(ticket) in flight"))
            }
            do {
                let result = try future.wait()
                var rows: [[SQLValue]] = []
                var columns: [String] = []
                for (i, row) in result.rows.enumerated() {
                    if i == 0 { columns = row.map(\.columnName) }
                    rows.append(row.map(Self.value))
                }
                return .success(
                    PostgresResult(
                        command: result.metadata.command, rowCount: result.metadata.rows, columns: columns, rows: rows))
            } catch {
                return .failure(PostgresNIOErrors.storageError(error))
            }
        }

        func close() {
            try? connection.close().wait()
        }

        private static func typeName(_ oid: UInt32) -> String {
            switch oid {
            case 20: return "bigint"
            case 701: return "double precision"
            case 25: return "text"
            case 17: return "bytea"
            case 16: return "boolean"
            default: return "unknown"
            }
        }

        private static func sqlValue(_ value: PostgresValue) -> SQLValue {
            switch value {
            case .bigint(let v): return .integer(v)
            case .double(let v): return .real(v)
            case .text(let v): return .text(v)
            case .bytea(let v): return .blob(v)
            case .boolean(let v): return .integer(v ? 1 : 0)
            default: return .null
            }
        }

        static func bindings(_ values: [PostgresValue]) -> PostgresBindings {
            var bindings = PostgresBindings(capacity: values.count)
            for value in values {
                switch value {
                case .null: bindings.appendNull()
                case .bigint(let v): bindings.append(v)
                case .double(let v): bindings.append(v)
                case .text(let v): bindings.append(v)
                case .bytea(let v): bindings.append(ByteBuffer(bytes: v))
                case .boolean(let v): bindings.append(v)
                case .bigints(let v): bindings.append(v)
                case .texts(let v): bindings.append(v)
                case .byteas(let v): bindings.append(v.map { ByteBuffer(bytes: $0) })
                case .booleans(let v): bindings.append(v)
                }
            }
            return bindings
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
                return .blob(PostgresText.bytea(String(buffer: bytes)))
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
                return PostgresText.number(text)
            default:
                return .text(String(buffer: bytes))
            }
        }
    }

    /// Opens postgres-nio connections (the connector's `postgres-nio` driver).
    enum PostgresNIODriver {
        static func connect(
            _ location: PostgresLocation, on eventLoop: any EventLoop, id: Int, logger: Logger
        ) throws(StorageError) -> PostgresNIOWire {
            guard location.sslMode == nil || location.sslMode == "disable" else {
                throw StorageError(
                    .invalidArgument,
                    "sslmode=\(location.sslMode ?? "") needs the libpq driver (LAMINA_POSTGRES_DRIVER=libpq)")
            }
            let configuration: PostgresConnection.Configuration
            if let socketDirectory = location.socketDirectory {
                configuration = PostgresConnection.Configuration(
                    unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(location.port)", username: location.user,
                    password: location.password, database: location.database)
            } else {
                configuration = PostgresConnection.Configuration(
                    host: location.host, port: location.port, username: location.user, password: location.password,
                    database: location.database, tls: .disable)
            }
            do {
                let connection = try PostgresConnection.connect(
                    on: eventLoop, configuration: configuration, id: id, logger: logger
                ).wait()
                return PostgresNIOWire(connection, logger: logger)
            } catch {
                throw PostgresNIOErrors.storageError(error)
            }
        }
    }

    /// How postgres-nio's failures map to `StorageError`s (the server's through `PostgresErrors`).
    enum PostgresNIOErrors {
        static func storageError(_ error: any Error, file: String = #fileID, line: Int = #line) -> StorageError {
            if let error = error as? StorageError { return error }
            guard let error = error as? PSQLError else {
                return StorageError(.databaseUnavailable, "PostgreSQL: \(error)", file: file, line: line)
            }
            if let info = error.serverInfo {
                return PostgresErrors.storageError(
                    state: info[.sqlState] ?? "", message: info[.message] ?? "no message", table: info[.tableName],
                    detail: info[.detail], file: file, line: line)
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
                    .database, "PostgreSQL: \(error.code) \(error.underlying.map { "\($0)" } ?? "")", file: file,
                    line: line)
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
#endif
