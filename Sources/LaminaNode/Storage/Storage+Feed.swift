import Foundation
import GRDB
import LaminaModel

/// One entry of a user's change feed.
public struct FeedEntry: Hashable, Sendable {
    public var user: UserID
    /// Counts up from 1 per user, without gaps.
    public var seq: UInt64
    /// The node's own kind code for the payload.
    public var kind: UInt8
    public var conversation: ConversationID?
    public var message: MessageID?
    /// The change as the node encoded it; empty for a `message-created` entry, whose
    /// message is stored once (`createdMessage`).
    public var payload: [UInt8]
    public var createdAt: Timestamp
    /// The message of a `message-created` entry, read from the message's own row.
    public var createdMessage: Message? = nil
}

extension StorageTransaction {
    /// Appends one change to the feed of every user in `users` (duplicates counted once) and
    /// returns each user's new sequence number.
    public func appendChange(
        to users: some Sequence<UserID>, kind: UInt8, conversation: ConversationID?, message: MessageID?,
        payload: [UInt8], at time: Timestamp
    ) throws(StorageError) -> [UserID: UInt64] {
        try checkBlob(payload, "a feed payload")
        return try appendEntries(to: users, kind: kind, conversation: conversation, message: message, payload: payload, at: time)
    }

    /// Appends `message-created` of a stored message to the feed of every user in `users`:
    /// each entry names the message (stored once) instead of holding a copy of it. Returns
    /// each user's new sequence number.
    public func appendMessageCreated(
        _ message: MessageID, in conversation: ConversationID, to users: some Sequence<UserID>, kind: UInt8, at time: Timestamp
    ) throws(StorageError) -> [UserID: UInt64] {
        try appendEntries(to: users, kind: kind, conversation: conversation, message: message, payload: nil, at: time)
    }

    private func appendEntries(
        to users: some Sequence<UserID>, kind: UInt8, conversation: ConversationID?, message: MessageID?, payload: [UInt8]?, at time: Timestamp
    ) throws(StorageError) -> [UserID: UInt64] {
        let statements = try statements
        let insert = statements.insertFeedEntry
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
            try insert.run()
            cache.remember(feedHead: seq, of: user)
            seqs[user] = UInt64(seq)
        }
        return seqs
    }

    /// Moves a device's cursor up to `seq` (it never moves back) and returns the cursor now
    /// stored. A seq beyond the user's feed head is refused.
    @discardableResult
    public func advanceCursor(of device: String, user: UserID, to seq: UInt64, at time: Timestamp) throws(StorageError) -> UInt64 {
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
    public func pruneFeed(of user: UserID, through seq: UInt64) throws(StorageError) -> Int {
        // The head survives its entries: `feed_heads` keeps it as the floor of the next seq.
        let head = try Columns.int64(try read.feedHead(of: user), "seq")
        try db.run(
            "INSERT INTO feed_heads (user_id, last_seq) VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE SET last_seq = max(last_seq, excluded.last_seq)",
            [user.rawValue, head]
        )
        try db.run("DELETE FROM feed_entries WHERE user_id = ? AND seq <= ?", [user.rawValue, try Columns.int64(seq, "seq")])
        return db.changesCount
    }
}

/// Where a feed's head comes from: its greatest stored seq, or, once pruning deleted the
/// entries up to it, the floor `pruneFeed` left in `feed_heads`. Appending writes no head.
enum FeedHead {
    /// One argument, the user id.
    static let sql = """
        SELECT max(ifnull((SELECT max(seq) FROM feed_entries WHERE user_id = ?1), 0),
                   ifnull((SELECT last_seq FROM feed_heads WHERE user_id = ?1), 0))
        """
}

extension StorageReader {
    /// The user's feed entries after `seq`, oldest first, at most `limit`. A `message-created`
    /// entry comes with its message, read in the same query (and the page's recorded
    /// statuses in one more), not one lookup per entry.
    public func feed(of user: UserID, after seq: UInt64, limit: Int) throws(StorageError) -> [FeedEntry] {
        try checkLimit(limit)
        let after = try Columns.int64(seq, "seq")
        let rows = try db.rows(
            """
            SELECT f.seq, f.kind, f.conversation_id, f.message_id, f.payload, f.created_at, \(MessageStatuses.columns("m"))
            FROM feed_entries f LEFT JOIN messages m ON f.payload IS NULL AND m.id = f.message_id
            WHERE f.user_id = ? AND f.seq > ? ORDER BY f.seq LIMIT ?
            """,
            [user.rawValue, after, limit]
        )
        guard let lastRow = rows.last else { return [] }
        let last: Int64 = lastRow[0]
        var recorded: [Data: [UserID: RecipientStatus]] = [:]
        for row in try db.rows(
            """
            SELECT s.message_id, s.user_id, s.status FROM feed_entries f JOIN recipient_status s ON s.message_id = f.message_id
            WHERE f.user_id = ? AND f.seq > ? AND f.seq <= ? AND f.payload IS NULL
            """,
            [user.rawValue, after, last]
        ) {
            let raw: Int64 = row[2]
            guard let status = RecipientStatus(rawValue: Int8(clamping: raw)) else { throw StorageError(.corrupt, "status \(raw) of a message") }
            recorded[row[0] as Data, default: [:]][try Columns.user(row, 1)] = status
        }
        var statuses = MessageStatuses(reader: self, viewer: user)
        return try rows.map { (row) throws(StorageError) -> FeedEntry in
            let conversation: Data? = row[2]
            let message: Data? = row[3]
            let seq: Int64 = row[0]
            let kind: Int64 = row[1]
            let payload: Data? = row[4]
            let createdAt: Int64 = row[5]
            var entry = FeedEntry(
                user: user,
                seq: UInt64(seq),
                kind: UInt8(truncatingIfNeeded: kind),
                conversation: try conversation.map { (d) throws(StorageError) in ConversationID(uuid: try Columns.uuid(d, column: "conversation_id")) },
                message: try message.map { (d) throws(StorageError) in MessageID(uuid: try Columns.uuid(d, column: "message_id")) },
                payload: payload.map { [UInt8]($0) } ?? [],
                createdAt: Timestamp(millisecondsSince1970: createdAt)
            )
            if payload == nil {
                guard let message, row[6] as Data? != nil else {
                    throw StorageError(.corrupt, "feed entry \(seq) of \(user) names a message that is not stored")
                }
                entry.createdMessage = try statuses.storedMessage(row, at: 6, recorded: recorded[message] ?? [:]).message
            }
            return entry
        }
    }

    /// The last sequence number of the user's feed (0 when it never had an entry).
    public func feedHead(of user: UserID) throws(StorageError) -> UInt64 {
        UInt64(try db.int64(FeedHead.sql, [user.rawValue]) ?? 0)
    }

    /// The device's acknowledged sequence number (0 when it never acknowledged).
    public func cursor(of device: String, user: UserID) throws(StorageError) -> UInt64 {
        try checkDeviceID(device)
        return UInt64(try db.int64("SELECT acked_seq FROM device_cursors WHERE user_id = ? AND device_id = ?", [user.rawValue, device]) ?? 0)
    }

    /// Every device's cursor of a user.
    public func cursors(of user: UserID) throws(StorageError) -> [String: UInt64] {
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
        throw StorageError(.invalidArgument, "a device id is 1...\(StorageLimits.maxDeviceIDBytes) UTF-8 bytes, got \(bytes)")
    }
}
