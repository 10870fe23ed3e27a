import CLibpq
import Foundation

/// The libpq listening connection, driven by a thread of its own: it waits in `poll()` on the
/// connection's socket and a wake-up pipe, reads what arrived (`PQconsumeInput`), hands each
/// notification (`PQnotifies`) to the handler, and runs the statements other threads queue
/// (one at a time, in order).
final class LibpqListenLink: PostgresListenLink, @unchecked Sendable {
    private let connection: LibpqConnection
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [Job] = []
    private var closing = false
    private var closed = false
    private var closeHandlers: [@Sendable () -> Void] = []
    private var handler: (@Sendable (String, String) -> Void)?
    /// The wake-up pipe: [read end, write end].
    private var wake: [Int32] = [-1, -1]

    private final class Job: @unchecked Sendable {
        let sql: String
        let values: [PostgresValue]
        let completion: @Sendable (Result<PostgresResult, StorageError>) -> Void
        var outcome: Result<PostgresResult, StorageError>?
        init(
            _ sql: String, _ values: [PostgresValue],
            _ completion: @escaping @Sendable (Result<PostgresResult, StorageError>) -> Void
        ) {
            self.sql = sql
            self.values = values
            self.completion = completion
        }
    }

    /// Connects, starts the connection's thread and sets `synchronous_commit` as the connector does.
    init(connector: PostgresConnector) throws(StorageError) {
        connection = try LibpqConnection.connect(connector.location)
        guard pipe(&wake) == 0 else {
            connection.finish()
            throw StorageError(.databaseUnavailable, "cannot make a wake-up pipe: errno \(errno)")
        }
        for fd in wake { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        let thread = Thread { [self] in
            StorageThreadName.nameCurrentThread(StorageThreadName.notifications)
            pump()
        }
        thread.start()
        let wanted = connector.syncsCommits ? "on" : "off"
        do throws(StorageError) {
            _ = try query("SET synchronous_commit = \(wanted)", [])
            let actual = try query("SHOW synchronous_commit", []).firstValue
            guard actual == .text(wanted) else {
                throw StorageError(.openFailed, "PostgreSQL refused synchronous_commit = \(wanted)")
            }
        } catch {
            close()
            throw error
        }
    }

    func listen(_ channels: [String], _ handler: @escaping @Sendable (String, String) -> Void) {
        condition.lock()
        self.handler = handler
        condition.unlock()
        for channel in channels { send("LISTEN \(channel)", [], completion: nil) }
    }

    func int64(_ sql: String, _ values: [PostgresValue]) throws(StorageError) -> Int64? {
        try query(sql, values).firstValue.flatMap { Int64.fromSQL($0) }
    }

    private func query(_ sql: String, _ values: [PostgresValue]) throws(StorageError) -> PostgresResult {
        let done = DispatchSemaphore(value: 0)
        let box = ResultBox()
        enqueue(
            Job(sql, values) { outcome in
                box.value = outcome
                done.signal()
            })
        done.wait()
        return try box.value!.get()
    }

    func send(_ sql: String, _ values: [PostgresValue], completion: (@Sendable (StorageError?) -> Void)?) {
        enqueue(
            Job(sql, values) { outcome in
                if case .failure(let error) = outcome {
                    completion?(error)
                } else {
                    completion?(nil)
                }
            })
    }

    private func enqueue(_ job: Job) {
        condition.lock()
        guard !closed, !closing else {
            condition.unlock()
            return job.completion(.failure(StorageError(.databaseUnavailable, "the listening connection is closed")))
        }
        jobs.append(job)
        poke()
        condition.unlock()
    }

    /// Wakes the connection's thread (under the lock, while the pipe is open).
    private func poke() {
        var byte: UInt8 = 1
        _ = write(wake[1], &byte, 1)
    }

    var isClosed: Bool {
        condition.lock()
        defer { condition.unlock() }
        return closed || closing
    }

    func onClose(_ body: @escaping @Sendable () -> Void) {
        condition.lock()
        guard closed else {
            closeHandlers.append(body)
            condition.unlock()
            return
        }
        condition.unlock()
        body()
    }

    func waitUntilClosed() {
        condition.lock()
        while !closed { condition.wait() }
        condition.unlock()
    }

    func close() {
        condition.lock()
        if !closed, !closing {
            closing = true
            poke()
        }
        condition.unlock()
    }

    // MARK: The connection's thread

    private func pump() {
        var current: Job?
        var fds = [
            pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wake[0], events: Int16(POLLIN), revents: 0),
        ]
        loop: while true {
            condition.lock()
            if closing {
                condition.unlock()
                break
            }
            if current == nil, !jobs.isEmpty {
                let job = jobs.removeFirst()
                condition.unlock()
                guard connection.send(.unnamed(job.sql, job.values)) else {
                    job.completion(.failure(StorageError(.databaseUnavailable, connection.errorMessage)))
                    break
                }
                current = job
            } else {
                condition.unlock()
            }
            do throws(StorageError) {
                try connection.flush()
            } catch {
                current?.completion(.failure(error))
                current = nil
                break
            }
            fds[0].revents = 0
            fds[1].revents = 0
            if poll(&fds, 2, -1) < 0, errno != EINTR { break }
            if fds[1].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 64)
                _ = read(wake[0], &drain, drain.count)
            }
            if fds[0].revents != 0, !connection.consumeInput() { break }
            while let job = current {
                let (ready, result) = connection.resultIfReady()
                guard ready else { break }
                if let result {
                    if job.outcome == nil { job.outcome = connection.outcome(of: result) }
                    LibpqConnection.clear(result)
                    continue
                }
                current = nil
                job.completion(job.outcome ?? .success(.empty))
            }
            condition.lock()
            let handler = handler
            condition.unlock()
            while let notification = connection.notification() {
                handler?(notification.channel, notification.payload)
            }
            if connection.isBad { break loop }
        }
        let error = StorageError(.databaseUnavailable, "the listening connection to PostgreSQL closed")
        current?.completion(.failure(error))
        condition.lock()
        closed = true
        closing = true
        let dropped = jobs
        jobs = []
        let handlers = closeHandlers
        closeHandlers = []
        closeDescriptor(wake[0])
        closeDescriptor(wake[1])
        wake = [-1, -1]
        condition.broadcast()
        condition.unlock()
        connection.finish()
        for job in dropped { job.completion(.failure(error)) }
        for handler in handlers { handler() }
    }
}

private final class ResultBox: @unchecked Sendable {
    var value: Result<PostgresResult, StorageError>?
}

private func closeDescriptor(_ fd: Int32) {
    if fd >= 0 { _ = close(fd) }
}
