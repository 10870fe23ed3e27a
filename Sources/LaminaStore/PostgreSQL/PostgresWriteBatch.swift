import Foundation

/// The hot-path writes of a group commit on PostgreSQL, held back and then sent as ONE
/// set-oriented statement per kind (`unnest` over arrays): a group of N sends costs a constant
/// number of round trips instead of four per message. Filled by `PostgresSession` while the
/// writer runs a group without savepoints (`PostgresSession.deferring`); sent before any other
/// statement (so every other statement sees them, in order) and before COMMIT.
///
/// What each kind replaces (the single-row statement it stands for):
/// - `messages`: `HotStatements.insertMessage`. A message whose id or position is taken is not
///   inserted; the flush then fails (`conflict`), the group is rolled back and runs again with a
///   savepoint per command, where the command learns it alone, as before.
/// - `counts`: `HotStatements.countAppended` (the sender's count and each participant's unread count).
/// - `operations`: `HotStatements.insertOperation` (the replication log).
/// - `feeds`: `FeedHead.appendSQL`. Each appended entry gets a provisional seq `k` (1, 2, … per
///   user across the whole group); the statement allocates the real seqs under the row locks of
///   `feed_heads` (in user order) and returns each user's base: the real seq is `base + k`. The
///   base is the same for every flush of one group: the first flush locks the user's head row
///   until COMMIT, so only this group advances it.
struct PostgresWriteBatch {
    /// The single-row statement a deferred row stands for.
    enum Kind: CaseIterable {
        case messages, counts, operations
    }

    private(set) var messages: [[SQLValue]] = []
    private(set) var counts: [[SQLValue]] = []
    private(set) var operations: [[SQLValue]] = []
    private(set) var feeds: [FeedRow] = []

    /// One feed entry held back.
    struct FeedRow {
        var user: String
        var k: Int64
        var kind: Int64
        var conversation: Data?
        var message: Data?
        var payload: Data?
        var createdAt: Int64
    }

    var isEmpty: Bool { messages.isEmpty && counts.isEmpty && operations.isEmpty && feeds.isEmpty }

    /// Rows held at most before the batch is sent (a group is at most `maxBatchSize` commands,
    /// but one command may append to many feeds): keeps one statement's arrays bounded.
    static let maxRows = 8_192

    var rowCount: Int { messages.count + counts.count + operations.count + feeds.count }

    mutating func add(_ kind: Kind, _ values: [SQLValue]) {
        switch kind {
        case .messages: messages.append(values)
        case .counts: counts.append(values)
        case .operations: operations.append(values)
        }
    }

    mutating func add(_ row: FeedRow) { feeds.append(row) }

    mutating func removeAll() {
        messages.removeAll(keepingCapacity: true)
        counts.removeAll(keepingCapacity: true)
        operations.removeAll(keepingCapacity: true)
        feeds.removeAll(keepingCapacity: true)
    }

    // MARK: Statements

    /// The messages' insert: returns one row, how many were inserted.
    func messagesStatement() -> (text: String, values: [PostgresValue]) {
        var b: [PostgresValue] = []
        b.append(.byteas(messages.map { Self.bytes($0[0]) }))
        b.append(.byteas(messages.map { Self.bytes($0[1]) }))
        b.append(.texts(messages.map { Self.text($0[2]) }))
        for column in 3...6 { b.append(.bigints(messages.map { Self.integer($0[column]) })) }
        b.append(.byteas(messages.map { Self.bytes($0[7]) }))
        b.append(.byteas(messages.map { Self.bytes($0[8]) }))  // request_digest: empty for none
        for column in 9...12 { b.append(.bigints(messages.map { Self.integer($0[column]) })) }
        b.append(.texts(messages.map { Self.text($0[13]) }))  // the indexed text (MessageSearchSchema): empty for none
        return (Self.messagesSQL, b)
    }

    static let messagesSQL = """
        WITH inserted AS (
            INSERT INTO messages (id, conversation_id, sender, pos_physical, pos_logical, pos_node, sent_at, body,
                request_digest, origin_node, hlc_physical, hlc_logical, hlc_node, search)
            SELECT id, conversation_id, sender, pos_physical, pos_logical, pos_node, sent_at, body,
                NULLIF(request_digest, '\\x'::bytea), origin_node, hlc_physical, hlc_logical, hlc_node,
                to_tsvector('simple', NULLIF(search_text, ''))
            FROM unnest($1::bytea[], $2::bytea[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[],
                $8::bytea[], $9::bytea[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::text[])
                AS r(id, conversation_id, sender, pos_physical, pos_logical, pos_node, sent_at, body, request_digest,
                    origin_node, hlc_physical, hlc_logical, hlc_node, search_text)
            ON CONFLICT DO NOTHING
            RETURNING 1)
        SELECT count(*) FROM inserted
        """

    /// The counts of the messages: `StoredCounts.appendedBatchPostgres` over their
    /// (conversation, sender, id, position) arrays.
    func countsStatement() -> (text: String, values: [PostgresValue]) {
        var b: [PostgresValue] = []
        b.append(.byteas(counts.map { Self.bytes($0[0]) }))
        b.append(.texts(counts.map { Self.text($0[1]) }))
        b.append(.byteas(counts.map { Self.bytes($0[2]) }))
        for column in 3...5 { b.append(.bigints(counts.map { Self.integer($0[column]) })) }
        return (StoredCounts.appendedBatchPostgres, b)
    }

    func operationsStatement() -> (text: String, values: [PostgresValue]) {
        var b: [PostgresValue] = []
        for column in 0...4 { b.append(.bigints(operations.map { Self.integer($0[column]) })) }
        b.append(.byteas(operations.map { Self.bytes($0[5]) }))
        return (Self.operationsSQL, b)
    }

    static let operationsSQL = """
        INSERT INTO replication_log (origin_node, counter, hlc_physical, hlc_logical, hlc_node, op)
        SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bytea[])
        """

    /// The feed entries: returns `(user, base, head)` per user (see the type's comment).
    func feedsStatement() -> (text: String, values: [PostgresValue]) {
        let b: [PostgresValue] = [
            .texts(feeds.map(\.user)),
            .bigints(feeds.map(\.k)),
            .bigints(feeds.map(\.kind)),
            .byteas(feeds.map { $0.conversation ?? Data() }),
            .byteas(feeds.map { $0.message ?? Data() }),
            .byteas(feeds.map { $0.payload ?? Data() }),
            .booleans(feeds.map { $0.payload != nil }),
            .bigints(feeds.map(\.createdAt)),
        ]
        return (Self.feedsSQL, b)
    }

    /// Ids (conversation, message) are 16 bytes or NULL, passed as empty for NULL; a payload
    /// may be empty, so its NULL is a flag of its own.
    static let feedsSQL = """
        WITH r AS (
            SELECT CAST(user_id AS TEXT) COLLATE "C" AS user_id, k, kind, NULLIF(conversation_id, '\\x'::bytea) AS conversation_id,
                NULLIF(message_id, '\\x'::bytea) AS message_id, CASE WHEN has_payload THEN payload END AS payload, created_at
            FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bytea[], $5::bytea[], $6::bytea[], $7::boolean[], $8::bigint[])
                AS u(user_id, k, kind, conversation_id, message_id, payload, has_payload, created_at)),
        c AS (
            SELECT r.user_id, count(*) AS n, max(r.k) AS mk,
                (SELECT coalesce(max(f.seq), 0) FROM feed_entries f WHERE f.user_id = r.user_id) AS stored
            FROM r GROUP BY r.user_id),
        heads AS (
            INSERT INTO feed_heads (user_id, last_seq)
            SELECT c.user_id, c.stored + c.n FROM c ORDER BY c.user_id
            ON CONFLICT (user_id) DO UPDATE SET last_seq =
                GREATEST(feed_heads.last_seq, (SELECT c2.stored FROM c c2 WHERE c2.user_id = EXCLUDED.user_id))
                + (SELECT c2.n FROM c c2 WHERE c2.user_id = EXCLUDED.user_id)
            RETURNING user_id, last_seq),
        entries AS (
            INSERT INTO feed_entries (user_id, seq, kind, conversation_id, message_id, payload, created_at)
            SELECT r.user_id, h.last_seq - c.mk + r.k, r.kind, r.conversation_id, r.message_id, r.payload, r.created_at
            FROM r JOIN heads h ON h.user_id = r.user_id JOIN c ON c.user_id = r.user_id
            ORDER BY r.user_id, r.k)
        SELECT h.user_id, h.last_seq - c.mk, h.last_seq FROM heads h JOIN c ON c.user_id = h.user_id
        """

    // MARK: Values

    private static func bytes(_ value: SQLValue) -> Data {
        switch value {
        case .blob(let data): return data
        case .text(let text): return Data(text.utf8)
        default: return Data()
        }
    }

    private static func text(_ value: SQLValue) -> String {
        if case .text(let text) = value { return text }
        return ""
    }

    private static func integer(_ value: SQLValue) -> Int64 {
        switch value {
        case .integer(let v): return v
        case .real(let v): return Int64(v)
        default: return 0
        }
    }
}
