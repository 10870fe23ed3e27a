import LaminaStore
import LaminaTransport
import NIOConcurrencyHelpers
import Prometheus

/// Metrics read from counters the transport and the store keep themselves (connections,
/// storage errors, descriptors), copied into the registry each time `/metrics` is rendered.
final class NodeMetricsSampler: Sendable {
    private let store: NodeStore
    private let transport: TransportServer
    private let budget: NodeOutboundBudget
    private let outboundQueued: Gauge
    private let answers: AnswerBudget
    private let answerBytesHeld: Gauge
    private let answerBytesPeak: Gauge
    private let answersWaiting: Gauge
    private let outboundBudgetResets: Counter
    private let connectionsOpen: Gauge
    private let descriptorsOpen: Gauge
    private let connectionsRefused: Counter
    private let connectionsClosedIdle: Counter
    private let connectionsClosedForFlood: Counter
    private let connectionsClosedStalled: Counter
    private let acceptsFailed: Counter
    private let storageErrors: Counter
    private let storageCommitFailures: Counter
    private let storageCommandsRefused: Counter
    private let storageTransactions: Counter
    private let storageCommandsCommitted: Counter
    private let storageInlineCommits: Counter
    /// ``TransportOutputCounters`` (every connection of the process).
    private let socketWrites: Counter
    private let tlsRecords: Counter
    private let http2Frames: Counter
    private let connectionFlushes: Counter
    /// The counters' values at the last sample (the registry's counters only go up).
    private let last = NIOLockedValueBox([Int](repeating: 0, count: 16))
    /// PostgreSQL only (nil on SQLite).
    private let postgres: PostgresMetrics?

    init(
        registry: PrometheusCollectorRegistry, store: NodeStore, transport: TransportServer, budget: NodeOutboundBudget,
        answers: AnswerBudget
    ) {
        self.answers = answers
        answerBytesHeld = registry.makeGauge(
            descriptor: .init(
                namespace: "lamina", metricName: "answer_held", unitName: "bytes",
                helpText: "Bytes of large answers' pages in flight (the node's answer budget counts these)"))
        answerBytesPeak = registry.makeGauge(
            descriptor: .init(
                namespace: "lamina", metricName: "answer_peak", unitName: "bytes",
                helpText: "The most bytes of large answers' pages in flight at once since the start"))
        answersWaiting = registry.makeGauge(
            descriptor: .init(
                namespace: "lamina", metricName: "answers_waiting", unitName: "streams",
                helpText: "Large answers waiting for room in the node's answer budget"))
        self.store = store
        self.transport = transport
        self.budget = budget
        outboundQueued = registry.makeGauge(
            descriptor: .init(
                namespace: "lamina", metricName: "outbound_queued", unitName: "bytes",
                helpText: "Bytes queued for clients over every sync stream (the node's outbound budget counts these)"))
        outboundBudgetResets = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "outbound_budget_resets", unitName: "total",
                helpText: "Streams reset for holding more than their share while the node was over its outbound budget")
        )
        connectionsOpen = registry.makeGauge(
            descriptor: .init(
                namespace: "lamina", metricName: "connections", unitName: "open",
                helpText: "TLS connections open (handshaking included)"))
        descriptorsOpen = registry.makeGauge(
            descriptor: .init(
                namespace: "lamina", metricName: "file_descriptors", unitName: "open",
                helpText: "File descriptors the node has open"))
        connectionsRefused = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "connections_refused", unitName: "total",
                helpText: "Connections closed at once because maxConnections were open"))
        connectionsClosedIdle = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "connections_closed_idle", unitName: "total",
                helpText: "Connections closed after the idle timeout without a stream"))
        connectionsClosedForFlood = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "connections_closed_flood", unitName: "total",
                helpText: "Connections ended with GOAWAY ENHANCE_YOUR_CALM for a frame flood"))
        connectionsClosedStalled = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "connections_closed_stalled", unitName: "total",
                helpText: "Connections closed because the client read nothing for the stalled-connection timeout"))
        acceptsFailed = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "connections_accept_failed", unitName: "total",
                helpText: "Accepts that failed (no file descriptor left or another socket error), each also logged"))
        storageErrors = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "storage_errors", unitName: "total",
                helpText: "Errors SQLite reported (disk full, I/O, damage), each also logged"))
        storageCommitFailures = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "storage_commit_failures", unitName: "total",
                helpText: "Group commits whose transaction failed"))
        storageCommandsRefused = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "storage_commands_refused", unitName: "total",
                helpText: "Commands refused because the write queue was full"))
        storageTransactions = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "storage_transactions", unitName: "total",
                helpText:
                    "Group commits (each one synced transaction); commands_committed over this is the mean group size"))
        storageCommandsCommitted = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "storage_commands_committed", unitName: "total",
                helpText: "Commands whose effects were committed"))
        storageInlineCommits = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "storage_inline_commits", unitName: "total",
                helpText: "Group commits an event loop ran itself at a low rate (part of storage_transactions)"))
        socketWrites = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "transport_socket_writes", unitName: "total",
                helpText:
                    "Ciphertext buffers written to sockets (one write system call each unless a socket takes one in parts)"
            ))
        tlsRecords = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "transport_tls_records", unitName: "total",
                helpText: "TLS application-data records written"))
        http2Frames = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "transport_http2_frames", unitName: "total",
                helpText: "HTTP/2 frames written"))
        connectionFlushes = registry.makeCounter(
            descriptor: .init(
                namespace: "lamina", metricName: "transport_connection_flushes", unitName: "total",
                helpText: "HTTP/2 connection flushes that wrote (each one TLS write of the frames gathered)"))
        postgres = store.postgresStatistics == nil ? nil : PostgresMetrics(registry: registry)
    }

    /// Copies the current values into the registry.
    func sample() {
        let counts = transport.counts
        let storage = store.writerStatistics
        let output = TransportOutputCounters.snapshot
        let now = [
            counts.refused, counts.closedIdle, counts.closedForFlood, counts.closedStalled,
            storage.databaseErrors, storage.failedCommits, storage.refusedCommands, budget.resets, counts.acceptFailed,
            storage.transactions, storage.committedCommands, output.socketWrites, output.tlsRecords, output.http2Frames,
            output.connectionFlushes, storage.inlineCommits,
        ]
        let counters = [
            connectionsRefused, connectionsClosedIdle, connectionsClosedForFlood, connectionsClosedStalled,
            storageErrors, storageCommitFailures, storageCommandsRefused, outboundBudgetResets, acceptsFailed,
            storageTransactions, storageCommandsCommitted, socketWrites, tlsRecords, http2Frames, connectionFlushes,
            storageInlineCommits,
        ]
        last.withLockedValue { last in
            for i in now.indices where now[i] > last[i] {
                counters[i].increment(by: Int64(now[i] - last[i]))
                last[i] = now[i]
            }
        }
        connectionsOpen.set(Int64(transport.connectionCount))
        outboundQueued.set(Int64(budget.total))
        answerBytesHeld.set(Int64(answers.held))
        answerBytesPeak.set(Int64(answers.peak))
        answersWaiting.set(Int64(answers.waiting))
        if let open = NodeHealth.openDescriptors() { descriptorsOpen.set(Int64(open)) }
        if let postgres, let statistics = store.samplePostgresStatistics() {
            postgres.sample(
                statistics, listening: store.databaseUnavailableReason == nil, leases: store.heldOutboxLeases)
        }
    }
}

/// The PostgreSQL store's metrics: read pool use and waits, statements and their time, and
/// the notifications that carry commits (and typing) between nodes.
final class PostgresMetrics: Sendable {
    private let readersInUse: Gauge
    private let readerPoolSize: Gauge
    private let slowestStatement: Gauge
    private let databaseReady: Gauge
    private let leases: [OutboxLease: Gauge]
    /// In the order of `values(_:)`.
    private let counters: [Counter]
    private let last = NIOLockedValueBox([Int](repeating: 0, count: 17))

    init(registry: PrometheusCollectorRegistry) {
        func gauge(_ name: String, _ unit: String, _ help: String) -> Gauge {
            registry.makeGauge(descriptor: .init(namespace: "lamina", metricName: name, unitName: unit, helpText: help))
        }
        func counter(_ name: String, _ help: String) -> Counter {
            registry.makeCounter(
                descriptor: .init(namespace: "lamina", metricName: name, unitName: "total", helpText: help))
        }
        readersInUse = gauge("postgres_pool_in_use", "connections", "PostgreSQL read connections checked out now")
        readerPoolSize = gauge("postgres_pool_size", "connections", "PostgreSQL read connections at most")
        slowestStatement = gauge(
            "postgres_statement_slowest", "microseconds", "The slowest PostgreSQL statement since the previous scrape")
        databaseReady = gauge(
            "postgres_listening", "connected", "1 while the connection listening for other nodes' commits is up")
        leases = Dictionary(
            uniqueKeysWithValues: OutboxLease.allCases.map { lease in
                (
                    lease,
                    registry.makeGauge(
                        descriptor: .init(
                            namespace: "lamina", metricName: "postgres_outbox_lease", unitName: "held",
                            helpText:
                                "1 while this node holds the outbox's lease (it alone delivers that outbox's events)"),
                        labels: [("outbox", lease.rawValue)])
                )
            })
        counters = [
            counter("postgres_statements", "PostgreSQL statements run (every connection)"),
            counter(
                "postgres_statement_microseconds",
                "Time spent in PostgreSQL statements, in microseconds (divide by postgres_statements_total for the mean latency)"
            ),
            counter("postgres_pool_waits", "Reads that waited for a free PostgreSQL read connection"),
            counter(
                "postgres_pool_wait_microseconds", "Time reads waited for a PostgreSQL read connection, in microseconds"
            ),
            counter(
                "postgres_feed_notifications_sent", "lamina_feed notifications sent (feed heads of committed groups)"),
            counter("postgres_feed_notifications_received", "lamina_feed notifications received from other nodes"),
            counter("postgres_ephemeral_notifications_sent", "Ephemeral (typing) notifications sent to other nodes"),
            counter(
                "postgres_ephemeral_notifications_received",
                "Ephemeral (typing) notifications received from other nodes"),
            counter(
                "postgres_listener_connects",
                "Times the listening connection was (re)established (each followed by a catch-up read of every live session)"
            ),
            counter(
                "postgres_webhook_changes_received",
                "lamina_webhooks notifications received (each reloads the webhook subscriptions)"),
            counter(
                "postgres_outbox_wakes_sent",
                "Wake-ups sent to the node holding an outbox's lease after commits that queued events"),
            counter(
                "postgres_outbox_wakes_received", "Wake-ups received from other nodes while holding an outbox's lease"),
            counter("postgres_outbox_leases_taken", "Times this node took an outbox's lease (started delivering it)"),
            counter(
                "postgres_feed_entries_received",
                "Feed entries received in other nodes' lamina_feed notifications (delivered from them when a session is caught up)"
            ),
            counter(
                "postgres_feed_heads_received",
                "Feed heads received in other nodes' lamina_feed notifications without their entries (those feeds are read)"
            ),
            counter(
                "postgres_feed_notification_lag_microseconds",
                "Time from another node's announcement (just before its COMMIT) to its receipt here, in microseconds (divide by postgres_feed_notifications_timed_total)"
            ),
            counter(
                "postgres_feed_notifications_timed", "lamina_feed notifications received that carried their send time"),
        ]
    }

    private static func values(_ s: PostgresStatistics) -> [Int] {
        [
            s.statements, s.statementMicroseconds, s.poolWaits, s.poolWaitMicroseconds, s.feedNotificationsSent,
            s.feedNotificationsReceived, s.ephemeralNotificationsSent, s.ephemeralNotificationsReceived,
            s.listenerConnects,
            s.webhookChangesReceived, s.outboxWakesSent, s.outboxWakesReceived, s.leasesTaken,
            s.feedEntriesReceived, s.feedHeadsReceived, s.feedNotificationLagMicroseconds, s.feedNotificationsTimed,
        ]
    }

    func sample(_ statistics: PostgresStatistics, listening: Bool = true, leases held: Set<OutboxLease> = []) {
        for (lease, gauge) in leases { gauge.set(Int64(held.contains(lease) ? 1 : 0)) }
        let now = Self.values(statistics)
        last.withLockedValue { last in
            for i in now.indices where now[i] > last[i] {
                counters[i].increment(by: Int64(now[i] - last[i]))
                last[i] = now[i]
            }
        }
        readersInUse.set(Int64(statistics.readersInUse))
        readerPoolSize.set(Int64(statistics.readerPoolSize))
        slowestStatement.set(Int64(statistics.slowestStatementMicroseconds))
        databaseReady.set(Int64(listening ? 1 : 0))
    }
}
