import Foundation
import LaminaModel
import LaminaWire

/// A device's push token as stored.
package struct StoredPushToken: Sendable, Hashable {
    package var user: UserID
    /// The device id (lowercase UUID text, as sessions keep it).
    package var device: String
    package var token: PushToken
    package var updatedAt: Timestamp
}

/// One queued push (a row of the push outbox): where it goes and what it says.
package struct QueuedPush: Sendable, Hashable {
    /// Commit order.
    package var seq: Int64
    package var user: UserID
    package var device: String
    package var token: PushToken
    package var message: MessageID
    /// The provider-neutral notification (the node's `PushNotification` as JSON).
    package var payload: Data
    package var createdAt: Timestamp
    /// Dropped, undelivered, after this.
    package var expiresAt: Timestamp
    package var attempts: Int
    package var nextAttemptAt: Timestamp

    package init(
        seq: Int64, user: UserID, device: String, token: PushToken, message: MessageID, payload: Data,
        createdAt: Timestamp,
        expiresAt: Timestamp, attempts: Int, nextAttemptAt: Timestamp
    ) {
        self.seq = seq
        self.user = user
        self.device = device
        self.token = token
        self.message = message
        self.payload = payload
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
    }
}

extension StorageTransaction {
    /// Sets (or, with nil, removes) the push token of `user`'s `device`. A token is held by one
    /// device: another device's registration of the same token (an app reinstalled, another
    /// user signed in on the phone) is removed.
    package func setPushToken(_ token: PushToken?, user: UserID, device: String, at time: Timestamp)
        throws(StorageError)
    {
        try db.run("DELETE FROM push_tokens WHERE user_id = ? AND device = ?", [user.rawValue, device])
        guard let token else { return }
        let (topic, environment) = Self.apnsColumns(token)
        try db.run(
            "DELETE FROM push_tokens WHERE kind = ? AND token = ?", [Int64(token.kind.rawValue), token.tokenText])
        try db.run(
            "INSERT INTO push_tokens (user_id, device, kind, token, topic, environment, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                user.rawValue, device, Int64(token.kind.rawValue), token.tokenText, topic, environment,
                time.millisecondsSince1970,
            ])
    }

    /// Removes a token the provider refused for good (unregistered, bad token), wherever it is
    /// registered; whether one was.
    @discardableResult
    package func removePushToken(_ token: PushToken) throws(StorageError) -> Bool {
        try db.run(
            "DELETE FROM push_tokens WHERE kind = ? AND token = ?", [Int64(token.kind.rawValue), token.tokenText])
        return db.changesCount > 0
    }

    /// Queues one push; a second push of the same message to the same device is ignored
    /// (one push per message per device).
    @discardableResult
    package func enqueuePush(_ push: QueuedPush) throws(StorageError) -> Bool {
        let (topic, environment) = Self.apnsColumns(push.token)
        try db.run(
            """
            INSERT OR IGNORE INTO push_queue (kind, user_id, device, token, topic, environment, message_id, payload, created_at,
                expires_at, next_attempt_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                Int64(push.token.kind.rawValue), push.user.rawValue, push.device, push.token.tokenText, topic,
                environment,
                Columns.blob(push.message.uuid), push.payload, push.createdAt.millisecondsSince1970,
                push.expiresAt.millisecondsSince1970,
                push.nextAttemptAt.millisecondsSince1970,
            ])
        return db.changesCount == 1
    }

    /// Removes a delivered, refused or expired push.
    package func removePush(_ seq: Int64) throws(StorageError) {
        try db.run("DELETE FROM push_queue WHERE seq = ?", [seq])
    }

    /// Removes delivered, refused or expired pushes, in one statement.
    package func removePushes(_ seqs: [Int64]) throws(StorageError) {
        guard !seqs.isEmpty else { return }
        guard seqs.count > 1 else { return try removePush(seqs[0]) }
        try db.run(
            "DELETE FROM push_queue WHERE seq IN (\(db.dialect.jsonIntegers))",
            ["[" + seqs.map(String.init).joined(separator: ",") + "]"])
    }

    /// Records a failed attempt and when to try again.
    package func reschedulePush(_ seq: Int64, attempts: Int, next: Timestamp) throws(StorageError) {
        try db.run(
            "UPDATE push_queue SET attempts = ?, next_attempt_at = ? WHERE seq = ?",
            [attempts, next.millisecondsSince1970, seq])
    }

    private static func apnsColumns(_ token: PushToken) -> (String?, Int64?) {
        if case .apns(_, let topic, let environment) = token { return (topic, Int64(environment.rawValue)) }
        return (nil, nil)
    }
}

extension StorageReader {
    /// The push tokens of `user`'s devices.
    package func pushTokens(of user: UserID) throws(StorageError) -> [StoredPushToken] {
        try db.rows("SELECT * FROM push_tokens WHERE user_id = ? ORDER BY device", [user.rawValue]).map {
            row throws(StorageError) in
            StoredPushToken(
                user: user, device: row["device"], token: try Self.pushToken(row),
                updatedAt: try Columns.timestamp(row, "updated_at"))
        }
    }

    /// The push tokens of the devices of `users` (one read for a message's recipients).
    package func pushTokens(of users: [UserID]) throws(StorageError) -> [StoredPushToken] {
        guard !users.isEmpty else { return [] }
        var out: [StoredPushToken] = []
        // SQLite's default bound on host parameters is 32,766; a conversation has at most 250 participants.
        for chunk in stride(from: 0, to: users.count, by: 500).map({ Array(users[$0..<min($0 + 500, users.count)]) }) {
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
            let rows = try db.rows(
                "SELECT * FROM push_tokens WHERE user_id IN (\(marks)) ORDER BY user_id, device",
                StatementArguments(chunk.map(\.rawValue)))
            for row in rows {
                out.append(
                    StoredPushToken(
                        user: try Columns.user(row, "user_id"), device: row["device"], token: try Self.pushToken(row),
                        updatedAt: try Columns.timestamp(row, "updated_at")))
            }
        }
        return out
    }

    /// Several nodes (PostgreSQL): the devices of `users` with a live session on some node (as
    /// each node's listening connection registered them; a dead node's rows do not count).
    /// Empty on SQLite (one node: its sessions are known without a read).
    package func devicesLiveOnAnyNode(of users: [UserID]) throws(StorageError) -> [UserID: Set<String>] {
        guard db.dialect == .postgres, !users.isEmpty else { return [:] }
        var out: [UserID: Set<String>] = [:]
        for chunk in stride(from: 0, to: users.count, by: 500).map({ Array(users[$0..<min($0 + 500, users.count)]) }) {
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
            let rows = try db.rows(
                """
                SELECT user_id, device_id FROM live_devices WHERE user_id IN (\(marks))
                    AND (backend_pid, backend_start) IN (SELECT pid, backend_start FROM pg_stat_activity)
                """, StatementArguments(chunk.map(\.rawValue)))
            for row in rows { out[try Columns.user(row, "user_id"), default: []].insert(row["device_id"]) }
        }
        return out
    }

    /// Up to `limit` pushes of a provider due at `now`, the earliest due first.
    package func duePushes(_ kind: PushToken.Kind, at now: Timestamp, limit: Int) throws(StorageError) -> [QueuedPush] {
        try checkLimit(limit)
        return try db.rows(
            "SELECT * FROM push_queue WHERE kind = ? AND next_attempt_at <= ? ORDER BY next_attempt_at, seq LIMIT ?",
            [Int64(kind.rawValue), now.millisecondsSince1970, limit]
        ).map(Self.queuedPush)
    }

    /// Up to `limit` pushes of a provider due at `now`, the earliest due first, but none of
    /// `excluding` (the delivery's pushes in flight: still queued until their outcome is recorded).
    package func duePushes(_ kind: PushToken.Kind, at now: Timestamp, limit: Int, excluding: Set<Int64>)
        throws(StorageError) -> [QueuedPush]
    {
        guard !excluding.isEmpty else { return try duePushes(kind, at: now, limit: limit) }
        try checkLimit(limit)
        // One statement whatever the count (a JSON array of the seqs, read by json_each).
        let held = "[" + excluding.sorted().map(String.init).joined(separator: ",") + "]"
        return try db.rows(
            """
            SELECT * FROM push_queue WHERE kind = ? AND next_attempt_at <= ? AND seq NOT IN (\(db.dialect.jsonIntegers))
            ORDER BY next_attempt_at, seq LIMIT ?
            """,
            [Int64(kind.rawValue), now.millisecondsSince1970, held, limit]
        ).map(Self.queuedPush)
    }

    /// When the next push of a provider is due (nil: none queued).
    package func nextPushAttempt(_ kind: PushToken.Kind) throws(StorageError) -> Timestamp? {
        try db.int64("SELECT min(next_attempt_at) FROM push_queue WHERE kind = ?", [Int64(kind.rawValue)]).map(
            Timestamp.init(millisecondsSince1970:))
    }

    /// Queued pushes of one provider.
    package func pushQueueDepth(_ kind: PushToken.Kind) throws(StorageError) -> Int {
        Int(try db.int64("SELECT count(*) FROM push_queue WHERE kind = ?", [Int64(kind.rawValue)]) ?? 0)
    }

    /// Queued pushes per provider.
    package func pushQueueDepths() throws(StorageError) -> [PushToken.Kind: Int] {
        var out: [PushToken.Kind: Int] = [:]
        for row in try db.rows("SELECT kind, count(*) AS n FROM push_queue GROUP BY kind") {
            let kind: Int64 = row["kind"]
            let n: Int64 = row["n"]
            if let k = PushToken.Kind(rawValue: UInt8(clamping: kind)) { out[k] = Int(n) }
        }
        return out
    }

    /// Every queued push of a message (tests and diagnostics).
    package func queuedPushes(of message: MessageID) throws(StorageError) -> [QueuedPush] {
        try db.rows("SELECT * FROM push_queue WHERE message_id = ? ORDER BY seq", [Columns.blob(message.uuid)]).map(
            Self.queuedPush)
    }

    private static func queuedPush(_ row: Row) throws(StorageError) -> QueuedPush {
        let attempts: Int64 = row["attempts"]
        return QueuedPush(
            seq: row["seq"], user: try Columns.user(row, "user_id"), device: row["device"], token: try pushToken(row),
            message: MessageID(uuid: try Columns.uuid(row["message_id"], column: "message_id")),
            payload: row["payload"],
            createdAt: try Columns.timestamp(row, "created_at"), expiresAt: try Columns.timestamp(row, "expires_at"),
            attempts: Int(attempts), nextAttemptAt: try Columns.timestamp(row, "next_attempt_at"))
    }

    private static func pushToken(_ row: Row) throws(StorageError) -> PushToken {
        let kind: Int64 = row["kind"]
        let text: String = row["token"]
        switch PushToken.Kind(rawValue: UInt8(clamping: kind)) {
        case .apns?:
            let rawEnvironment: Int64 = row["environment"] ?? 0
            guard let bytes = Hex.decode(text),
                let environment = APNsEnvironment(rawValue: UInt8(clamping: rawEnvironment))
            else {
                throw StorageError(.corrupt, "a stored APNs token does not decode")
            }
            return .apns(token: bytes, topic: row["topic"] ?? "", environment: environment)
        case .fcm?: return .fcm(token: text)
        case .gateway?: return .gateway(token: text)
        case nil: throw StorageError(.corrupt, "push token kind \(kind) is unknown")
        }
    }
}
