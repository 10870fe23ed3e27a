import CLibpq
import Foundation

/// One libpq connection (`PGconn`), the only place the store calls libpq's C API. Non-blocking
/// socket: statements are queued in libpq's output buffer (`send`), written by `flush`, and
/// their results read by `nextResult`, which waits in `poll()` on `PQsocket`. Used by one
/// thread at a time: the thread that owns it (the writer, a reader of the pool, the listener's).
final class LibpqConnection {
    private let conn: OpaquePointer
    /// Set once a read or write on the socket failed: the connection is done.
    private(set) var failed = false

    private init(_ conn: OpaquePointer) {
        self.conn = conn
    }

    private var finished = false

    deinit {
        finish()
    }

    /// Closes the connection (once).
    func finish() {
        guard !finished else { return }
        finished = true
        failed = true
        PQfinish(conn)
    }

    /// Connects (blocking the caller; libpq's `connect_timeout` bounds it). `sslmode` and
    /// `sslrootcert` are the URL's (libpq negotiates TLS with the system OpenSSL); `sslmode` is
    /// `disable` when it names none.
    static func connect(_ location: PostgresLocation) throws(StorageError) -> LibpqConnection {
        var parameters: [(String, String)] = [
            ("host", location.socketDirectory ?? location.host), ("port", String(location.port)),
            ("user", location.user), ("dbname", location.database), ("sslmode", location.sslMode ?? "disable"),
            ("connect_timeout", "10"), ("application_name", "lamina"), ("client_encoding", "UTF8"),
        ]
        if let password = location.password { parameters.append(("password", password)) }
        if let rootCertificate = location.sslRootCertificate { parameters.append(("sslrootcert", rootCertificate)) }
        let keys = parameters.map { strdup($0.0) }
        let values = parameters.map { strdup($0.1) }
        defer {
            for pointer in keys + values { free(pointer) }
        }
        var keyPointers: [UnsafePointer<CChar>?] = keys.map { UnsafePointer($0) } + [nil]
        var valuePointers: [UnsafePointer<CChar>?] = values.map { UnsafePointer($0) } + [nil]
        guard let conn = PQconnectdbParams(&keyPointers, &valuePointers, 0) else {
            throw StorageError(.databaseUnavailable, "libpq could not allocate a connection")
        }
        let connection = LibpqConnection(conn)
        guard PQstatus(conn) == CONNECTION_OK else {
            let message = connection.errorMessage
            let lowered = message.lowercased()
            // libpq reports the server's refusal as text only (no SQLSTATE for a failed connection).
            if lowered.contains("authentication failed") || lowered.contains("no pg_hba.conf entry")
                || lowered.contains("pg_hba.conf rejects")
                || lowered.contains("password") && lowered.contains("not")
                || lowered.contains("role \"") && lowered.contains("does not exist")
            {
                throw StorageError(.authenticationFailed, "PostgreSQL refused the credentials: \(message)")
            }
            if lowered.contains("database") && lowered.contains("does not exist") {
                throw StorageError(.database, "PostgreSQL error 3D000: \(message)")
            }
            throw StorageError(.databaseUnavailable, "PostgreSQL is unreachable: \(message)")
        }
        // Notices (a COMMIT outside a transaction, say) are not errors: not printed on stderr.
        PQsetNoticeProcessor(conn, { _, _ in }, nil)
        guard PQsetnonblocking(conn, 1) == 0 else {
            throw StorageError(
                .databaseUnavailable, "libpq: cannot make the socket non-blocking: \(connection.errorMessage)")
        }
        return connection
    }

    var errorMessage: String {
        String(cString: PQerrorMessage(conn)).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    var socket: Int32 { PQsocket(conn) }

    var isBad: Bool { finished || failed || PQstatus(conn) != CONNECTION_OK }

    /// The server process id of this connection.
    var backendPID: Int32 { PQbackendPID(conn) }

    func enterPipelineMode() -> Bool { PQenterPipelineMode(conn) == 1 }

    /// Ends a pipeline segment (libpq queues a Sync and flushes what it can).
    func pipelineSync() -> Bool { PQpipelineSync(conn) == 1 }

    // MARK: Sending

    /// Queues `statement` (results asked in binary); false when libpq refused it (connection gone).
    func send(_ statement: PostgresStatement) -> Bool {
        switch statement {
        case .unnamed(let text, let values):
            return withParameters(values) { n, types, pointers, lengths, formats in
                PQsendQueryParams(conn, text, n, types, pointers, lengths, formats, 1) == 1
            }
        case .prepare(let name, let text, let types):
            return types.withUnsafeBufferPointer { oids in
                PQsendPrepare(conn, name, text, Int32(oids.count), oids.baseAddress) == 1
            }
        case .prepared(let name, let values):
            return withParameters(values) { n, _, pointers, lengths, formats in
                PQsendQueryPrepared(conn, name, n, pointers, lengths, formats, 1) == 1
            }
        case .execute(let name, let literals):
            let text = literals.isEmpty ? "EXECUTE \(name)" : "EXECUTE \(name)(\(literals))"
            return PQsendQueryParams(conn, text, 0, nil, nil, nil, nil, 1) == 1
        }
    }

    /// Calls `body` with libpq's parameter arrays for `values`, every value in binary.
    private func withParameters(
        _ values: [PostgresValue],
        _ body: (
            Int32, UnsafePointer<Oid>?, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?,
            UnsafePointer<Int32>?
        ) -> Bool
    ) -> Bool {
        if values.isEmpty { return body(0, nil, nil, nil, nil) }
        var buffer: [UInt8] = []
        var offsets: [Int] = []
        var lengths: [Int32] = []
        var types: [Oid] = []
        for value in values {
            types.append(value.typeOID)
            let start = buffer.count
            if LibpqBinary.encode(value, into: &buffer) {
                offsets.append(start)
                lengths.append(Int32(buffer.count - start))
            } else {
                offsets.append(-1)
                lengths.append(0)
            }
        }
        buffer.append(0)  // never empty, so the base address exists
        let formats = [Int32](repeating: 1, count: values.count)
        return buffer.withUnsafeBufferPointer { bytes in
            let base = UnsafeRawPointer(bytes.baseAddress!).assumingMemoryBound(to: CChar.self)
            let pointers: [UnsafePointer<CChar>?] = offsets.map { $0 < 0 ? nil : base + $0 }
            return types.withUnsafeBufferPointer { types in
                pointers.withUnsafeBufferPointer { pointers in
                    lengths.withUnsafeBufferPointer { lengths in
                        formats.withUnsafeBufferPointer { formats in
                            body(
                                Int32(values.count), types.baseAddress, pointers.baseAddress, lengths.baseAddress,
                                formats.baseAddress)
                        }
                    }
                }
            }
        }
    }

    // MARK: Waiting

    /// Writes libpq's output buffer out, reading input meanwhile (so the server, blocked on
    /// sending results, never waits on us while we wait on it).
    func flush() throws(StorageError) {
        while true {
            let state = PQflush(conn)
            if state == 0 { return }
            if state < 0 { throw lost() }
            try wait(writing: true)
            if PQconsumeInput(conn) == 0 { throw lost() }
        }
    }

    /// The next result (nil: the end of the current statement's results), waiting for it.
    func nextResult() throws(StorageError) -> OpaquePointer? {
        try flush()
        while PQisBusy(conn) == 1 {
            try wait(writing: false)
            if PQconsumeInput(conn) == 0 { throw lost() }
        }
        return PQgetResult(conn)
    }

    /// The next result if it has arrived whole (`ready`), without waiting: nil marks the end of
    /// the current statement's results.
    func resultIfReady() -> (ready: Bool, result: OpaquePointer?) {
        guard PQisBusy(conn) == 0 else { return (false, nil) }
        return (true, PQgetResult(conn))
    }

    /// Reads what arrived without waiting; false when the connection is gone.
    func consumeInput() -> Bool {
        if PQconsumeInput(conn) == 0 {
            failed = true
            return false
        }
        return true
    }

    /// Whether input is waiting on the socket now (no wait).
    var isReadable: Bool {
        var pfd = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        return poll(&pfd, 1, 0) > 0
    }

    /// The next notification received, if any (`PQnotifies`): channel and payload.
    func notification() -> (channel: String, payload: String)? {
        guard let notify = PQnotifies(conn) else { return nil }
        defer { PQfreemem(notify) }
        return (String(cString: notify.pointee.relname), String(cString: notify.pointee.extra))
    }

    private func wait(writing: Bool) throws(StorageError) {
        var pfd = pollfd(fd: socket, events: Int16(POLLIN) | (writing ? Int16(POLLOUT) : 0), revents: 0)
        while true {
            let ready = poll(&pfd, 1, -1)
            if ready > 0 { return }
            if ready < 0, errno == EINTR { continue }
            throw lost()
        }
    }

    private func lost() -> StorageError {
        failed = true
        return StorageError(.databaseUnavailable, "the connection to PostgreSQL was lost: \(errorMessage)")
    }

    // MARK: Results

    /// A result's outcome: its rows and command tag, or the failure it reports.
    func outcome(of result: OpaquePointer) -> Result<PostgresResult, StorageError> {
        let status = PQresultStatus(result)
        if status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK || status == PGRES_SINGLE_TUPLE {
            let tag = PostgresResult.tag(String(cString: PQcmdStatus(result)))
            let width = Int(PQnfields(result))
            let height = Int(PQntuples(result))
            var columns: [String] = []
            var types: [Oid] = []
            columns.reserveCapacity(width)
            for column in 0..<width {
                columns.append(String(cString: PQfname(result, Int32(column))))
                types.append(PQftype(result, Int32(column)))
            }
            var rows: [[SQLValue]] = []
            rows.reserveCapacity(height)
            for row in 0..<height {
                var values: [SQLValue] = []
                values.reserveCapacity(width)
                for column in 0..<width {
                    let r = Int32(row)
                    let c = Int32(column)
                    if PQgetisnull(result, r, c) == 1 {
                        values.append(.null)
                        continue
                    }
                    let length = Int(PQgetlength(result, r, c))
                    let bytes = UnsafeRawBufferPointer(start: PQgetvalue(result, r, c), count: length)
                    values.append(LibpqBinary.value(bytes, type: types[column]))
                }
                rows.append(values)
            }
            return .success(PostgresResult(command: tag.command, rowCount: tag.rows, columns: columns, rows: rows))
        }
        if status == PGRES_EMPTY_QUERY { return .success(.empty) }
        if status == PGRES_PIPELINE_ABORTED {
            return .failure(
                StorageError(.database, "PostgreSQL did not run the statement: one before it in the pipeline failed"))
        }
        func field(_ code: UInt8) -> String? {
            guard let value = PQresultErrorField(result, Int32(code)) else { return nil }
            return String(cString: value)
        }
        guard let state = field(UInt8(ascii: "C")) else {
            // No SQLSTATE: the failure is libpq's own (the connection broke).
            failed = failed || PQstatus(conn) != CONNECTION_OK
            let message = String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines)
            return .failure(StorageError(.databaseUnavailable, "PostgreSQL is unreachable: \(message)"))
        }
        return .failure(
            PostgresErrors.storageError(
                state: state, message: field(UInt8(ascii: "M")) ?? "no message", table: field(UInt8(ascii: "t")),
                detail: field(UInt8(ascii: "D"))))
    }

    static func isSync(_ result: OpaquePointer) -> Bool { PQresultStatus(result) == PGRES_PIPELINE_SYNC }

    static func clear(_ result: OpaquePointer) { PQclear(result) }
}
