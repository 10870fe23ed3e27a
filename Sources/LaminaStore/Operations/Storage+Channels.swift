import Foundation
import LaminaModel
import LaminaWire

/// A channel as stored (SPEC §6.8): the channel, its log head (the highest `log_seq` given to
/// one of its messages here), its member count, and whether it is deleted.
package struct ChannelRecord: Hashable, Sendable {
    package var channel: ChatChannel
    package var head: UInt64
    package var memberCount: Int
    package var isDeleted: Bool
}

/// What ``StorageTransaction/createChannel(_:)`` did.
package enum ChannelCreation: Hashable, Sendable {
    case created
    /// The id names a channel already (a retry, or another's): nothing was written.
    case idExists(ChannelRecord)
    /// A live channel holds the name: nothing was written.
    case nameTaken
}

extension StorageTransaction {
    /// Stores a new channel with no member; see ``ChannelCreation``.
    package func createChannel(_ channel: ChatChannel) throws(StorageError) -> ChannelCreation {
        if let existing = try read.channel(channel.id) { return .idExists(existing) }
        // A live channel from a peer holds its name here too (the unique index covers only the
        // channels created on this node and the nodes sharing its store).
        if try read.channel(named: channel.name) != nil { return .nameTaken }
        // A taken name inserts nothing (no error, which on PostgreSQL would abort the transaction).
        try db.run(
            "INSERT INTO channels (id, name, creator, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [
                Columns.blob(channel.id.uuid), channel.name.rawValue, channel.creator.rawValue,
                channel.createdAt.millisecondsSince1970,
            ])
        return db.changesCount == 1 ? .created : .nameTaken
    }

    /// Makes `user` a member; false when they were one already.
    @discardableResult
    package func addChannelMember(_ user: UserID, to channel: ChannelID, at time: Timestamp) throws(StorageError)
        -> Bool
    {
        let id = Columns.blob(channel.uuid)
        try db.run(
            "INSERT INTO channel_members (channel_id, member, joined_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            [id, user.rawValue, time.millisecondsSince1970])
        guard db.changesCount == 1 else { return false }
        try db.run("UPDATE channels SET member_count = member_count + 1 WHERE id = ?", [id])
        return true
    }

    /// Ends `user`'s membership; false when they were not a member.
    @discardableResult
    package func removeChannelMember(_ user: UserID, from channel: ChannelID) throws(StorageError) -> Bool {
        let id = Columns.blob(channel.uuid)
        try db.run("DELETE FROM channel_members WHERE channel_id = ? AND member = ?", [id, user.rawValue])
        guard db.changesCount == 1 else { return false }
        try db.run("UPDATE channels SET member_count = member_count - 1 WHERE id = ?", [id])
        return true
    }

    /// Appends a message to the channel's log: moves the channel's head by one and writes the
    /// message as one row at the new head, whatever the member count (and one `channel_content`
    /// row per content its parts reference). Returns the message with
    /// its `logSeq`. `.alreadyExists` when the id is taken (nothing written), `.notFound` when
    /// the channel is missing or deleted.
    package func appendChannelMessage(_ message: ChannelMessage) throws(StorageError) -> ChannelMessage {
        do { for part in message.parts { try part.validate() } } catch { throw error.storageError }
        if try db.int64("SELECT 1 FROM channel_messages WHERE id = ?", [Columns.blob(message.id.uuid)]) != nil {
            throw StorageError(.alreadyExists, "message \(message.id) exists")
        }
        let body: [UInt8]
        do { body = try MessageBodyCoding.encode(parts: message.parts, push: nil) } catch {
            throw StorageError(.invalidArgument, "message \(message.id) cannot be encoded: \(error.reason)")
        }
        try checkBlob(body, "a channel message body")
        let channel = Columns.blob(message.channelID.uuid)
        // The update takes the channel row's lock first, so writers of one channel (also other
        // nodes on one PostgreSQL) number its log one after the other.
        try db.run("UPDATE channels SET head = head + 1 WHERE id = ? AND deleted = 0", [channel])
        guard db.changesCount == 1, let head = try db.int64("SELECT head FROM channels WHERE id = ?", [channel]) else {
            throw StorageError(.notFound, "no channel \(message.channelID)")
        }
        let (pp, pl, pn) = try Columns.hlc(message.position)
        try db.run(
            """
            INSERT INTO channel_messages (channel_id, log_seq, id, sender, sent_at, pos_physical, pos_logical, pos_node, body)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                channel, head, Columns.blob(message.id.uuid), message.sender.rawValue,
                message.sentAt.millisecondsSince1970, pp, pl, pn, Data(body),
            ])
        try linkChannelContent(of: message)
        var stored = message
        stored.logSeq = UInt64(head)
        return stored
    }

    /// Deletes the channel for everyone: its messages and memberships go, its name is free, its
    /// id stays taken. Its content links stay, so the next collection frees the content. Returns the users who were members (in user id order); nil when it was
    /// missing or deleted already.
    package func deleteChannel(_ channel: ChannelID) throws(StorageError) -> [UserID]? {
        let id = Columns.blob(channel.uuid)
        try db.run("UPDATE channels SET deleted = 1, member_count = 0 WHERE id = ? AND deleted = 0", [id])
        guard db.changesCount == 1 else { return nil }
        let members = try read.channelMembers(of: channel)
        try db.run("DELETE FROM channel_members WHERE channel_id = ?", [id])
        try db.run("DELETE FROM channel_standings WHERE channel_id = ?", [id])
        try db.run("DELETE FROM channel_messages WHERE channel_id = ?", [id])
        return members
    }
}

extension StorageReader {
    /// The channel with id `id`, deleted or not.
    package func channel(_ id: ChannelID) throws(StorageError) -> ChannelRecord? {
        guard
            let row = try db.row(
                "SELECT name, creator, created_at, head, member_count, deleted FROM channels WHERE id = ?",
                [Columns.blob(id.uuid)])
        else { return nil }
        return try Self.channelRecord(id, row, from: 0)
    }

    /// The live channel named `name`: when peers created the name concurrently (SPEC §6.8), the
    /// earliest creation (then the smaller id).
    package func channel(named name: ChannelName) throws(StorageError) -> ChannelRecord? {
        guard
            let row = try db.row(
                """
                SELECT id, name, creator, created_at, head, member_count, deleted FROM channels
                WHERE name = ? AND deleted = 0 ORDER BY created_at, id LIMIT 1
                """,
                [name.rawValue])
        else { return nil }
        guard let uuid = row.uuid(0) else { throw StorageError(.corrupt, "channels.id is not an identifier") }
        return try Self.channelRecord(ChannelID(uuid: uuid), row, from: 1)
    }

    private static func channelRecord(_ id: ChannelID, _ row: SQLRow, from i: Int) throws(StorageError)
        -> ChannelRecord
    {
        guard let raw = row.text(i), let name = try? ChannelName(raw) else {
            throw StorageError(.corrupt, "channels.name is not a channel name")
        }
        let channel = ChatChannel(
            id: id, name: name, creator: try Columns.user(row, i + 1),
            createdAt: Timestamp(millisecondsSince1970: row.int64(i + 2)))
        return ChannelRecord(
            channel: channel, head: UInt64(max(0, row.int64(i + 3))), memberCount: Int(row.int64(i + 4)),
            isDeleted: row.int64(i + 5) != 0)
    }

    /// Whether `user` is a member of `channel` now.
    package func isChannelMember(_ user: UserID, of channel: ChannelID) throws(StorageError) -> Bool {
        try db.int64(
            "SELECT 1 FROM channel_members WHERE channel_id = ? AND member = ?",
            [Columns.blob(channel.uuid), user.rawValue]) != nil
    }

    /// The members of `channel`, in user id order.
    package func channelMembers(of channel: ChannelID) throws(StorageError) -> [UserID] {
        try db.rows(
            "SELECT member FROM channel_members WHERE channel_id = ? ORDER BY member", [Columns.blob(channel.uuid)]
        ).map { row throws(StorageError) in try Columns.user(row, 0) }
    }

    /// The live channels `user` is a member of, in id order.
    package func channels(of user: UserID) throws(StorageError) -> [ChannelRecord] {
        try db.rows(
            """
            SELECT c.id, c.name, c.creator, c.created_at, c.head, c.member_count, c.deleted
            FROM channel_members m JOIN channels c ON c.id = m.channel_id
            WHERE m.member = ? AND c.deleted = 0 ORDER BY c.id
            """, [user.rawValue]
        ).map { row throws(StorageError) in
            guard let uuid = row.uuid(0) else { throw StorageError(.corrupt, "channels.id is not an identifier") }
            return try Self.channelRecord(ChannelID(uuid: uuid), row, from: 1)
        }
    }

    /// Up to `limit` messages of `channel`'s log after `after`, in log order: one range read of
    /// the log's primary key.
    package func channelLog(_ channel: ChannelID, after: UInt64, limit: Int) throws(StorageError) -> [ChannelMessage] {
        let after = try Columns.int64(after, "a log cursor")
        return try db.rows(
            """
            SELECT log_seq, id, sender, sent_at, pos_physical, pos_logical, pos_node, body FROM channel_messages
            WHERE channel_id = ? AND log_seq > ? ORDER BY log_seq LIMIT ?
            """, [Columns.blob(channel.uuid), after, limit]
        ).map { row throws(StorageError) in try Self.channelMessage(channel, row) }
    }

    /// The stored message with id `id` of any channel (a retried send is answered from it).
    package func channelMessage(_ id: MessageID) throws(StorageError) -> ChannelMessage? {
        guard
            let row = try db.row(
                """
                SELECT log_seq, id, sender, sent_at, pos_physical, pos_logical, pos_node, body, channel_id
                FROM channel_messages WHERE id = ?
                """, [Columns.blob(id.uuid)])
        else { return nil }
        guard let channel = row.uuid(8) else { throw StorageError(.corrupt, "channel_messages.channel_id") }
        return try Self.channelMessage(ChannelID(uuid: channel), row)
    }

    private static func channelMessage(_ channel: ChannelID, _ row: SQLRow) throws(StorageError) -> ChannelMessage {
        guard let uuid = row.uuid(1), let body = row.bytes(7) else {
            throw StorageError(.corrupt, "a channel_messages row lacks its id or body")
        }
        let parts: [MessagePart]
        do { parts = try MessageBodyCoding.decode(body).parts } catch {
            throw StorageError(.corrupt, "channel message \(uuid) has an unreadable body: \(error.reason)")
        }
        return ChannelMessage(
            id: MessageID(uuid: uuid), channelID: channel, sender: try Columns.user(row, 2),
            sentAt: Timestamp(millisecondsSince1970: row.int64(3)), position: try Columns.hlc(row, from: 4),
            logSeq: UInt64(max(0, row.int64(0))), parts: parts)
    }
}

/// Rows the store holds, for benchmarks of what a message costs (their differences): channel
/// messages, feed entries (those in the feed tail and those moved out of it), conversation
/// messages, and the replication log's operations (one per replicated command).
package struct StoredRowCounts: Sendable {
    package var channelMessages: Int64
    package var feedEntries: Int64
    package var messages: Int64
    package var operations: Int64

    package init(channelMessages: Int64, feedEntries: Int64, messages: Int64, operations: Int64) {
        self.channelMessages = channelMessages
        self.feedEntries = feedEntries
        self.messages = messages
        self.operations = operations
    }

    /// The rows written between `earlier` and these counts.
    package func since(_ earlier: StoredRowCounts) -> StoredRowCounts {
        StoredRowCounts(
            channelMessages: channelMessages - earlier.channelMessages, feedEntries: feedEntries - earlier.feedEntries,
            messages: messages - earlier.messages, operations: operations - earlier.operations)
    }
}

extension StorageReader {
    /// See ``StoredRowCounts`` (four full counts: for benchmarks, not the serving path).
    package func storedRowCounts() throws(StorageError) -> StoredRowCounts {
        StoredRowCounts(
            channelMessages: try db.int64("SELECT count(*) FROM channel_messages") ?? 0,
            feedEntries: try db.int64("SELECT (SELECT count(*) FROM feed_entries) + (SELECT count(*) FROM feed_tail)")
                ?? 0,
            messages: try db.int64("SELECT count(*) FROM messages") ?? 0,
            operations: try db.int64("SELECT count(*) FROM replication_log") ?? 0)
    }
}
