import Foundation
import LaminaModel
import Logging
import NIOCore
import PostgresNIO

/// The `LISTEN`/`NOTIFY` channels nodes sharing one PostgreSQL database use.
enum NotificationChannel {
    /// Feed positions: `<origin>\n<head> <user>\n…`, sent in the committing transaction
    /// (PostgreSQL delivers it at COMMIT, and not at all on rollback).
    static let feed = "lamina_feed"
    /// Ephemeral events (typing): `<origin>\n<body>`, sent outside any transaction.
    static let ephemeral = "lamina_ephemeral"
    /// A payload's bytes at most (PostgreSQL's limit is 8000).
    static let maxPayloadBytes = 7_900
}

/// The feed heads a committed group advanced, as `lamina_feed` payloads.
enum FeedAnnouncement {
    /// Payloads of at most `NotificationChannel.maxPayloadBytes`, each starting with `origin`.
    static func payloads(origin: String, heads: [UserID: Int64]) -> [String] {
        var out: [String] = []
        var current = origin
        for (user, head) in heads.sorted(by: { $0.key < $1.key }) {
            let line = "\n\(head) \(user.rawValue)"
            if current.utf8.count + line.utf8.count > NotificationChannel.maxPayloadBytes {
                out.append(current)
                current = origin
            }
            current += line
        }
        if current.utf8.count > origin.utf8.count { out.append(current) }
        return out
    }

    /// The origin and the (user, head) pairs of a payload; nil when it is not one.
    static func decode(_ payload: String) -> (origin: Substring, heads: [(UserID, UInt64)])? {
        var lines = payload.split(separator: "\n", omittingEmptySubsequences: false)[...]
        guard let origin = lines.popFirst() else { return nil }
        var heads: [(UserID, UInt64)] = []
        for line in lines {
            guard let space = line.firstIndex(of: " "), let head = UInt64(line[..<space]),
                  let user = try? UserID(String(line[line.index(after: space)...])) else { return nil }
            heads.append((user, head))
        }
        return (origin, heads)
    }
}

/// Sends a group's feed heads on `lamina_feed` from inside its transaction (the writer, just
/// before COMMIT): one statement whatever the number of payloads.
final class FeedAnnouncer: Sendable {
    /// This store's origin tag: its own notifications come back to its listener, which skips them.
    let origin: String
    private let counters: PostgresCounters

    init(origin: String, counters: PostgresCounters) {
        self.origin = origin
        self.counters = counters
    }

    func announce(_ heads: [UserID: Int64], on db: any SQLSession) throws(StorageError) {
        let payloads = FeedAnnouncement.payloads(origin: origin, heads: heads)
        guard !payloads.isEmpty else { return }
        let calls = payloads.map { _ in "pg_notify('\(NotificationChannel.feed)', ?)" }.joined(separator: ", ")
        try db.run("SELECT \(calls)", SQLArguments(payloads))
        counters.update { $0.feedNotificationsSent += payloads.count }
    }
}

/// What the listening connection hands to the node.
struct NotificationHandlers: Sendable {
    /// Feed heads other nodes committed: each live session of a user reads its feed from its cursor.
    var feeds: @Sendable ([(UserID, UInt64)]) -> Void
    /// An ephemeral event another node relayed (the body it sent).
    var ephemeral: @Sendable (String) -> Void
    /// The connection is listening (again): every live session reads its feed from its
    /// cursor, so what was committed while no one listened is not missed.
    var connected: @Sendable () -> Void
}

/// One dedicated connection that `LISTEN`s on both channels, opened again (with backoff)
/// whenever it is lost, on its own thread. It also sends the ephemeral notifications.
final class PostgresListener: @unchecked Sendable {
    private let connector: PostgresConnector
    let origin: String
    private let logger = Logger(label: "lamina.storage.listen")
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var session: PostgresSession?
    private var stopped = false
    private var started = false
    private var failure: String? = "not connected yet"
    /// The listening thread is running.
    private var running = false

    init(connector: PostgresConnector, origin: String) {
        self.connector = connector
        self.origin = origin
    }

    /// Why the database is not ready (nil: the listening connection is up).
    var unavailableReason: String? {
        condition.lock()
        defer { condition.unlock() }
        return failure
    }

    func start(_ handlers: NotificationHandlers) {
        condition.lock()
        defer { condition.unlock() }
        guard !started, !stopped else { return }
        started = true
        running = true
        let thread = Thread { [self] in run(handlers) }
        thread.name = "lamina.storage.listen"
        thread.start()
    }

    /// Sends an ephemeral event to the other nodes (dropped when not connected: it is not stored).
    func sendEphemeral(_ body: String) {
        let payload = "\(origin)\n\(body)"
        guard payload.utf8.count <= NotificationChannel.maxPayloadBytes else { return }
        condition.lock()
        let connection = session?.connection
        condition.unlock()
        guard let connection, !connection.isClosed else { return }
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(payload)
        let query = PostgresQuery(unsafeSQL: "SELECT pg_notify('\(NotificationChannel.ephemeral)', $1)", binds: bindings)
        connection.query(query, logger: logger).whenComplete { _ in }
        connector.counters.update { $0.ephemeralNotificationsSent += 1 }
    }

    /// Stops listening. Never blocks (a store may be let go on an event loop): the connection
    /// is closed without waiting, and the listening thread ends when it sees it closed.
    func stop() {
        condition.lock()
        stopped = true
        let current = session
        condition.broadcast()
        condition.unlock()
        current?.connection.close().whenComplete { _ in }
    }

    /// Waits (at most `timeout`) until the listening thread has ended: before the
    /// connections' event loop is shut down (it may be opening a connection).
    func waitUntilStopped(timeout: Duration = .seconds(5)) {
        let deadline = Date().addingTimeInterval(timeout.seconds)
        condition.lock()
        while running, condition.wait(until: deadline) {}
        condition.unlock()
    }

    private func run(_ handlers: NotificationHandlers) {
        defer {
            condition.lock()
            running = false
            condition.broadcast()
            condition.unlock()
        }
        var delay = Duration.milliseconds(50)
        while true {
            condition.lock()
            if stopped {
                condition.unlock()
                return
            }
            condition.unlock()
            let opened: PostgresSession
            do throws(StorageError) {
                opened = try connector.connect()
            } catch {
                condition.lock()
                failure = error.reason
                if !stopped { _ = condition.wait(until: Date().addingTimeInterval(delay.seconds)) }
                condition.unlock()
                delay = min(delay * 2, .seconds(2))
                continue
            }
            delay = .milliseconds(50)
            condition.lock()
            guard !stopped else {
                condition.unlock()
                connector.close(opened)
                return
            }
            session = opened
            condition.unlock()
            let origin = origin
            let counters = connector.counters
            opened.connection.addListener(channel: NotificationChannel.feed) { _, message in
                guard let (from, heads) = FeedAnnouncement.decode(message.payload), from != origin else { return }
                counters.update { $0.feedNotificationsReceived += 1 }
                handlers.feeds(heads)
            }
            opened.connection.addListener(channel: NotificationChannel.ephemeral) { _, message in
                guard let newline = message.payload.firstIndex(of: "\n"), message.payload[..<newline] != origin else { return }
                counters.update { $0.ephemeralNotificationsReceived += 1 }
                handlers.ephemeral(String(message.payload[message.payload.index(after: newline)...]))
            }
            // Statements on a connection run in order: once this returns, both LISTENs did.
            do throws(StorageError) {
                try opened.run("SELECT 1")
            } catch {
                condition.lock()
                failure = error.reason
                session = nil
                condition.unlock()
                connector.close(opened)
                continue
            }
            condition.lock()
            failure = nil
            condition.unlock()
            counters.update { $0.listenerConnects += 1 }
            handlers.connected()
            try? opened.connection.closeFuture.wait()
            condition.lock()
            session = nil
            if !stopped {
                failure = "the listening connection to PostgreSQL closed"
                logger.warning("PostgreSQL listening connection lost; reconnecting")
            }
            condition.unlock()
        }
    }
}
