import Foundation
import GRDB
import LaminaModel

/// One command waiting to go to the node. Its `id` is chosen by the client (the object's
/// UUID or a request id), so a retry after a lost connection is recognised by the node.
public struct OutboxEntry: Hashable, Sendable {
    public enum State: Int, Hashable, Sendable {
        /// Waiting to be sent.
        case pending = 0
        /// Handed to the connection; waiting for the node's acknowledgement.
        case inFlight = 1
    }

    public var id: UUID
    /// What the command is, in the sync engine's own terms (e.g. `"message.send"`).
    public var kind: String
    /// The object the command is about, if any.
    public var objectID: UUID?
    /// The conversation the command's bytes address (nil for a conversation's creation, whose
    /// id is its own): a flush redirects the command when this one was merged away.
    public var conversationID: UUID?
    /// The encoded command, opaque to the store.
    public var payload: [UInt8]
    public var state: State
    /// How many times it has been handed to a connection.
    public var attempts: Int
    /// Its place in the outbox: commands go out in ascending order. Assigned by the store.
    public var sequence: Int64
    public var createdAt: Timestamp
    /// When enqueued, the pending (not yet sent) entries of the same kind about the same
    /// object are dropped: this one covers them (a delivery receipt up to a later message).
    /// Not stored.
    public var replacesPending = false

    public init(
        id: UUID, kind: String, objectID: UUID? = nil, conversationID: UUID? = nil, payload: [UInt8],
        createdAt: Timestamp = .now()
    ) {
        self.id = id
        self.kind = kind
        self.objectID = objectID
        self.conversationID = conversationID
        self.payload = payload
        self.state = .pending
        self.attempts = 0
        self.sequence = 0
        self.createdAt = createdAt
    }

    /// The longest `kind`, in UTF-8 bytes.
    public static let maxKindBytes = 64
    /// The largest payload: a command carries inline parts only, so a few MB is ample.
    public static let maxPayloadBytes = 8 * 1_024 * 1_024

    func validate() throws(ClientError) {
        guard !kind.isEmpty, kind.utf8.count <= Self.maxKindBytes else {
            throw ClientError(.invalidObject, "an outbox entry's kind is 1...\(Self.maxKindBytes) UTF-8 bytes")
        }
        guard payload.count <= Self.maxPayloadBytes else {
            throw ClientError(
                .invalidObject,
                "an outbox payload is at most \(Self.maxPayloadBytes) bytes, this one has \(payload.count)")
        }
    }
}

/// An outbox entry handed to the session to send, and the conversation to send it to
/// instead when the one its bytes address has been merged away (nil: send the bytes).
struct OutboxSend: Sendable {
    var entry: OutboxEntry
    var redirect: ConversationID?
}

extension WriteContext {
    /// Appends an entry; an entry whose id is already queued is left as it is.
    func enqueue(_ entry: OutboxEntry) throws {
        try entry.validate()
        if entry.replacesPending, let object = entry.objectID {
            try db.execute(
                sql: "DELETE FROM outbox WHERE state = 0 AND kind = ? AND object_id = ? AND id != ?",
                arguments: [entry.kind, StoreCoding.blob(object), StoreCoding.blob(entry.id)])
        }
        try db.execute(
            sql: """
                INSERT INTO outbox(id, kind, object_id, conversation_id, payload, state, attempts, created_at) VALUES (?, ?, ?, ?, ?, 0, 0, ?)
                ON CONFLICT(id) DO NOTHING
                """,
            arguments: [
                StoreCoding.blob(entry.id), entry.kind, entry.objectID.map(StoreCoding.blob),
                entry.conversationID.map(StoreCoding.blob),
                Data(entry.payload), entry.createdAt.millisecondsSince1970,
            ])
    }
}

extension LocalStore {
    /// The most entries one `dequeueOutbox` call hands out.
    public static let maxOutboxBatch = 1_000

    /// Appends a command to the outbox (a no-op when its id is already there).
    public func enqueue(_ entry: OutboxEntry) throws(ClientError) {
        try write { ctx in try ctx.enqueue(entry) }
    }

    /// Hands out up to `limit` pending entries in outbox order, marking them in flight and
    /// counting the attempt. They stay in the outbox until `markSent`. A conversation's
    /// creation does not end the batch: the commands behind it are pipelined (SPEC §6.1).
    ///
    /// An entry about a message whose rich content is not uploaded yet is held back, and so
    /// is every later entry about the same conversation (commands keep their order there),
    /// except the kinds in `overtaking` (receipts, which never depend on the local user's
    /// own messages). Other conversations' commands go on: a large upload holds back only
    /// its own conversation.
    public func dequeueOutbox(limit: Int, overtaking: Set<String> = OutboxCommandKind.overtakingUploads)
        throws(ClientError) -> [OutboxEntry]
    {
        guard (1...Self.maxOutboxBatch).contains(limit) else {
            throw ClientError(.invalidSetting, "an outbox batch is 1...\(Self.maxOutboxBatch) entries, not \(limit)")
        }
        return try write { ctx in try Self.dequeue(limit: limit, overtaking: overtaking, ctx) }
    }

    /// As `dequeueOutbox`, through GRDB's async API, resolving in the same transaction where
    /// each entry's conversation is now: the sync session's flush, one trip to the store per batch.
    /// Nothing is taken once `gate` is closed (the session ended).
    func dequeueOutboxForSendAsync(limit: Int, gate: SendGate) async throws(ClientError) -> [OutboxSend] {
        guard (1...Self.maxOutboxBatch).contains(limit) else {
            throw ClientError(.invalidSetting, "an outbox batch is 1...\(Self.maxOutboxBatch) entries, not \(limit)")
        }
        return try await writeAsync { ctx in
            guard gate.isOpen else { return [] }
            var resolved: [UUID: ConversationID] = [:]
            return try Self.dequeue(limit: limit, overtaking: OutboxCommandKind.overtakingUploads, ctx).map { entry in
                guard let addressed = entry.conversationID else { return OutboxSend(entry: entry, redirect: nil) }
                let now: ConversationID
                if let known = resolved[addressed] {
                    now = known
                } else {
                    now = try StoreReader.resolve(ctx.db, ConversationID(uuid: addressed))
                    resolved[addressed] = now
                }
                return OutboxSend(entry: entry, redirect: now.uuid == addressed ? nil : now)
            }
        }
    }

    private static func dequeue(limit: Int, overtaking: Set<String>, _ ctx: WriteContext) throws -> [OutboxEntry] {
        do {
            // The conversation a command is about: a message's, or the object itself.
            let rows = try Row.fetchAll(
                ctx.db,
                sql: """
                    SELECT outbox.*,
                        EXISTS (SELECT 1 FROM part WHERE part.message_id = outbox.object_id AND part.transfer_status IN (?, ?)) AS awaits_upload,
                        COALESCE((SELECT conversation_id FROM message WHERE message.id = outbox.object_id), outbox.object_id) AS conversation_key
                    FROM outbox WHERE state = 0 ORDER BY seq LIMIT ?
                    """, arguments: [TransferStatus.awaitingUpload.rawValue, TransferStatus.uploading.rawValue, limit])
            var out: [OutboxEntry] = []
            var held: Set<Data> = []
            for row in rows {
                let key = row["conversation_key"] as Data? ?? Data()
                if row["awaits_upload"] as Bool { held.insert(key) }
                if held.contains(key), !overtaking.contains(row["kind"] as String) { continue }
                var entry = try Self.outboxEntry(row)
                entry.state = .inFlight
                entry.attempts += 1
                try ctx.db.execute(
                    sql: "UPDATE outbox SET state = 1, attempts = ? WHERE seq = ?",
                    arguments: [entry.attempts, entry.sequence])
                out.append(entry)
            }
            return out
        }
    }

    /// Removes an acknowledged entry. Returns false when it was not there (a repeated ACK).
    @discardableResult
    public func markSent(_ id: UUID) throws(ClientError) -> Bool {
        try write { ctx in
            try ctx.db.execute(sql: "DELETE FROM outbox WHERE id = ?", arguments: [StoreCoding.blob(id)])
            return ctx.db.changesCount > 0
        }
    }

    /// Puts every in-flight entry back to pending (after a connection is lost), keeping order.
    public func requeueInFlight() throws(ClientError) {
        try write { ctx in try ctx.db.execute(sql: "UPDATE outbox SET state = 0 WHERE state = 1") }
    }

    /// The pending (not yet handed out) entries of `kind` about `object`, in order.
    public func pendingEntries(kind: String, objectID object: UUID) throws(ClientError) -> [OutboxEntry] {
        try read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM outbox WHERE state = 0 AND kind = ? AND object_id = ? ORDER BY seq",
                arguments: [kind, StoreCoding.blob(object)]
            ).map(Self.outboxEntry)
        }
    }

    /// Every entry, in order, without changing anything.
    public func outboxEntries() throws(ClientError) -> [OutboxEntry] {
        try read { db in try Row.fetchAll(db, sql: "SELECT * FROM outbox ORDER BY seq").map(Self.outboxEntry) }
    }

    static func outboxEntry(_ row: Row) throws -> OutboxEntry {
        var entry = OutboxEntry(
            id: try StoreCoding.uuid(row, "id"), kind: row["kind"],
            objectID: try StoreCoding.optionalUUID(row, "object_id"),
            conversationID: try StoreCoding.optionalUUID(row, "conversation_id"),
            payload: [UInt8](row["payload"] as Data), createdAt: Timestamp(millisecondsSince1970: row["created_at"]))
        guard let state = OutboxEntry.State(rawValue: row["state"]) else {
            throw ClientError(.corruptRecord, "an outbox entry has an unknown state")
        }
        entry.state = state
        entry.attempts = row["attempts"]
        entry.sequence = row["seq"]
        return entry
    }
}
