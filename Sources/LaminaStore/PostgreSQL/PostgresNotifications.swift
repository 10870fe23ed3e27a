import Foundation
import LaminaModel
import Logging

/// The `LISTEN`/`NOTIFY` channels nodes sharing one PostgreSQL database use.
package enum NotificationChannel {
    /// Feed positions: `<origin>\n<head> <user>\n…`, sent in the committing transaction
    /// (PostgreSQL delivers it at COMMIT, and not at all on rollback).
    static let feed = "lamina_feed"
    /// Ephemeral events (typing): `<origin>\n<body>`, sent outside any transaction.
    static let ephemeral = "lamina_ephemeral"
    /// Webhook subscriptions changed (created active, activated, deactivated, deleted): sent in
    /// the management write's transaction (delivered at COMMIT); every node reads them again.
    static let webhooks = "lamina_webhooks"
    /// Outbox wake-ups and lease releases, `<origin>\n<webhooks|pushes> <queued|released>`,
    /// sent outside any transaction (after a commit that queued rows, or before a node lets its
    /// leases go): the holder of that outbox's lease looks at its queue, the others try the lease.
    static let outbox = "lamina_outbox"
    /// A payload's bytes at most (PostgreSQL's limit is 8000).
    package static let maxPayloadBytes = 7_900
}

/// Sends a group's feed entries (and the heads they do not reach) on `lamina_feed` from inside
/// its transaction (the writer, just before COMMIT): one statement whatever the number of
/// payloads (`FeedPayloads`).
final class FeedAnnouncer: Sendable {
    /// This store's origin tag: its own notifications come back to its listener, which skips them.
    let origin: String
    private let counters: PostgresCounters
    /// Whether the group's entries travel in its notification: yes, unless the environment
    /// sets `LAMINA_POSTGRES_NOTIFY_ENTRIES=0` (heads only: every woken session reads its
    /// feed, as before; kept to measure the difference in one build).
    let carriesEntries: Bool

    init(
        origin: String, counters: PostgresCounters,
        carriesEntries: Bool = ProcessInfo.processInfo.environment["LAMINA_POSTGRES_NOTIFY_ENTRIES"] != "0"
    ) {
        self.origin = origin
        self.counters = counters
        self.carriesEntries = carriesEntries
    }

    func announce(_ heads: [UserID: Int64], events: [AnnouncedFeedEvent] = [], on db: any SQLSession)
        throws(StorageError)
    {
        let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
        let payloads = FeedPayloads.payloads(origin: origin, heads: heads, events: events, now: now)
        guard !payloads.isEmpty else { return }
        let calls = payloads.map { _ in "pg_notify('\(NotificationChannel.feed)', ?)" }.joined(separator: ", ")
        try db.run("SELECT \(calls)", SQLArguments(payloads))
        counters.update { $0.feedNotificationsSent += payloads.count }
    }

    /// A group that logged replicated operations but advanced no feed: a notification with no
    /// heads (the other nodes' listeners wake their peer links, which read the log).
    func announceLogged(on db: any SQLSession) throws(StorageError) {
        let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
        try db.run("SELECT pg_notify('\(NotificationChannel.feed)', ?)", SQLArguments(["\(origin)\n@\(now)"]))
        counters.update { $0.feedNotificationsSent += 1 }
    }
}

/// An outbox drained by one node at a time: the holder of its lease, a session-level
/// `pg_try_advisory_lock` on the listening connection (released by PostgreSQL when that
/// connection ends, a node killed with SIGKILL included).
package enum OutboxLease: String, Sendable, CaseIterable {
    case webhooks, pushes

    /// The advisory lock's key (beside `PostgresSchema.migrationLock`, "LAMINA").
    var key: Int64 {
        switch self {
        case .webhooks: 0x4C_414D_494E_41_01
        case .pushes: 0x4C_414D_494E_41_02
        }
    }

    /// How often a node without the lease tries to take it (besides when another node lets it
    /// go, and at each (re)connect).
    static let retryInterval: Duration = .seconds(1)
    /// How often the holder's idle lanes look at their queue anyway, for a wake-up another node
    /// sent while its listening connection was down (wake-ups are not stored).
    package static let idlePollInterval: Duration = .seconds(5)
}

/// What one outbox's delivery hands to the listening connection (set once delivery starts).
package struct OutboxObserver: Sendable {
    /// The lease was taken (true: this node drains the outbox) or lost (false: stop at once).
    var held: @Sendable (Bool) -> Void
    /// Another node queued rows in this outbox (only while holding the lease).
    var wake: @Sendable () -> Void
    /// Webhooks only: the subscriptions changed on some node, or the connection is listening
    /// (again), so a change announced meanwhile is not missed: read them again.
    var subscriptionsChanged: (@Sendable () -> Void)?

    package init(
        held: @escaping @Sendable (Bool) -> Void, wake: @escaping @Sendable () -> Void,
        subscriptionsChanged: (@Sendable () -> Void)?
    ) {
        self.held = held
        self.wake = wake
        self.subscriptionsChanged = subscriptionsChanged
    }
}

/// What the listening connection hands to the node.
package struct NotificationHandlers: Sendable {
    /// Feed heads other nodes committed: each live session of a user reads its feed from its cursor.
    var feeds: @Sendable ([(UserID, UInt64)]) -> Void
    /// Another node's commit with its entries (`FeedNotification`): delivered from the
    /// notification where a session is caught up, read otherwise. When nil, `feeds` gets the
    /// highest seq per user instead.
    var entries: (@Sendable (FeedNotification) -> Void)?
    /// An ephemeral event another node relayed (the body it sent).
    var ephemeral: @Sendable (String) -> Void
    /// The connection is listening (again): every live session reads its feed from its
    /// cursor, so what was committed while no one listened is not missed.
    var connected: @Sendable () -> Void

    package init(
        feeds: @escaping @Sendable ([(UserID, UInt64)]) -> Void, ephemeral: @escaping @Sendable (String) -> Void,
        connected: @escaping @Sendable () -> Void, entries: (@Sendable (FeedNotification) -> Void)? = nil
    ) {
        self.feeds = feeds
        self.entries = entries
        self.ephemeral = ephemeral
        self.connected = connected
    }
}

/// One dedicated connection that `LISTEN`s on both channels, opened again (with backoff)
/// whenever it is lost, on its own thread. It also sends the ephemeral notifications.
final class PostgresListener: @unchecked Sendable {
    private let connector: PostgresConnector
    let origin: String
    private let logger = Logger(label: "lamina.storage.listen")
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var link: (any PostgresListenLink)?
    private var stopped = false
    private var started = false
    private var failure: String? = "not connected yet"
    /// The listening thread is running.
    private var running = false
    /// Who drains each outbox here, and the leases this connection holds.
    private var observers: [OutboxLease: OutboxObserver] = [:]
    private var held: Set<OutboxLease> = []
    /// Observers added since the connection last went through its (re)connect steps.
    private var fresh: Set<OutboxLease> = []
    /// The server process of the listening connection (for tests that end it).
    var backendPID: Int64? {
        condition.lock()
        defer { condition.unlock() }
        return listeningPID
    }
    private var listeningPID: Int64?
    /// Orders presence registrations and removals (see `setPresence`).
    private let presenceLock = NSRecursiveLock()
    /// Set to look again at once (a lease was released, an observer added, the connection closed).
    private var poke = false

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
        let thread = Thread { [self] in
            StorageThreadName.nameCurrentThread(StorageThreadName.listener)
            run(handlers)
        }
        thread.start()
    }

    /// Sends an ephemeral event to the other nodes (dropped when not connected: it is not stored).
    func sendEphemeral(_ body: String) {
        let payload = "\(origin)\n\(body)"
        guard payload.utf8.count <= NotificationChannel.maxPayloadBytes else { return }
        condition.lock()
        let link = link
        condition.unlock()
        guard let link, !link.isClosed else { return }
        link.send("SELECT pg_notify('\(NotificationChannel.ephemeral)', $1)", [.text(payload)], completion: nil)
        connector.counters.update { $0.ephemeralNotificationsSent += 1 }
    }

    /// Lets `observer` drain `lease`'s outbox when this node holds the lease (tried now, and
    /// every `OutboxLease.retryInterval` while another node holds it).
    func observe(_ lease: OutboxLease, _ observer: OutboxObserver) {
        condition.lock()
        observers[lease] = observer
        fresh.insert(lease)
        poke = true
        condition.broadcast()
        condition.unlock()
    }

    /// Whether this node holds `lease` now.
    func holds(_ lease: OutboxLease) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return held.contains(lease)
    }

    /// Tells the lease holder that rows were queued in `lease`'s outbox (dropped when not
    /// connected: the holder's idle poll finds them).
    func wakeOutbox(_ lease: OutboxLease) {
        condition.lock()
        let link = link
        condition.unlock()
        guard let link, !link.isClosed else { return }
        link.send(
            "SELECT pg_notify('\(NotificationChannel.outbox)', $1)", [.text("\(origin)\n\(lease.rawValue) queued")],
            completion: nil)
        connector.counters.update { $0.outboxWakesSent += 1 }
    }

    /// Registers (`live`) or removes devices with a live session here in `live_devices`, on
    /// the listening connection (rows keyed by its server process: they count only while it
    /// lives). Not waited for; dropped while disconnected (each (re)connect registers every
    /// live session again). `stillLive` is asked under the presence lock, so a removal is never
    /// overtaken by a re-registration of a snapshot taken before it.
    func setPresence(
        _ devices: [(user: UserID, device: String)], live: Bool, stillLive: (@Sendable (UserID, String) -> Bool)? = nil
    ) {
        presenceLock.lock()
        defer { presenceLock.unlock() }
        let chosen = stillLive.map { check in devices.filter { !check($0.user, $0.device) } } ?? devices
        guard !chosen.isEmpty else { return }
        condition.lock()
        let link = link
        condition.unlock()
        guard let link, !link.isClosed else { return }
        let sql =
            live
            ? """
            INSERT INTO live_devices (user_id, device_id, backend_pid, backend_start)
                SELECT t.u, t.d, a.pid, a.backend_start FROM unnest($1::text[], $2::text[]) AS t(u, d), pg_stat_activity a
                WHERE a.pid = pg_backend_pid() ON CONFLICT DO NOTHING
            """
            : """
            DELETE FROM live_devices WHERE backend_pid = pg_backend_pid()
                AND (user_id, device_id) IN (SELECT t.u, t.d FROM unnest($1::text[], $2::text[]) AS t(u, d))
            """
        for start in stride(from: 0, to: chosen.count, by: Self.presenceBatch) {
            let batch = chosen[start..<min(start + Self.presenceBatch, chosen.count)]
            link.send(sql, [.texts(batch.map(\.user.rawValue)), .texts(batch.map(\.device))]) { [logger] error in
                guard let error else { return }
                logger.debug("presence not recorded", metadata: ["error": "\(error.reason)"])
            }
        }
    }

    /// Presence rows per statement at most.
    static let presenceBatch = 1_000

    /// Every live session here, registered again (after a (re)connect): `snapshot` is taken
    /// under the presence lock.
    func registerPresence(_ snapshot: @Sendable () -> [(user: UserID, device: String)]) {
        presenceLock.lock()
        defer { presenceLock.unlock() }
        setPresence(snapshot(), live: true)
    }

    /// Stops listening. Never blocks (a store may be let go on an event loop): the connection
    /// is closed without waiting, and the listening thread ends when it sees it closed.
    func stop() {
        condition.lock()
        stopped = true
        let current = link
        let released = held
        let told = released.compactMap { observers[$0] }
        held = []
        condition.broadcast()
        condition.unlock()
        for observer in told { observer.held(false) }
        guard let current else { return }
        guard !released.isEmpty, !current.isClosed else {
            current.close()
            return
        }
        // The leases go with the connection; unlocked and announced first, so another node
        // takes them at once instead of at its next retry.
        current.send(
            "SELECT pg_advisory_unlock_all(), pg_notify('\(NotificationChannel.outbox)', $1)",
            [.text("\(origin)\n\(released.map(\.rawValue).sorted().joined(separator: ",")) released")]
        ) { _ in current.close() }
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
            let opened: any PostgresListenLink
            do throws(StorageError) {
                opened = try connector.listenLink()
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
                opened.close()
                return
            }
            link = opened
            condition.unlock()
            let origin = origin
            let counters = connector.counters
            let channels = [
                NotificationChannel.feed, NotificationChannel.ephemeral, NotificationChannel.webhooks,
                NotificationChannel.outbox,
            ]
            opened.listen(channels) { [weak self] channel, payload in
                switch channel {
                case NotificationChannel.feed:
                    // Its own (most of them on a busy node) are skipped before anything is decoded.
                    guard payload.prefix(while: { $0 != "\n" }) != origin,
                        let (_, notification) = FeedPayloads.decode(payload)
                    else { return }
                    let lag = notification.sentAtMicroseconds.map {
                        Int64(Date().timeIntervalSince1970 * 1_000_000) - $0
                    }
                    counters.update {
                        $0.feedNotificationsReceived += 1
                        $0.feedEntriesReceived += notification.entries.count
                        $0.feedHeadsReceived += notification.heads.count
                        if let lag, lag >= 0 {
                            $0.feedNotificationLagMicroseconds += Int(lag)
                            $0.feedNotificationsTimed += 1
                        }
                    }
                    if let entries = handlers.entries {
                        entries(notification)
                    } else {
                        handlers.feeds(notification.highest)
                    }
                case NotificationChannel.ephemeral:
                    guard let newline = payload.firstIndex(of: "\n"), payload[..<newline] != origin else {
                        return
                    }
                    counters.update { $0.ephemeralNotificationsReceived += 1 }
                    handlers.ephemeral(String(payload[payload.index(after: newline)...]))
                case NotificationChannel.webhooks:
                    counters.update { $0.webhookChangesReceived += 1 }
                    self?.subscriptionsChanged()
                case NotificationChannel.outbox:
                    guard let self else { return }
                    let lines = payload.split(separator: "\n", maxSplits: 1)
                    guard lines.count == 2, lines[0] != origin else { return }
                    let words = lines[1].split(separator: " ")
                    guard words.count == 2 else { return }
                    let leases = words[0].split(separator: ",").compactMap { OutboxLease(rawValue: String($0)) }
                    if words[1] == "queued" {
                        counters.update { $0.outboxWakesReceived += 1 }
                        for lease in leases where self.holds(lease) { self.observer(lease)?.wake() }
                    } else {
                        self.pokeLeases()
                    }
                default:
                    break
                }
            }
            opened.onClose { [weak self] in self?.pokeLeases() }
            // Statements on a connection run in order: once this returns, the LISTENs did.
            do throws(StorageError) {
                let pid = try opened.int64("SELECT CAST(pg_backend_pid() AS BIGINT)", [])
                condition.lock()
                listeningPID = pid
                condition.unlock()
            } catch {
                condition.lock()
                failure = error.reason
                link = nil
                condition.unlock()
                opened.close()
                opened.waitUntilClosed()
                continue
            }
            condition.lock()
            failure = nil
            condition.unlock()
            // Rows of listening connections that are gone (a node killed, or this one's previous
            // connection) are let go; this node's sessions are registered again by `connected`.
            _ = try? opened.int64(
                """
                DELETE FROM live_devices l WHERE NOT EXISTS
                    (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.backend_pid AND a.backend_start = l.backend_start)
                """, [])
            counters.update { $0.listenerConnects += 1 }
            handlers.connected()
            // Every observer reads the subscriptions once now; one added later, once when added.
            condition.lock()
            fresh = []
            let reloads = observers.values.compactMap(\.subscriptionsChanged)
            condition.unlock()
            for reload in reloads { reload() }
            holdLeases(on: opened)
            // Closed, or closing (`stop` closes it after letting its leases go).
            opened.waitUntilClosed()
            condition.lock()
            link = nil
            let lost = held
            held = []
            condition.unlock()
            for lease in lost { observer(lease)?.held(false) }
            condition.lock()
            if !stopped {
                failure = "the listening connection to PostgreSQL closed"
                logger.warning("PostgreSQL listening connection lost; reconnecting")
            }
            condition.unlock()
        }
    }

    private func observer(_ lease: OutboxLease) -> OutboxObserver? {
        condition.lock()
        defer { condition.unlock() }
        return observers[lease]
    }

    private func pokeLeases() {
        condition.lock()
        poke = true
        condition.broadcast()
        condition.unlock()
    }

    /// Every observer that follows the webhook subscriptions reads them again.
    private func subscriptionsChanged() {
        condition.lock()
        let all = observers.values.compactMap(\.subscriptionsChanged)
        condition.unlock()
        for reload in all { reload() }
    }

    /// While `opened` is up: tries to take the leases this node does not hold (at once, then
    /// every `OutboxLease.retryInterval` or when poked); returns when the connection closed
    /// or the listener stopped. The leases are then lost (the caller tells the observers).
    private func holdLeases(on opened: any PostgresListenLink) {
        while true {
            condition.lock()
            if stopped || opened.isClosed {
                condition.unlock()
                return
            }
            let wanted = Set(observers.keys).subtracting(held)
            let added = fresh
            fresh = []
            poke = false
            let reloads = added.compactMap { observers[$0]?.subscriptionsChanged }
            condition.unlock()
            for reload in reloads { reload() }
            for lease in wanted.sorted(by: { $0.key < $1.key }) {
                let taken: Bool
                do throws(StorageError) {
                    taken =
                        try opened.int64(
                            "SELECT CASE WHEN pg_try_advisory_lock($1) THEN 1 ELSE 0 END", [.bigint(lease.key)]) == 1
                } catch {
                    break  // the connection failed: the loop sees it closed
                }
                guard taken else { continue }
                condition.lock()
                let keep = !stopped
                if keep { held.insert(lease) }
                let observer = observers[lease]
                condition.unlock()
                guard keep else { return }
                connector.counters.update { $0.leasesTaken += 1 }
                logger.info("outbox lease taken: this node drains it", metadata: ["outbox": "\(lease.rawValue)"])
                observer?.held(true)
            }
            condition.lock()
            let deadline = Date().addingTimeInterval(OutboxLease.retryInterval.seconds)
            while !poke, !stopped, !opened.isClosed, condition.wait(until: deadline) {}
            condition.unlock()
        }
    }
}
