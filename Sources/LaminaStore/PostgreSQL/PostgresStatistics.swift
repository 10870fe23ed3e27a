import Foundation
import NIOConcurrencyHelpers

/// Counters of one PostgreSQL store's connections, for `/metrics`: statements and their
/// time, the read pool's use and waits, notifications sent and received. Thread-safe.
package struct PostgresStatistics: Sendable {
    /// Statements run (every connection) and their total time, in microseconds.
    package var statements = 0
    package var statementMicroseconds = 0
    /// The slowest statement since the last `/metrics` sample, in microseconds.
    package var slowestStatementMicroseconds = 0
    /// Read connections checked out now, and the pool's size.
    package var readersInUse = 0
    package var readerPoolSize = 0
    /// Reads that waited for a free read connection, and their total wait, in microseconds.
    package var poolWaits = 0
    package var poolWaitMicroseconds = 0
    /// `lamina_feed` notifications sent (one per payload; a group sends one or a few) and
    /// received from other nodes; ephemeral notifications sent and received.
    package var feedNotificationsSent = 0
    package var feedNotificationsReceived = 0
    /// Entries received in those notifications (delivered from them where a session is caught
    /// up), and head lines received (feeds read).
    package var feedEntriesReceived = 0
    package var feedHeadsReceived = 0
    /// The time from the sending writer's announcement (just before its COMMIT) to this
    /// node's receipt, summed over the notifications that carried it, in microseconds (same
    /// clock only: nodes on one host, or synchronised clocks).
    package var feedNotificationLagMicroseconds = 0
    package var feedNotificationsTimed = 0
    package var ephemeralNotificationsSent = 0
    package var ephemeralNotificationsReceived = 0
    /// Times the listening connection was (re)established.
    package var listenerConnects = 0
    /// `lamina_webhooks` notifications received (own included: each reloads the subscriptions).
    package var webhookChangesReceived = 0
    /// Outbox wake-ups sent to the lease holder, and received by it.
    package var outboxWakesSent = 0
    package var outboxWakesReceived = 0
    /// Outbox leases this node took (each a takeover of that outbox's delivery).
    package var leasesTaken = 0
}

/// The shared, locked `PostgresStatistics` of a store.
final class PostgresCounters: Sendable {
    private let value = NIOLockedValueBox(PostgresStatistics())

    func update(_ body: (inout PostgresStatistics) -> Void) {
        value.withLockedValue { body(&$0) }
    }

    /// The statistics now; `resettingSlowest` starts the next "slowest statement" window.
    func snapshot(resettingSlowest: Bool = false) -> PostgresStatistics {
        value.withLockedValue { value in
            let now = value
            if resettingSlowest { value.slowestStatementMicroseconds = 0 }
            return now
        }
    }

    func statement(took elapsed: Duration) {
        let micros =
            Int(elapsed.components.seconds) * 1_000_000 + Int(elapsed.components.attoseconds / 1_000_000_000_000)
        value.withLockedValue { value in
            value.statements += 1
            value.statementMicroseconds += micros
            if micros > value.slowestStatementMicroseconds { value.slowestStatementMicroseconds = micros }
        }
    }
}
