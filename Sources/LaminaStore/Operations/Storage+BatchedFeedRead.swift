import Foundation
import LaminaModel

/// One user's part of a batched feed read: the entries after `after`, up to `through`.
package struct FeedRange: Hashable, Sendable {
    package var user: UserID
    package var after: UInt64
    package var through: UInt64

    package init(user: UserID, after: UInt64, through: UInt64) {
        self.user = user
        self.after = after
        self.through = through
    }
}

/// Limits of `StorageReader.feeds(_:)`.
package enum BatchedFeedRead {
    /// Users (ranges) in one read at most.
    package static let maxUsers = 256
    /// Entries of one user's range at most (`through - after`).
    package static let maxEntriesPerUser: UInt64 = 64
}

extension StorageReader {
    /// Several users' feed entries in one read: for each range, the user's entries after
    /// `after` up to `through`, oldest first, each `message-created` entry with its message and
    /// statuses as `feed(of:after:limit:)` gives them. On PostgreSQL a constant number of
    /// statements whatever the number of users and conversations (the statuses' conversation
    /// slices are read for all the conversations at once); on SQLite one `feed` read per range.
    /// A range whose entries are not all stored (pruned) gives those that are.
    package func feeds(_ ranges: [FeedRange]) throws(StorageError) -> [UserID: [FeedEntry]] {
        guard ranges.count <= BatchedFeedRead.maxUsers else {
            throw StorageError(
                .invalidArgument,
                "a batched feed read covers at most \(BatchedFeedRead.maxUsers) users, asked for \(ranges.count)")
        }
        guard Set(ranges.map(\.user)).count == ranges.count else {
            throw StorageError(.invalidArgument, "a batched feed read names each user once")
        }
        for range in ranges {
            guard range.through >= range.after, range.through - range.after <= BatchedFeedRead.maxEntriesPerUser,
                range.through <= UInt64(Int64.max)
            else {
                throw StorageError(
                    .invalidArgument,
                    "a batched feed range holds 0...\(BatchedFeedRead.maxEntriesPerUser) seqs, got \(range.after)...\(range.through)"
                )
            }
        }
        let wanted = ranges.filter { $0.through > $0.after }
        guard !wanted.isEmpty else { return [:] }
        guard db.dialect == .postgres else {
            var out: [UserID: [FeedEntry]] = [:]
            for range in wanted {
                let entries = try feed(of: range.user, after: range.after, limit: Int(range.through - range.after))
                    .filter { $0.seq <= range.through }
                if !entries.isEmpty { out[range.user] = entries }
            }
            return out
        }
        return try batchedFeeds(wanted)
    }

    /// PostgreSQL: the ranges as one JSON argument, and two statements (what the statuses are
    /// derived from, then the entries with their messages). A shared store appends straight to `feed_entries`
    /// (the tail is SQLite's one-writer path), so only that table is read.
    private func batchedFeeds(_ ranges: [FeedRange]) throws(StorageError) -> [UserID: [FeedEntry]] {
        struct Wanted: Encodable {
            var u: String
            var a: Int64
            var b: Int64
        }
        let json: String
        do {
            json = String(
                decoding: try JSONEncoder().encode(
                    ranges.map { Wanted(u: $0.user.rawValue, a: Int64($0.after), b: Int64($0.through)) }),
                as: UTF8.self)
        } catch {
            throw StorageError(.invalidArgument, "feed ranges that do not encode as JSON: \(error)")
        }
        let entries = """
            jsonb_to_recordset(CAST(?1 AS jsonb)) AS w(u text, a bigint, b bigint)
            JOIN feed_entries f ON f.user_id = w.u COLLATE "C" AND f.seq > w.a AND f.seq <= w.b
            """
        let created = "SELECT DISTINCT f.conversation_id FROM \(entries) WHERE f.payload IS NULL"

        // What the statuses of the ranges' messages are derived from, in one statement: the
        // statuses recorded for those messages (0), and the slices of their conversations
        // (`MessageStatuses.slice(of:)`): receipt switches (delivery + 2 × read) and members (1), delivered (2) and read (3)
        // markers.
        var recorded: [UUID: [UserID: RecipientStatus]] = [:]
        var slices: [ConversationID: MessageStatuses.ConversationStatusSlice] = [:]
        let nulls = "CAST(NULL AS BIGINT), CAST(NULL AS BIGINT)"
        let markers = "CAST(pos_physical AS BIGINT), CAST(pos_logical AS BIGINT), CAST(pos_node AS BIGINT)"
        for row in try db.rows(
            """
            SELECT DISTINCT 0, s.message_id, s.user_id, CAST(s.status AS BIGINT), \(nulls) FROM \(entries)
                JOIN recipient_status s ON s.message_id = f.message_id WHERE f.payload IS NULL
            UNION ALL
            SELECT 1, c.id, p.user_id, CAST(c.delivery_receipts_enabled + 2 * c.read_receipts_enabled AS BIGINT),
                \(nulls) FROM conversations c
                LEFT JOIN participants p ON p.conversation_id = c.id AND p.is_member = 1 WHERE c.id IN (\(created))
            UNION ALL
            SELECT 2, conversation_id, user_id, \(markers) FROM \(StatusMarker.delivered.rawValue)
                WHERE conversation_id IN (\(created))
            UNION ALL
            SELECT 3, conversation_id, user_id, \(markers) FROM \(StatusMarker.read.rawValue)
                WHERE conversation_id IN (\(created))
            """, [json])
        {
            guard let uuid = row.uuid(1) else { throw StorageError(.corrupt, "an identifier of another length") }
            let kind = row.int64(0)
            if kind == 0 {
                let raw = row.int64(3)
                guard let status = RecipientStatus(rawValue: Int8(clamping: raw)) else {
                    throw StorageError(.corrupt, "status \(raw) of a message")
                }
                recorded[uuid, default: [:]][try Columns.user(row, 2)] = status
                continue
            }
            let id = ConversationID(uuid: uuid)
            // A conversation without a row reads as `slice(of:)` reads it: no members, receipts on.
            var slice =
                slices[id]
                ?? MessageStatuses.ConversationStatusSlice(
                    participants: [], deliveryReceipts: true, readReceipts: true, delivered: [:], read: [:])
            switch kind {
            case 1:
                let switches = row.int64(3)
                slice.deliveryReceipts = switches & 1 != 0
                slice.readReceipts = switches & 2 != 0
                if !row.isNull(2) { slice.participants.insert(try Columns.user(row, 2)) }
            case 2: slice.delivered[try Columns.user(row, 2)] = try Columns.hlc(row, from: 3)
            default: slice.read[try Columns.user(row, 2)] = try Columns.hlc(row, from: 3)
            }
            slices[id] = slice
        }

        var statuses: [UserID: MessageStatuses] = [:]
        var out: [UserID: [FeedEntry]] = [:]
        try db.eachRow(
            """
            SELECT w.u, f.seq, f.kind, f.conversation_id, f.message_id, f.payload, f.created_at, \(MessageStatuses.columns("m"))
            FROM \(entries)
            LEFT JOIN messages m ON f.payload IS NULL AND m.id = f.message_id
            ORDER BY 1, 2
            """,
            bind: { $0.bind(1, json) }
        ) { (row) throws(StorageError) in
            let user = try Columns.user(row, 0)
            let seq = row.int64(1)
            let conversation = row.uuid(3)
            let message = row.uuid(4)
            let payload = row.bytes(5)
            if !row.isNull(3), conversation == nil {
                throw StorageError(.corrupt, "column conversation_id does not hold a 16-byte identifier")
            }
            if !row.isNull(4), message == nil {
                throw StorageError(.corrupt, "column message_id does not hold a 16-byte identifier")
            }
            var entry = FeedEntry(
                user: user, seq: UInt64(seq), kind: UInt8(truncatingIfNeeded: row.int64(2)),
                conversation: conversation.map { ConversationID(uuid: $0) },
                message: message.map { MessageID(uuid: $0) },
                payload: payload ?? [], createdAt: Timestamp(millisecondsSince1970: row.int64(6)))
            if payload == nil {
                guard let message, !row.isNull(7) else {
                    throw StorageError(.corrupt, "feed entry \(seq) of \(user) names a message that is not stored")
                }
                var viewer =
                    statuses[user]
                    ?? {
                        var fresh = MessageStatuses(reader: self, viewer: user)
                        fresh.preload(slices)
                        return fresh
                    }()
                entry.createdMessage = try viewer.storedMessage(row, at: 7, recorded: recorded[message] ?? [:]).message
                statuses[user] = viewer
            }
            out[user, default: []].append(entry)
        }
        return out
    }
}
