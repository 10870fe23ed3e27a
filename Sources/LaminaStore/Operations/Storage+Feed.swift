import Foundation
import LaminaModel
import LaminaWire

/// One entry of a user's change feed.
package struct FeedEntry: Hashable, Sendable {
    package var user: UserID
    /// Counts up from 1 per user, without gaps.
    package var seq: UInt64
    /// The node's own kind code for the payload.
    package var kind: UInt8
    package var conversation: ConversationID?
    package var message: MessageID?
    /// The change as the node encoded it; empty for a `message-created` entry, whose
    /// message is stored once (`createdMessage`).
    package var payload: [UInt8]
    package var createdAt: Timestamp
    /// The message of a `message-created` entry, read from the message's own row.
    package var createdMessage: Message? = nil
    /// Instead of `createdMessage` for a read that asked for it: the entry's event encoded
    /// straight from the message's row, as the feed's user is shown it.
    package var createdEncoding: StoredMessageEncoding? = nil
}

extension StorageTransaction {
    /// Appends one change to the feed of every user in `users` (duplicates counted once) and
    /// returns each user's new sequence number.
    package func appendChange(
        to users: some Sequence<UserID>, kind: UInt8, conversation: ConversationID?, message: MessageID?,
        payload: [UInt8], at time: Timestamp
    ) throws(StorageError) -> [UserID: UInt64] {
        try checkBlob(payload, "a feed payload")
        return try appendEntries(
            to: users, kind: kind, conversation: conversation, message: message, payload: payload, at: time)
    }

    /// Appends `message-created` of a stored message to the feed of every user in `users`:
    /// each entry names the message (stored once) instead of holding a copy of it. Returns
    /// each user's new sequence number.
    package func appendMessageCreated(
        _ message: MessageID, in conversation: ConversationID, to users: some Sequence<UserID>, kind: UInt8,
        at time: Timestamp
    ) throws(StorageError) -> [UserID: UInt64] {
        try appendEntries(to: users, kind: kind, conversation: conversation, message: message, payload: nil, at: time)
    }

    private func appendEntries(
        to users: some Sequence<UserID>, kind: UInt8, conversation: ConversationID?, message: MessageID?,
        payload: [UInt8]?, at time: Timestamp
    ) throws(StorageError) -> [UserID: UInt64] {
        if cache.sharedWriters {
            return try appendEntriesShared(
                to: Set(users), kind: kind, conversation: conversation, message: message, payload: payload, at: time)
        }
        let statements = try statements
        let insert = cache.feedsDirect ? statements.insertFeedEntryDirect : statements.insertFeedEntry
        var seqs: [UserID: UInt64] = [:]
        for user in Set(users).sorted() {
            let seq: Int64
            if let head = cache.feedHead(user) {
                seq = head + 1
            } else {
                statements.feedHead.bind(1, user.rawValue)
                seq = (try statements.feedHead.run() ?? 0) + 1
            }
            insert.bind(1, user.rawValue)
            insert.bind(2, seq)
            insert.bind(3, Int64(kind))
            if let conversation { insert.bind(4, conversation.uuid) } else { insert.bindNull(4) }
            if let message { insert.bind(5, message.uuid) } else { insert.bindNull(5) }
            insert.bind(6, payload)
            insert.bind(7, time.millisecondsSince1970)
            try insert.execute()
            cache.remember(feedHead: seq, of: user)
            seqs[user] = UInt64(seq)
        }
        if !cache.feedsDirect { cache.staged(feedTailRows: seqs.count) }
        return seqs
    }

    /// Several writers (PostgreSQL): every user's next seq allocated in their `feed_heads` row
    /// (locked until COMMIT, so seqs are unique and in commit order per user) and the entries
    /// inserted, in ONE statement for all the users (`FeedHead.appendSQL`): one round trip
    /// whatever the number of participants.
    private func appendEntriesShared(
        to users: Set<UserID>, kind: UInt8, conversation: ConversationID?, message: MessageID?, payload: [UInt8]?,
        at time: Timestamp
    ) throws(StorageError) -> [UserID: UInt64] {
        guard !users.isEmpty else { return [:] }
        if let session = db as? PostgresSession, session.deferring {
            // A set-oriented group commit: provisional seqs, replaced once the group's feeds
            // are written (`PostgresWriteBatch`); the heads are announced by the writer then.
            return try session.deferFeedAppend(
                to: users, kind: Int64(kind), conversation: conversation.map { Columns.blob($0.uuid) },
                message: message.map { Columns.blob($0.uuid) }, payload: payload.map { Data($0) },
                at: time.millisecondsSince1970)
        }
        let list: String
        do {
            list = String(decoding: try JSONEncoder().encode(users.map(\.rawValue)), as: UTF8.self)
        } catch {
            throw StorageError(.invalidArgument, "user ids that do not encode as JSON: \(error)")
        }
        let rows = try db.rows(
            FeedHead.appendSQL,
            [
                list, Int64(kind), conversation.map { Columns.blob($0.uuid) }, message.map { Columns.blob($0.uuid) },
                payload.map { Data($0) }, time.millisecondsSince1970,
            ])
        let byRawValue = Dictionary(uniqueKeysWithValues: users.map { ($0.rawValue, $0) })
        var seqs: [UserID: UInt64] = [:]
        for row in rows {
            guard let id = row.text(0), let user = byRawValue[id] else { continue }
            let seq = row.int64(1)
            cache.announce(feedHead: seq, of: user)
            seqs[user] = UInt64(seq)
        }
        guard seqs.count == users.count else {
            throw StorageError(.database, "appending to \(users.count) feeds returned \(seqs.count) seqs")
        }
        return seqs
    }

    /// Moves a device's cursor up to `seq` (it never moves back) and returns the cursor now
    /// stored. A seq beyond the user's feed head is refused.
    @discardableResult
    package func advanceCursor(of device: String, user: UserID, to seq: UInt64, at time: Timestamp) throws(StorageError)
        -> UInt64
    {
        try checkDeviceID(device)
        let head = try read.feedHead(of: user)
        guard seq <= head else {
            throw StorageError(.invalidArgument, "cursor \(seq) is beyond the feed head \(head) of \(user)")
        }
        try db.run(
            """
            INSERT INTO device_cursors (user_id, device_id, acked_seq, updated_at) VALUES (?, ?, ?, ?)
            ON CONFLICT (user_id, device_id) DO UPDATE SET acked_seq = excluded.acked_seq, updated_at = excluded.updated_at
            WHERE excluded.acked_seq > device_cursors.acked_seq
            """,
            [user.rawValue, device, Int64(seq), time.millisecondsSince1970]
        )
        return try read.cursor(of: device, user: user)
    }

    /// Deletes a user's feed entries up to `seq` inclusive (all devices have them). Returns how many.
    @discardableResult
    package func pruneFeed(of user: UserID, through seq: UInt64) throws(StorageError) -> Int {
        // The head survives its entries: `feed_heads` keeps it as the floor of the next seq.
        let head = try Columns.int64(try read.feedHead(of: user), "seq")
        try db.run(
            "INSERT INTO feed_heads (user_id, last_seq) VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE SET last_seq = \(db.dialect.greatest("feed_heads.last_seq", "excluded.last_seq"))",
            [user.rawValue, head]
        )
        let through = try Columns.int64(seq, "seq")
        try db.run("DELETE FROM feed_entries WHERE user_id = ? AND seq <= ?", [user.rawValue, through])
        var pruned = db.changesCount
        try db.run("DELETE FROM feed_tail WHERE user_id = ? AND seq <= ?", [user.rawValue, through])
        pruned += db.changesCount
        // The tail's count the writer keeps is now too high: it is read again.
        cache.forgetFeedTailRows()
        return pruned
    }
}

extension StorageTransaction {
    /// Prunes every user's feed through what all their devices seen since `recent` have
    /// acknowledged; a user none of whose devices was seen since then loses the whole feed
    /// (their devices get a snapshot when they come back, SPEC §6.3). Devices are known by
    /// the cursors they sent with SYNC. Each user costs a range delete of what goes, never a
    /// scan of what stays. Returns how many entries went.
    @discardableResult
    package func pruneFeeds(devicesSeenSince recent: Timestamp) throws(StorageError) -> Int {
        var floors: [(UserID, UInt64?)] = []
        for row in try db.rows(
            """
            SELECT user_id, min(CASE WHEN updated_at >= ?1 THEN acked_seq END) AS floor FROM device_cursors GROUP BY user_id
            """, [recent.millisecondsSince1970]
        ) {
            let floor: Int64? = row["floor"]
            floors.append((try Columns.user(row, "user_id"), floor.map { UInt64(max(0, $0)) }))
        }
        var pruned = 0
        for (user, floor) in floors {
            var through: UInt64
            if let floor { through = floor } else { through = try read.feedHead(of: user) }
            if through > 0 { pruned += try pruneFeed(of: user, through: through) }
        }
        return pruned
    }
}

/// Where new feed entries wait (one writer): `feed_tail`, a table appended in commit order with
/// no index. A user's feed is a range of `feed_entries`' B-tree, so appending straight there
/// dirties one page per participant: a message to 25 people wrote 25 pages (and their WAL
/// frames) in its commit. In the tail its 25 entries share a page or two. When the tail
/// holds the writer's `feedTailRows` entries, the group's transaction moves them all into
/// `feed_entries` in one statement (each feed's page dirtied once for many messages) and
/// empties the tail (`settle`). A large group (at least the writer's group commit target of
/// commands, e.g. 50 senders × 32 in flight) gains nothing from the tail: its many entries
/// already share each feed's page, so it appends to `feed_entries` directly (`beginGroup`).
/// A feed's entries in the tail all come after its entries in `feed_entries` (seqs count up,
/// and a move takes every one), so a read takes a page from `feed_entries` and, only when that
/// runs out, goes on in the tail (whose scan is bounded by `feedTailRows`). Several writers
/// (PostgreSQL) append to `feed_entries` (`FeedHead.appendSQL`): their tail stays empty.
enum FeedTail {
    static let createSQLite = """
        CREATE TABLE feed_tail (
            user_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            kind INTEGER NOT NULL,
            conversation_id BLOB,
            message_id BLOB,
            payload BLOB,
            created_at INTEGER NOT NULL,
            CHECK (payload IS NOT NULL OR message_id IS NOT NULL)
        ) STRICT
        """

    static let createPostgres = """
        CREATE TABLE feed_tail (
            user_id TEXT COLLATE "C" NOT NULL,
            seq BIGINT NOT NULL,
            kind BIGINT NOT NULL,
            conversation_id BYTEA,
            message_id BYTEA,
            payload BYTEA,
            created_at BIGINT NOT NULL,
            CHECK (payload IS NOT NULL OR message_id IS NOT NULL)
        )
        """

    /// The columns of a feed entry, the same in both tables.
    static let columns = "user_id, seq, kind, conversation_id, message_id, payload, created_at"

    /// Appends one entry to `table` (the tail, or `feed_entries` directly).
    static func insertSQL(into table: String) -> String {
        "INSERT INTO \(table) (\(columns)) VALUES (?, ?, ?, ?, ?, ?, ?)"
    }

    /// The writer, when a group begins: a group of at least `largeGroup` commands appends to
    /// the feeds directly (its entries already share each feed's page: the tail would only
    /// add its own insert, sort and delete per entry), after moving what the tail holds (a
    /// feed's tail entries must stay its newest).
    static func beginGroup(_ db: any SQLSession, cache: WriterCache, commands: Int, largeGroup: Int)
        throws(StorageError)
    {
        cache.feedsDirect = commands >= largeGroup
        if cache.feedsDirect { try settle(db, cache: cache, atLeast: 1) }
    }

    /// The writer, before a group's COMMIT: moves the tail into `feed_entries` once it holds
    /// `cache.feedTailLimit` entries (or `atLeast`).
    static func settle(_ db: any SQLSession, cache: WriterCache, atLeast: Int? = nil) throws(StorageError) {
        let rows: Int
        if let known = cache.feedTailRows {
            rows = known
        } else {
            rows = Int(try db.int64("SELECT count(*) FROM feed_tail") ?? 0)
        }
        guard rows >= (atLeast ?? cache.feedTailLimit) else {
            cache.feedTailRows = rows
            return
        }
        try db.run("INSERT INTO feed_entries (\(columns)) SELECT \(columns) FROM feed_tail ORDER BY user_id, seq")
        try db.run("DELETE FROM feed_tail")
        cache.feedTailRows = 0
    }

    /// Where a feed's entries are, oldest first: every entry in the tail comes after every
    /// entry of the same feed in `feed_entries`.
    static let tables = ["feed_entries", "feed_tail"]
}

/// Where a feed's head comes from: its greatest stored seq, or, once pruning deleted the
/// entries up to it, the floor `pruneFeed` left in `feed_heads`. Appending writes no head
/// with one writer; with several (PostgreSQL) it allocates the seq in `feed_heads`.
enum FeedHead {
    /// Several writers: appends one entry to the feed of each user in a JSON array (`?1`),
    /// each with the next seq, allocated under the row lock of the user's `feed_heads` row
    /// (held to COMMIT; a second writer waits, then sees the new head), the rows locked in
    /// user order (every writer locks feeds in the same order). The row's head is raised to
    /// at least the greatest stored seq first (a feed appended to by one writer, before, kept
    /// no head there). Then kind, conversation, message, payload, time; returns `(user, seq)`
    /// rows. PostgreSQL only (a writable CTE).
    static let appendSQL = """
        WITH users AS (
            SELECT DISTINCT CAST(u AS TEXT) COLLATE "C" AS user_id FROM jsonb_array_elements_text(CAST(?1 AS jsonb)) AS u),
        heads AS (
            INSERT INTO feed_heads (user_id, last_seq)
            SELECT users.user_id, (SELECT coalesce(max(f.seq), 0) FROM feed_entries f WHERE f.user_id = users.user_id) + 1
            FROM users ORDER BY users.user_id
            ON CONFLICT (user_id) DO UPDATE SET last_seq = GREATEST(feed_heads.last_seq,
                (SELECT coalesce(max(f.seq), 0) FROM feed_entries f WHERE f.user_id = EXCLUDED.user_id)) + 1
            RETURNING user_id, last_seq)
        INSERT INTO feed_entries (user_id, seq, kind, conversation_id, message_id, payload, created_at)
        SELECT user_id, last_seq, CAST(?2 AS BIGINT), CAST(?3 AS BYTEA), CAST(?4 AS BYTEA), CAST(?5 AS BYTEA), CAST(?6 AS BIGINT)
        FROM heads ORDER BY user_id
        RETURNING user_id, seq
        """

    /// One argument, the user id.
    static let sql = """
        SELECT coalesce(max(head), 0) FROM (
            SELECT max(seq) AS head FROM feed_entries WHERE user_id = ?1
            UNION ALL SELECT max(seq) FROM feed_tail WHERE user_id = ?1
            UNION ALL SELECT last_seq FROM feed_heads WHERE user_id = ?1) AS heads
        """
}

extension StorageReader {
    /// The user's feed entries after `seq`, oldest first, at most `limit`. A `message-created`
    /// entry comes with its message, read in the same query (and the page's recorded
    /// statuses in one more), not one lookup per entry: as a `Message`, or with
    /// `encodingMessages` as its event's encoding (`createdEncoding`), which a catch-up sends
    /// as it is.
    package func feed(of user: UserID, after seq: UInt64, limit: Int, encodingMessages: Bool = false)
        throws(StorageError) -> [FeedEntry]
    {
        try checkLimit(limit)
        var entries: [FeedEntry] = []
        entries.reserveCapacity(min(limit, 256))
        var statuses = MessageStatuses(reader: self, viewer: user)
        // The feed's entries in `feed_entries` come before those in the tail (`FeedTail`):
        // the page is read from the first, and only when that runs out, from the tail.
        for table in FeedTail.tables {
            let remaining = limit - entries.count
            guard remaining > 0 else { break }
            try readFeed(
                table, of: user, after: entries.last?.seq ?? seq, limit: remaining, encodingMessages: encodingMessages,
                statuses: &statuses, into: &entries)
        }
        return entries
    }

    /// Up to `limit` of the user's entries after `seq` in `table`, appended to `entries`.
    private func readFeed(
        _ table: String, of user: UserID, after seq: UInt64, limit: Int, encodingMessages: Bool,
        statuses: inout MessageStatuses, into entries: inout [FeedEntry]
    ) throws(StorageError) {
        let after = try Columns.int64(seq, "seq")
        // Recorded statuses first (one query for the page), then the entries, each decoded
        // straight from SQLite's row as it is stepped.
        var recorded: [UUID: [UserID: RecipientStatus]] = [:]
        try db.eachRow(
            """
            SELECT s.message_id, s.user_id, s.status FROM \(table) f JOIN recipient_status s ON s.message_id = f.message_id
            WHERE f.user_id = ?1 AND f.seq > ?2 AND f.payload IS NULL
                AND f.seq <= (SELECT max(seq) FROM (SELECT seq FROM \(table) WHERE user_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3) AS page)
            """,
            bind: {
                $0.bind(1, user.rawValue)
                $0.bind(2, after)
                $0.bind(3, Int64(limit))
            }
        ) { (row) throws(StorageError) in
            let raw = row.int64(2)
            guard let message = row.uuid(0), let status = RecipientStatus(rawValue: Int8(clamping: raw)) else {
                throw StorageError(.corrupt, "status \(raw) of a message")
            }
            recorded[message, default: [:]][try Columns.user(row, 1)] = status
        }
        try db.eachRow(
            """
            SELECT f.seq, f.kind, f.conversation_id, f.message_id, f.payload, f.created_at, \(MessageStatuses.columns("m"))
            FROM \(table) f LEFT JOIN messages m ON f.payload IS NULL AND m.id = f.message_id
            WHERE f.user_id = ?1 AND f.seq > ?2 ORDER BY f.seq LIMIT ?3
            """,
            bind: {
                $0.bind(1, user.rawValue)
                $0.bind(2, after)
                $0.bind(3, Int64(limit))
            }
        ) { (row) throws(StorageError) in
            let seq = row.int64(0)
            let conversation = row.uuid(2)
            let message = row.uuid(3)
            let payload = row.bytes(4)
            if !row.isNull(2), conversation == nil {
                throw StorageError(.corrupt, "column conversation_id does not hold a 16-byte identifier")
            }
            if !row.isNull(3), message == nil {
                throw StorageError(.corrupt, "column message_id does not hold a 16-byte identifier")
            }
            var entry = FeedEntry(
                user: user,
                seq: UInt64(seq),
                kind: UInt8(truncatingIfNeeded: row.int64(1)),
                conversation: conversation.map { ConversationID(uuid: $0) },
                message: message.map { MessageID(uuid: $0) },
                payload: payload ?? [],
                createdAt: Timestamp(millisecondsSince1970: row.int64(5))
            )
            if payload == nil {
                guard let message, !row.isNull(6) else {
                    throw StorageError(.corrupt, "feed entry \(seq) of \(user) names a message that is not stored")
                }
                if encodingMessages {
                    entry.createdEncoding = try statuses.storedMessageEncoding(
                        row, at: 6, recorded: recorded[message] ?? [:])
                } else {
                    entry.createdMessage = try statuses.storedMessage(row, at: 6, recorded: recorded[message] ?? [:])
                        .message
                }
            }
            entries.append(entry)
        }
    }

    /// The last sequence number of the user's feed (0 when it never had an entry).
    package func feedHead(of user: UserID) throws(StorageError) -> UInt64 {
        UInt64(try db.int64(FeedHead.sql, [user.rawValue]) ?? 0)
    }

    /// The device's acknowledged sequence number (0 when it never acknowledged).
    package func cursor(of device: String, user: UserID) throws(StorageError) -> UInt64 {
        try checkDeviceID(device)
        return UInt64(
            try db.int64(
                "SELECT acked_seq FROM device_cursors WHERE user_id = ? AND device_id = ?", [user.rawValue, device])
                ?? 0)
    }

    /// Every device's cursor of a user.
    package func cursors(of user: UserID) throws(StorageError) -> [String: UInt64] {
        var out: [String: UInt64] = [:]
        for row in try db.rows("SELECT device_id, acked_seq FROM device_cursors WHERE user_id = ?", [user.rawValue]) {
            let seq: Int64 = row["acked_seq"]
            out[row["device_id"]] = UInt64(seq)
        }
        return out
    }
}

func checkDeviceID(_ device: String) throws(StorageError) {
    let bytes = device.utf8.count
    guard bytes > 0, bytes <= StorageLimits.maxDeviceIDBytes else {
        throw StorageError(
            .invalidArgument, "a device id is 1...\(StorageLimits.maxDeviceIDBytes) UTF-8 bytes, got \(bytes)")
    }
}
