import Foundation

/// The read connections: at most `size` reader threads, each owning one connection that only
/// it drives (opened on its first read, replaced when it breaks). A read is queued and taken
/// by an idle reader thread; it runs in a read-only snapshot transaction. No read blocks a
/// thread it does not own: callers on event loops hand a read over with a completion.
final class PostgresReaderPool: @unchecked Sendable {
    private let connector: PostgresConnector
    private let size: Int
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [@Sendable (PostgresReaderThread) -> Void] = []
    private var jobsHead = 0
    private var threads = 0
    private var idle = 0
    private var running = 0
    private var closed = false

    init(connector: PostgresConnector, size: Int) {
        self.connector = connector
        self.size = max(1, size)
        connector.counters.update { $0.readerPoolSize = size }
    }

    /// Runs `body` on a reader thread and calls `completion` there with its outcome.
    func read<T>(
        _ body: @escaping @Sendable (PostgresSession) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        submit { reader in completion(Result { try reader.read(body) }) }
    }

    /// Runs `body` on a reader thread, the caller waiting for it (start-up, tools, tests).
    func read<T>(_ body: (PostgresSession) throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            let call = SynchronousRead(body)
            submit { reader in call.run(reader) }
            call.done.wait()
            return try call.outcome!.get()
        }
    }

    private func submit(_ job: @escaping @Sendable (PostgresReaderThread) -> Void) {
        condition.lock()
        if closed {
            condition.unlock()
            job(PostgresReaderThread(connector: connector, closed: true))
            return
        }
        if jobs.count - jobsHead >= idle, threads >= size {
            // Every reader is busy: count the wait and how long it lasts.
            let queued = ContinuousClock.now
            let counters = connector.counters
            counters.update { $0.poolWaits += 1 }
            jobs.append { reader in
                let waited = ContinuousClock.now - queued
                counters.update {
                    $0.poolWaitMicroseconds +=
                        Int(waited.components.seconds) * 1_000_000
                        + Int(waited.components.attoseconds / 1_000_000_000_000)
                }
                job(reader)
            }
        } else {
            jobs.append(job)
        }
        if jobs.count - jobsHead > idle, threads < size {
            threads += 1
            let number = threads
            let thread = Thread { [self] in work(number) }
            thread.start()
        }
        condition.signal()
        condition.unlock()
    }

    private func work(_ number: Int) {
        StorageThreadName.nameCurrentThread("\(StorageThreadName.reader)\(number)")
        let reader = PostgresReaderThread(connector: connector, closed: false)
        condition.lock()
        running += 1
        while true {
            while jobsHead == jobs.count, !closed {
                idle += 1
                condition.wait()
                idle -= 1
            }
            guard jobsHead < jobs.count else { break }
            let job = jobs[jobsHead]
            jobsHead += 1
            if jobsHead == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                jobsHead = 0
            }
            condition.unlock()
            job(reader)
            condition.lock()
        }
        running -= 1
        condition.broadcast()
        condition.unlock()
        reader.close()
    }

    /// Stops the reader threads once the queued reads ran; each closes its connection.
    /// `waiting`: waits (at most 5 s) for them to end.
    func close(waiting: Bool = true) {
        condition.lock()
        closed = true
        condition.broadcast()
        if waiting {
            let deadline = Date().addingTimeInterval(5)
            while running > 0, condition.wait(until: deadline) {}
        }
        condition.unlock()
    }
}

/// One reader thread's connection (only that thread touches it).
final class PostgresReaderThread: @unchecked Sendable {
    private let connector: PostgresConnector
    private let closed: Bool
    private var session: PostgresSession?

    init(connector: PostgresConnector, closed: Bool) {
        self.connector = connector
        self.closed = closed
    }

    func read<T>(_ body: (PostgresSession) throws -> T) throws -> T {
        guard !closed else { throw StorageError(.closed, "the store is closed") }
        var retried = false
        while true {
            let reused: Bool
            let current: PostgresSession
            if let session, !session.isBroken {
                current = session
                reused = true
            } else {
                if let session { connector.close(session) }
                session = nil
                current = try connector.connectWithBackoff()
                session = current
                reused = false
            }
            connector.counters.update { $0.readersInUse += 1 }
            var result: Result<T, any Error>
            do {
                // BEGIN and COMMIT are not waited for: BEGIN goes with the read's first
                // statement, COMMIT is settled by the connection's next use (a read-only
                // transaction's COMMIT fails only with its connection).
                try current.sendWithoutWaiting("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                result = .success(try body(current))
                try current.sendWithoutWaiting("COMMIT", now: true)
            } catch {
                result = .failure(error)
                if !current.isBroken { _ = try? current.run("ROLLBACK") }
            }
            connector.counters.update { $0.readersInUse -= 1 }
            // An idle connection the server closed meanwhile (a restart, another node's
            // administrator): the read fails on it and runs once more on a new connection
            // (a read changes nothing: running it again is safe).
            if case .failure = result, reused, !retried, current.isBroken {
                retried = true
                continue
            }
            return try result.get()
        }
    }

    func close() {
        if let session { connector.close(session) }
        session = nil
    }
}

/// A read the caller waits for: its body is let go on the reader thread before the caller is
/// woken (it must not outlive the caller's `withoutActuallyEscaping`).
private final class SynchronousRead<T>: @unchecked Sendable {
    private var body: ((PostgresSession) throws -> T)?
    var outcome: Result<T, any Error>?
    let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping (PostgresSession) throws -> T) {
        self.body = body
    }

    func run(_ reader: PostgresReaderThread) {
        do {
            let body = self.body!
            self.body = nil
            outcome = Result { try reader.read(body) }
        }
        done.signal()
    }
}
