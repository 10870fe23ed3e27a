import Foundation
import LaminaModel

/// A webhook as stored: where events go, which ones, the signing secret and the app's
/// `config` (a JSON object added to every payload).
package struct StoredWebhook: Sendable, Hashable {
    /// Layer's three states: created and not yet verified, delivering, stopped.
    package enum Status: Int, Sendable, Hashable {
        case unverified = 0
        case active = 1
        case inactive = 2

        package var name: String {
            switch self {
            case .unverified: "unverified"
            case .active: "active"
            case .inactive: "inactive"
            }
        }
    }

    package var id: UUID
    package var targetURL: String
    package var events: [String]
    package var secret: String
    /// The `config` object as JSON bytes, if one was given.
    package var config: Data?
    package var status: Status
    /// Why the webhook is inactive (the operator's deactivation, or failed deliveries).
    package var statusReason: String?
    package var createdAt: Timestamp
    package var updatedAt: Timestamp

    package init(
        id: UUID, targetURL: String, events: [String], secret: String, config: Data?, status: Status,
        statusReason: String? = nil, createdAt: Timestamp, updatedAt: Timestamp
    ) {
        self.id = id
        self.targetURL = targetURL
        self.events = events
        self.secret = secret
        self.config = config
        self.status = status
        self.statusReason = statusReason
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// One queued webhook event (a row of the outbox).
package struct QueuedWebhookEvent: Sendable, Hashable {
    /// Commit order.
    package var seq: Int64
    package var webhook: UUID
    /// The `layer-webhook-request-id`, the same on every retry.
    package var requestID: UUID
    package var eventType: String
    /// The payload without the webhook's `config` (JSON bytes).
    package var payload: Data
    package var createdAt: Timestamp
    package var attempts: Int
    package var nextAttemptAt: Timestamp
}

extension StorageTransaction {
    /// Inserts a new webhook; refused with `.invalidArgument` when `limit` webhooks exist.
    package func createWebhook(_ webhook: StoredWebhook, limit: Int) throws(StorageError) {
        let count = try db.int64("SELECT count(*) FROM webhooks") ?? 0
        guard count < Int64(limit) else {
            throw StorageError(.invalidArgument, "this node holds its limit of \(limit) webhooks")
        }
        let events: Data
        do { events = try JSONEncoder().encode(webhook.events) } catch {
            throw StorageError(.invalidArgument, "the event list does not encode: \(error)")
        }
        try db.run(
            """
            INSERT INTO webhooks (id, target_url, events, secret, config, status, status_reason, created_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                Columns.blob(webhook.id), webhook.targetURL, String(decoding: events, as: UTF8.self), webhook.secret,
                webhook.config,
                webhook.status.rawValue, webhook.statusReason, webhook.createdAt.millisecondsSince1970,
                webhook.updatedAt.millisecondsSince1970,
            ])
    }

    /// Sets a webhook's status (and the reason, for inactive); whether the webhook exists.
    @discardableResult
    package func setWebhookStatus(_ id: UUID, _ status: StoredWebhook.Status, reason: String?, at time: Timestamp)
        throws(StorageError) -> Bool
    {
        try db.run(
            "UPDATE webhooks SET status = ?, status_reason = ?, updated_at = ? WHERE id = ?",
            [status.rawValue, reason, time.millisecondsSince1970, Columns.blob(id)])
        return db.changesCount == 1
    }

    /// Deletes a webhook and its queued events; whether it existed.
    @discardableResult
    package func deleteWebhook(_ id: UUID) throws(StorageError) -> Bool {
        try db.run("DELETE FROM webhook_queue WHERE webhook_id = ?", [Columns.blob(id)])
        try db.run("DELETE FROM webhooks WHERE id = ?", [Columns.blob(id)])
        return db.changesCount == 1
    }

    /// Several nodes on one database (PostgreSQL): tells every node, at this transaction's
    /// COMMIT, that the webhook subscriptions changed (each reads them again); nothing on SQLite.
    package func announceWebhookChange() throws(StorageError) {
        guard cache.sharedWriters else { return }
        try db.run("SELECT pg_notify('\(NotificationChannel.webhooks)', '')")
    }

    /// Queues one event for each of `webhooks` (the outbox rows of this commit).
    package func enqueueWebhookEvent(_ eventType: String, payload: Data, for webhooks: [UUID], at time: Timestamp)
        throws(StorageError)
    {
        for webhook in webhooks {
            let requestID = UUID()
            try db.run(
                """
                INSERT INTO webhook_queue (webhook_id, request_id, event_type, payload, created_at, next_attempt_at)
                VALUES (?, ?, ?, ?, ?, ?)
                """,
                [
                    Columns.blob(webhook), Columns.blob(requestID), eventType, payload, time.millisecondsSince1970,
                    time.millisecondsSince1970,
                ])
        }
    }

    /// Removes a delivered (or given up) event.
    package func removeWebhookEvent(_ seq: Int64) throws(StorageError) {
        try db.run("DELETE FROM webhook_queue WHERE seq = ?", [seq])
    }

    /// Removes delivered (or given up) events, in one statement.
    package func removeWebhookEvents(_ seqs: [Int64]) throws(StorageError) {
        guard !seqs.isEmpty else { return }
        guard seqs.count > 1 else { return try removeWebhookEvent(seqs[0]) }
        try db.run(
            "DELETE FROM webhook_queue WHERE seq IN (\(db.dialect.jsonIntegers))",
            ["[" + seqs.map(String.init).joined(separator: ",") + "]"])
    }

    /// Records a failed attempt and when to try again.
    package func rescheduleWebhookEvent(_ seq: Int64, attempts: Int, next: Timestamp) throws(StorageError) {
        try db.run(
            "UPDATE webhook_queue SET attempts = ?, next_attempt_at = ? WHERE seq = ?",
            [attempts, next.millisecondsSince1970, seq])
    }

    /// Makes the queued events of a webhook due now (it was activated again).
    package func resetWebhookQueue(_ id: UUID, at time: Timestamp) throws(StorageError) {
        try db.run(
            "UPDATE webhook_queue SET next_attempt_at = ? WHERE webhook_id = ?",
            [time.millisecondsSince1970, Columns.blob(id)])
    }

    /// Calls `body` once the current transaction has ended: true when it committed, false
    /// when it rolled back.
    package func afterTransaction(_ body: @escaping @Sendable (Bool) -> Void) {
        db.afterNextTransaction(onCommit: { _ in body(true) }, onRollback: { _ in body(false) })
    }

    /// Calls `body` once the command writing in this transaction has ended: true when its
    /// writes stand (the group may still roll back: see ``afterTransaction(_:)``), false when
    /// they were rolled back alone (the command failed inside a group that commits the others).
    package func afterCommand(_ body: @escaping (Bool) -> Void) {
        cache.afterCommand(body)
    }
}

extension StorageReader {
    /// Every webhook, oldest first.
    package func webhooks() throws(StorageError) -> [StoredWebhook] {
        try db.rows("SELECT * FROM webhooks ORDER BY created_at, id").map(Self.webhook)
    }

    /// One webhook.
    package func webhook(_ id: UUID) throws(StorageError) -> StoredWebhook? {
        try db.row("SELECT * FROM webhooks WHERE id = ?", [Columns.blob(id)]).map(Self.webhook)
    }

    /// The oldest queued event of a webhook (commit order).
    package func nextWebhookEvent(of webhook: UUID) throws(StorageError) -> QueuedWebhookEvent? {
        try queuedWebhookEvents(of: webhook, limit: 1).first
    }

    /// The oldest `limit` queued events of a webhook, in commit order.
    package func queuedWebhookEvents(of webhook: UUID, limit: Int) throws(StorageError) -> [QueuedWebhookEvent] {
        try checkLimit(limit)
        return try db.rows(
            "SELECT * FROM webhook_queue WHERE webhook_id = ? ORDER BY seq LIMIT ?", [Columns.blob(webhook), limit]
        )
        .map { row throws(StorageError) in try Self.queuedEvent(row, of: webhook) }
    }

    /// The oldest `limit` queued events of a webhook after `seq` (the last one its delivery
    /// started), in commit order.
    package func queuedWebhookEvents(of webhook: UUID, after seq: Int64, limit: Int) throws(StorageError)
        -> [QueuedWebhookEvent]
    {
        try checkLimit(limit)
        return try db.rows(
            "SELECT * FROM webhook_queue WHERE webhook_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            [Columns.blob(webhook), seq, limit]
        ).map { row throws(StorageError) in try Self.queuedEvent(row, of: webhook) }
    }

    private static func queuedEvent(_ row: Row, of webhook: UUID) throws(StorageError) -> QueuedWebhookEvent {
        let attempts: Int64 = row["attempts"]
        return QueuedWebhookEvent(
            seq: row["seq"], webhook: webhook, requestID: try Columns.uuid(row["request_id"], column: "request_id"),
            eventType: row["event_type"], payload: row["payload"],
            createdAt: Timestamp(millisecondsSince1970: row["created_at"]),
            attempts: Int(attempts), nextAttemptAt: Timestamp(millisecondsSince1970: row["next_attempt_at"]))
    }

    /// Queued events per webhook.
    package func webhookQueueDepths() throws(StorageError) -> [UUID: Int] {
        var out: [UUID: Int] = [:]
        for row in try db.rows("SELECT webhook_id, count(*) AS n FROM webhook_queue GROUP BY webhook_id") {
            let n: Int64 = row["n"]
            out[try Columns.uuid(row["webhook_id"], column: "webhook_id")] = Int(n)
        }
        return out
    }

    private static func webhook(_ row: Row) throws(StorageError) -> StoredWebhook {
        let eventsText: String = row["events"]
        let events: [String]
        do { events = try JSONDecoder().decode([String].self, from: Data(eventsText.utf8)) } catch {
            throw StorageError(.corrupt, "a webhook's events do not decode: \(error)")
        }
        let rawStatus: Int64 = row["status"]
        guard let status = StoredWebhook.Status(rawValue: Int(rawStatus)) else {
            throw StorageError(.corrupt, "a webhook's status \(rawStatus) is unknown")
        }
        return StoredWebhook(
            id: try Columns.uuid(row["id"], column: "id"), targetURL: row["target_url"], events: events,
            secret: row["secret"],
            config: row["config"], status: status, statusReason: row["status_reason"],
            createdAt: Timestamp(millisecondsSince1970: row["created_at"]),
            updatedAt: Timestamp(millisecondsSince1970: row["updated_at"]))
    }
}
