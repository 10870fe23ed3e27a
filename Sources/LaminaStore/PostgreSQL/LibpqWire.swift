import Foundation

/// The libpq driver of `PostgresWire`, in pipeline mode: statements queued without waiting
/// are written together and the server runs them back to back (one round trip for the
/// writer's held-back batch, or for a read's BEGIN and first statement). A Sync ends each
/// hand-over (`flush`); results are read in order, a later one waited for reading (and
/// keeping) the earlier ones. Driven by the thread that owns the session: the writer, or a
/// reader thread of the pool.
final class LibpqWire: PostgresWire {
    let connection: LibpqConnection
    private var nextTicket = 0
    /// Tickets sent whose results are not read yet, in order (`head` is the next one).
    private var awaiting: [Int] = []
    private var head = 0
    /// Results read, not yet taken.
    private var ready: [Int: Result<PostgresResult, StorageError>] = [:]
    /// Statements queued since the last Sync.
    private var unsynced = false

    init(_ connection: LibpqConnection) throws(StorageError) {
        self.connection = connection
        guard connection.enterPipelineMode() else {
            throw StorageError(.databaseUnavailable, "libpq refused pipeline mode: \(connection.errorMessage)")
        }
    }

    var bindsPreparedParameters: Bool { true }
    var driverName: String { "libpq" }

    /// Closed, failed, or (when idle) the server closed it: a read of what waits on the socket says.
    var isClosed: Bool {
        if connection.isBad { return true }
        if head == awaiting.count, connection.isReadable { return !connection.consumeInput() || connection.isBad }
        return false
    }

    func enqueue(_ statement: PostgresStatement) -> Int {
        nextTicket += 1
        let ticket = nextTicket
        if connection.isBad {
            ready[ticket] = .failure(StorageError(.databaseUnavailable, "the connection to PostgreSQL is closed"))
        } else if connection.send(statement) {
            awaiting.append(ticket)
            unsynced = true
        } else {
            ready[ticket] = .failure(
                StorageError(.databaseUnavailable, "libpq could not send the statement: \(connection.errorMessage)"))
        }
        return ticket
    }

    func flush() {
        guard !connection.isBad else { return failAll(closedError) }
        if unsynced {
            unsynced = false
            guard connection.pipelineSync() else {
                return failAll(StorageError(.databaseUnavailable, "libpq: \(connection.errorMessage)"))
            }
        }
        do throws(StorageError) {
            try connection.flush()
        } catch {
            failAll(error)
        }
    }

    func result(_ ticket: Int) -> Result<PostgresResult, StorageError> {
        flush()
        while ready[ticket] == nil {
            guard head < awaiting.count else {
                return .failure(StorageError(.database, "no statement \(ticket) in flight"))
            }
            readNext()
        }
        return ready.removeValue(forKey: ticket)!
    }

    func close() {
        connection.finish()
    }

    private var closedError: StorageError {
        StorageError(.databaseUnavailable, "the connection to PostgreSQL is closed")
    }

    /// Reads the results of the next statement awaiting them (and a Sync before it).
    private func readNext() {
        let ticket = awaiting[head]
        var outcome: Result<PostgresResult, StorageError>?
        var emptyReads = 0
        while true {
            guard !connection.isBad else { return failAll(closedError) }
            let next: OpaquePointer?
            do throws(StorageError) {
                next = try connection.nextResult()
            } catch {
                return failAll(error)
            }
            guard let result = next else {
                if outcome != nil { break }
                // A NULL before any result: nothing was queued (the connection's state is not ours).
                emptyReads += 1
                if emptyReads > 2 {
                    connection.finish()
                    return failAll(StorageError(.database, "libpq returned no result for a statement in the pipeline"))
                }
                continue
            }
            defer { LibpqConnection.clear(result) }
            if LibpqConnection.isSync(result) { continue }
            if outcome == nil { outcome = connection.outcome(of: result) }
        }
        head += 1
        if head == awaiting.count {
            awaiting.removeAll(keepingCapacity: true)
            head = 0
        }
        ready[ticket] = outcome
    }

    private func failAll(_ error: StorageError) {
        for ticket in awaiting[head...] { ready[ticket] = .failure(error) }
        awaiting.removeAll(keepingCapacity: true)
        head = 0
        unsynced = false
    }
}
