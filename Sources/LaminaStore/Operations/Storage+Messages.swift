import Foundation
import LaminaMerge
import LaminaModel
import LaminaWire

/// Which messages of a conversation a history query returns. Results are always in
/// ascending position order.
package enum HistoryQuery: Hashable, Sendable {
    /// Every message after `position` (from the start when nil), at most `limit`.
    case complete(after: MessagePosition?, limit: Int)
    /// The last `count` messages.
    case last(Int)
    /// The messages after the user's read marker (all when none), at most `limit`.
    case unread(limit: Int)
    /// The last `count` messages before `before` (and after `after`, when given): one page
    /// backwards, read newest first from the position index.
    case lastBefore(MessagePosition, after: MessagePosition?, count: Int)
}

/// A message as stored, with what replication needs.
package struct MessageRecord: Hashable, Sendable {
    package var message: Message
    package var origin: NodeID
    package var hlc: HLCTimestamp
    package var isDeleted: Bool
}

/// What a retried SEND_MESSAGE needs of the message it already sent.
package struct SendRecord: Hashable, Sendable {
    package var sender: UserID
    package var conversation: ConversationID
    package var position: MessagePosition
    package var sentAt: Timestamp
    /// The SHA-256 of the command's encoding; nil for messages stored before v3 or
    /// replicated from another node.
    package var requestDigest: [UInt8]?
}

extension StorageTransaction {
    /// Appends a message whose position and `sentAt` the caller assigned, as one row (its
    /// parts and push configuration are one body; content references are also indexed by
    /// content id). Statuses in `message.recipientStatus` above what the status rule derives
    /// anyway (`sent` for others, `read` for the sender) are recorded. Refuses a message id
    /// that exists (`.alreadyExists`), a position another message of the conversation holds
    /// (`.positionTaken`) and a conversation that is missing or retired. Returns whether this
    /// is the first message accepted into the conversation.
    @discardableResult
    package func appendMessage(_ message: Message, hlc: HLCTimestamp, origin: NodeID, requestDigest: [UInt8]? = nil)
        throws(StorageError) -> Bool
    {
        do { try message.validate() } catch { throw error.storageError }
        guard let position = message.position, let sentAt = message.sentAt else {
            throw StorageError(
                .invalidArgument,
                "message \(message.id) has no position or sentAt; the node assigns both before storing")
        }
        if let requestDigest, requestDigest.count != 32 {
            throw StorageError(.invalidArgument, "a request digest is 32 bytes, got \(requestDigest.count)")
        }
        let body: [UInt8]
        do {
            body = try MessageBodyCoding.encode(
                parts: message.parts, push: message.push, mentions: message.mentions, replyTo: message.replyTo)
        } catch {
            throw StorageError(.invalidArgument, "message \(message.id) cannot be encoded: \(error.reason)")
        }
        try checkBlob(body, "a message body")
        let (pp, pl, pn) = try Columns.hlc(position)
        let (hp, hl, hn) = try Columns.hlc(hlc)
        guard let header = try conversationHeader(message.conversationID), header.isLive else {
            _ = try requireLive(message.conversationID)
            throw StorageError(.notFound, "no conversation \(message.conversationID)")
        }
        let statements = try statements
        var isFirst = false
        if !cache.holdsMessages(header.id) {
            statements.anyMessage.bind(1, header.id.uuid)
            isFirst = try statements.anyMessage.run() == nil
        }
        // The message row is the first write: when its id is taken nothing has been written
        // yet, so the caller may answer a retry from the existing row.
        let insert = statements.insertMessage
        insert.bind(1, message.id.uuid)
        insert.bind(2, message.conversationID.uuid)
        insert.bind(3, message.sender.rawValue)
        insert.bind(4, pp)
        insert.bind(5, pl)
        insert.bind(6, pn)
        insert.bind(7, sentAt.millisecondsSince1970)
        insert.bind(8, body)
        insert.bind(9, requestDigest)
        insert.bind(10, Columns.node(origin))
        insert.bind(11, hp)
        insert.bind(12, hl)
        insert.bind(13, hn)
        let searchText = MessageSearchSchema.indexedText(of: message.parts)
        if db.dialect == .postgres { insert.bind(14, searchText ?? "") }
        // A taken id or position inserts nothing (and raises no error, which on PostgreSQL
        // would abort the transaction: the caller reads the existing row next).
        guard try insert.runInsert() else {
            if try db.int64("SELECT 1 FROM messages WHERE id = ?", [Columns.blob(message.id.uuid)]) != nil {
                throw StorageError(.alreadyExists, "message \(message.id) exists")
            }
            throw StorageError(
                .positionTaken, "position \(position) of \(message.conversationID) is held by another message")
        }
        try indexInsertedMessage(text: searchText, in: message.conversationID)
        cache.rememberHoldsMessages(header.id)
        try countAppended(message.id, sender: message.sender, in: message.conversationID, at: (pp, pl, pn))
        try indexContentReferences(of: message.id, message.parts)
        if let root = message.replyTo { try indexReply(message.id, to: root, at: (pp, pl, pn)) }
        for (user, status) in message.recipientStatus.sorted(by: { $0.key < $1.key })
        where user != message.sender && status > .sent {
            _ = try recordStatus(status, of: message.id, for: user)
        }
        return isFirst
    }

    /// Indexes the content references among `parts` by content id (download authorization).
    func indexContentReferences(of message: MessageID, _ parts: [MessagePart]) throws(StorageError) {
        let id = Columns.blob(message.uuid)
        for (index, part) in parts.enumerated() {
            guard case .external(let ref) = part.content else { continue }
            try db.run(
                "INSERT INTO message_parts (message_id, idx, part_id, mime_type, content_id, content_size, content_sha256) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    id, index, Columns.blob(part.id), part.mimeType.rawValue, Columns.blob(ref.id.uuid),
                    try Columns.int64(ref.size, "content size"), Data(ref.sha256),
                ]
            )
        }
    }

    /// Marks a message deleted for every participant; history no longer returns it.
    package func deleteMessage(_ message: MessageID) throws(StorageError) {
        guard
            let row = try db.row(
                "SELECT conversation_id, sender, deleted FROM messages WHERE id = ?", [Columns.blob(message.uuid)])
        else {
            throw StorageError(.notFound, "no message \(message)")
        }
        let deleted: Bool = row["deleted"]
        if !deleted {
            let conversation: Data? = row["conversation_id"]
            try countDeleting(
                message, sender: try Columns.user(row, "sender"),
                in: ConversationID(uuid: try Columns.uuid(conversation, column: "conversation_id")))
        }
        try db.run("UPDATE messages SET deleted = 1 WHERE id = ?", [Columns.blob(message.uuid)])
        guard db.changesCount == 1 else { throw StorageError(.notFound, "no message \(message)") }
        if !deleted { try unindexMessage(message) }
        try dropReactions(of: message)
    }

    /// Marks deleted every message of the conversation positioned before `position` (one
    /// range update). Returns how many were deleted now.
    @discardableResult
    package func deleteMessages(of conversation: ConversationID, before position: MessagePosition) throws(StorageError)
        -> Int
    {
        try unindexMessages(of: conversation, before: position)
        let (p, l, n) = try Columns.hlc(position)
        try db.run(
            "UPDATE messages SET deleted = 1 WHERE conversation_id = ? AND deleted = 0 AND (pos_physical, pos_logical, pos_node) < (?, ?, ?)",
            [Columns.blob(conversation.uuid), p, l, n]
        )
        let deleted = db.changesCount
        if deleted > 0 {
            try recountConversation(conversation)
            try dropReactionsOfDeletedMessages(in: conversation)
        }
        return deleted
    }
}

extension StorageReader {
    /// A message by id, deleted or not.
    package func message(_ id: MessageID) throws(StorageError) -> MessageRecord? {
        guard
            let row = try db.row(
                "SELECT \(MessageStatuses.columns()) FROM messages WHERE id = ?", [Columns.blob(id.uuid)])
        else { return nil }
        var statuses = MessageStatuses(reader: self)
        return try statuses.storedMessage(row)
    }

    /// What a retry of the SEND_MESSAGE that created message `id` needs, if it exists.
    package func sendRecord(_ id: MessageID) throws(StorageError) -> SendRecord? {
        guard
            let row = try db.row(
                "SELECT sender, conversation_id, pos_physical, pos_logical, pos_node, sent_at, request_digest FROM messages WHERE id = ?",
                [Columns.blob(id.uuid)]
            )
        else { return nil }
        let conversation: Data? = row["conversation_id"]
        let digest: Data? = row["request_digest"]
        return SendRecord(
            sender: try Columns.user(row, "sender"),
            conversation: ConversationID(uuid: try Columns.uuid(conversation, column: "conversation_id")),
            position: try Columns.hlc(row, "pos"),
            sentAt: try Columns.timestamp(row, "sent_at"),
            requestDigest: digest.map { [UInt8]($0) }
        )
    }

    /// The position of the conversation's latest message, deleted or not (nil when it has none).
    package func lastPosition(of conversation: ConversationID) throws(StorageError) -> MessagePosition? {
        var last: MessagePosition?
        try db.eachRow(
            "SELECT pos_physical, pos_logical, pos_node FROM messages WHERE conversation_id = ? ORDER BY pos_physical DESC, pos_logical DESC, pos_node DESC LIMIT 1",
            bind: { $0.bind(1, conversation.uuid) }
        ) { (row) throws(StorageError) in last = try Columns.hlc(row, from: 0) }
        return last
    }

    /// A page of a conversation's history as `user` may see it: all of it while they take part;
    /// after their removal, only what was positioned before the removal. Deleted messages are
    /// left out, and (SPEC §6.4, the block rule) so are the messages of senders the user
    /// blocks now, unless `hidingBlocked` is false (the Server API's view as the system).
    /// Throws `.notAParticipant` if the user never took part.
    package func history(
        of conversation: ConversationID, for user: UserID, _ policy: HistoryQuery, hidingBlocked: Bool = true
    ) throws(StorageError) -> [Message] {
        guard let state = try participantState(of: user, in: conversation) else {
            throw StorageError(.notAParticipant, "\(user) never took part in \(conversation)")
        }
        let cutoff = state.isMember ? nil : state.since
        var sql = "SELECT \(MessageStatuses.columns()) FROM messages WHERE conversation_id = ? AND deleted = 0"
        var arguments: StatementArguments = [Columns.blob(conversation.uuid)]
        if hidingBlocked {
            sql += " AND sender NOT IN (SELECT blocked FROM blocks WHERE blocker = ?)"
            arguments += [user.rawValue]
        }
        if let cutoff {
            sql += " AND (pos_physical, pos_logical, pos_node) < (?, ?, ?)"
            let (p, l, n) = try Columns.hlc(cutoff)
            arguments += [p, l, n]
        }
        var descending = false
        let limit: Int
        switch policy {
        case .complete(let after, let pageLimit):
            limit = pageLimit
            if let after {
                sql += " AND (pos_physical, pos_logical, pos_node) > (?, ?, ?)"
                let (p, l, n) = try Columns.hlc(after)
                arguments += [p, l, n]
            }
        case .last(let count):
            limit = count
            descending = true
        case .unread(let pageLimit):
            limit = pageLimit
            if let marker = try readUpTo(conversation: conversation, user: user) {
                sql += " AND (pos_physical, pos_logical, pos_node) > (?, ?, ?)"
                let (p, l, n) = try Columns.hlc(marker)
                arguments += [p, l, n]
            }
        case .lastBefore(let before, let after, let count):
            limit = count
            descending = true
            sql += " AND (pos_physical, pos_logical, pos_node) < (?, ?, ?)"
            let (p, l, n) = try Columns.hlc(before)
            arguments += [p, l, n]
            if let after {
                sql += " AND (pos_physical, pos_logical, pos_node) > (?, ?, ?)"
                let (p, l, n) = try Columns.hlc(after)
                arguments += [p, l, n]
            }
        }
        try checkLimit(limit)
        let order = descending ? "DESC" : "ASC"
        sql += " ORDER BY pos_physical \(order), pos_logical \(order), pos_node \(order) LIMIT ?"
        arguments += [limit]
        var rows = try db.rows(sql, arguments)
        if descending { rows.reverse() }
        var statuses = MessageStatuses(reader: self, viewer: user)
        return try rows.map { (row) throws(StorageError) in try statuses.storedMessage(row).message }
    }

    /// How many messages the user can see and has not read (messages of senders the user
    /// blocks are not counted, SPEC §6.4): the stored count. With `scanning`, decided message
    /// by message with `UnreadCounts.isUnread` over the newest that many messages after the
    /// user's read marker (the only ones that can be unread).
    package func unreadCount(of conversation: ConversationID, for user: UserID, scanning limit: Int? = nil)
        throws(StorageError) -> Int
    {
        // Exact and one row: the stored counter (`StoredCounts`), kept by every change that moves it.
        guard let limit else { return try storedUnread(of: user, in: conversation) }
        guard let state = try participantState(of: user, in: conversation) else { return 0 }
        let readUpTo = try readUpTo(conversation: conversation, user: user)
        var sql = """
            SELECT m.sender, m.pos_physical, m.pos_logical, m.pos_node, m.deleted, s.status
            FROM messages m LEFT JOIN recipient_status s ON s.message_id = m.id AND s.user_id = ?
            WHERE m.conversation_id = ? AND m.sender NOT IN (SELECT blocked FROM blocks WHERE blocker = ?)
            """
        var arguments: StatementArguments = [user.rawValue, Columns.blob(conversation.uuid), user.rawValue]
        if let readUpTo {
            sql += " AND (m.pos_physical, m.pos_logical, m.pos_node) > (?, ?, ?)"
            let (p, l, n) = try Columns.hlc(readUpTo)
            arguments += [p, l, n]
        }
        sql += " ORDER BY m.pos_physical DESC, m.pos_logical DESC, m.pos_node DESC LIMIT ?"
        arguments += [limit]
        var unread = 0
        // The rule looks at sender and position; the id does not matter here.
        let anyID = MessageID(uuid: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        for row in try db.rows(sql, arguments) {
            let position = try Columns.hlc(row, "pos")
            let raw: Int64? = row["status"]
            let stamp = MessageStamp(
                id: anyID, conversation: conversation, sender: try Columns.user(row, "sender"), position: position)
            let visible = state.isMember || position < state.since
            if UnreadCounts.isUnread(
                stamp, for: user, deleted: row["deleted"], visible: visible,
                recorded: raw.flatMap { RecipientStatus(rawValue: Int8(clamping: $0)) }, readUpTo: readUpTo
            ) {
                unread += 1
            }
        }
        return unread
    }

    /// Unread counts of every conversation the user takes part in now (zero counts included).
    package func unreadCounts(for user: UserID) throws(StorageError) -> [ConversationID: Int] {
        var out: [ConversationID: Int] = [:]
        for conversation in try conversations(of: user) {
            out[conversation.conversation.id] = try unreadCount(of: conversation.conversation.id, for: user)
        }
        return out
    }

    /// How many messages a conversation holds (deleted ones left out): its stored counters.
    package func messageCount(of conversation: ConversationID) throws(StorageError) -> Int {
        try storedMessageCount(of: conversation)
    }
}

/// Decodes message rows and derives each participant's recipient status through
/// `RecipientStatusLattice.status(of:for:recorded:deliveredUpTo:readUpTo:)` from the slice
/// of state the store keeps: the conversation's current participants, each user's delivered
/// and read positions (loaded once per conversation per read) and the statuses recorded for
/// that message alone.
struct MessageStatuses {
    let reader: StorageReader
    /// Whose view the statuses are (`RecipientStatusLattice.reported`: with receipts disabled
    /// a viewer sees only their own status); nil for every status as it is.
    let viewer: UserID?
    private var conversations: [ConversationID: ConversationStatusSlice] = [:]

    init(reader: StorageReader, viewer: UserID? = nil) {
        self.reader = reader
        self.viewer = viewer
    }

    struct ConversationStatusSlice {
        var participants: Set<UserID>
        /// `participants` in ascending order (the order a message's statuses are encoded in).
        var sortedParticipants: [UserID]
        var deliveryReceipts: Bool
        var readReceipts: Bool
        var delivered: [UserID: MessagePosition]
        var read: [UserID: MessagePosition]
    }

    mutating func slice(of conversation: ConversationID) throws(StorageError) -> ConversationStatusSlice {
        if let cached = conversations[conversation] { return cached }
        let switches = try reader.db.int64(
            "SELECT delivery_receipts_enabled + 2 * read_receipts_enabled FROM conversations WHERE id = ?",
            [Columns.blob(conversation.uuid)])
        let participants = try reader.participants(of: conversation)
        let slice = ConversationStatusSlice(
            participants: participants,
            sortedParticipants: participants.sorted(),
            deliveryReceipts: switches.map { $0 & 1 != 0 } ?? true,
            readReceipts: switches.map { $0 & 2 != 0 } ?? true,
            delivered: try reader.markers(StatusMarker.delivered.rawValue, of: conversation),
            read: try reader.markers(StatusMarker.read.rawValue, of: conversation)
        )
        conversations[conversation] = slice
        return slice
    }

    /// The columns `storedMessage` reads, in its order (select them as `m.` or bare).
    static func columns(_ table: String = "") -> String {
        let t = table.isEmpty ? "" : table + "."
        return [
            "id", "conversation_id", "sender", "pos_physical", "pos_logical", "pos_node", "sent_at", "body",
            "origin_node",
            "hlc_physical", "hlc_logical", "hlc_node", "deleted",
        ].map { t + $0 }.joined(separator: ", ")
    }

    /// The message in `row`, whose columns from `offset` on are `columns()`. `recorded`: the
    /// statuses recorded for this message alone when the caller read them with others (nil:
    /// read them now).
    mutating func storedMessage(
        _ row: some ColumnRow, at offset: Int = 0, recorded recordedGiven: [UserID: RecipientStatus]? = nil
    ) throws(StorageError) -> MessageRecord {
        let (stamp, position, bodyBytes) = try Self.stamp(row, at: offset)
        let (id, conversation, sender) = (stamp.id, stamp.conversation, stamp.sender)
        let body: (parts: [MessagePart], push: PushConfiguration?, mentions: Set<UserID>, replyTo: MessageID?)
        do { body = try MessageBodyCoding.decode(bodyBytes) } catch {
            throw StorageError(.corrupt, "the body of message \(id) does not decode: \(error.reason)")
        }
        let recorded: [UserID: RecipientStatus]
        if let given = recordedGiven {
            recorded = given
        } else {
            recorded = try reader.recordedStatuses(of: Columns.blob(id.uuid))
        }
        let slice = try slice(of: conversation)
        var statuses: [UserID: RecipientStatus] = [:]
        statuses.reserveCapacity(slice.participants.count + 1)
        for user in slice.participants { statuses[user] = status(of: stamp, for: user, recorded, slice) }
        for user in Self.others(than: slice, sender: sender, recorded: recorded) {
            statuses[user] = status(of: stamp, for: user, recorded, slice)
        }
        let sentAt = row.int64(offset + 6)
        let origin = row.int64(offset + 8)
        let message = Message(
            id: id, conversationID: conversation, sender: sender, parts: body.parts,
            sentAt: Timestamp(millisecondsSince1970: sentAt), position: position, push: body.push,
            recipientStatus: statuses, replyTo: body.replyTo, mentions: body.mentions
        )
        return MessageRecord(
            message: message, origin: Columns.node(origin), hlc: try Columns.hlc(row, from: offset + 9),
            isDeleted: row.int64(offset + 12) != 0)
    }

    /// The `message-created` event of the message in `row` (columns as `storedMessage` reads
    /// them), encoded for `viewer` straight from the columns: the statuses `storedMessage`
    /// gives it, the body copied (``StoredMessageEncoding``). `recorded`: this message's
    /// recorded statuses.
    mutating func storedMessageEncoding(
        _ row: some ColumnRow, at offset: Int, recorded: [UserID: RecipientStatus]
    ) throws(StorageError) -> StoredMessageEncoding {
        let (stamp, position, body) = try Self.stamp(row, at: offset)
        let (id, conversation, sender) = (stamp.id, stamp.conversation, stamp.sender)
        let slice = try slice(of: conversation)
        var users = slice.sortedParticipants
        let others = Self.others(than: slice, sender: sender, recorded: recorded)
        if !others.isEmpty {
            users += others
            users.sort()
        }
        var statuses: [(user: UserID, status: RecipientStatus)] = []
        statuses.reserveCapacity(users.count)
        for user in users { statuses.append((user, status(of: stamp, for: user, recorded, slice))) }
        do {
            return try StoredMessageEncoding(
                id: id, conversationID: conversation, sender: sender,
                sentAt: Timestamp(millisecondsSince1970: row.int64(offset + 6)), position: position, body: body,
                statuses: statuses)
        } catch {
            throw StorageError(.corrupt, "message \(id) cannot be sent as stored: \(error.reason)")
        }
    }

    /// The id, conversation, sender and position of the message in `row` (columns from
    /// `offset` on as `columns()`), and its stored body.
    private static func stamp(_ row: some ColumnRow, at offset: Int) throws(StorageError) -> (
        MessageStamp, MessagePosition, [UInt8]
    ) {
        guard let idUUID = row.uuid(offset) else {
            throw StorageError(.corrupt, "column id does not hold a 16-byte identifier")
        }
        let id = MessageID(uuid: idUUID)
        guard let conversationUUID = row.uuid(offset + 1) else {
            throw StorageError(.corrupt, "column conversation_id does not hold a 16-byte identifier")
        }
        guard let body = row.bytes(offset + 7) else { throw StorageError(.corrupt, "message \(id) has no body") }
        let position = try Columns.hlc(row, from: offset + 3)
        let stamp = MessageStamp(
            id: id, conversation: ConversationID(uuid: conversationUUID), sender: try Columns.user(row, offset + 2),
            position: position)
        return (stamp, position, body)
    }

    /// Who has a status of a message besides the conversation's participants: the sender (a
    /// system sender, SPEC §3.9, is no recipient: it has no status of its own) and whoever has
    /// a recorded status, each once.
    private static func others(
        than slice: ConversationStatusSlice, sender: UserID, recorded: [UserID: RecipientStatus]
    ) -> [UserID] {
        var others: [UserID] = []
        let senderCounts = !sender.isSystemSender && !slice.participants.contains(sender)
        if senderCounts { others.append(sender) }
        for user in recorded.keys where !slice.participants.contains(user) && !(senderCounts && user == sender) {
            others.append(user)
        }
        return others
    }

    /// `user`'s status of the message `stamp`, as `viewer` is shown it.
    private func status(
        of stamp: MessageStamp, for user: UserID, _ recorded: [UserID: RecipientStatus],
        _ slice: ConversationStatusSlice
    ) -> RecipientStatus {
        let status = RecipientStatusLattice.status(
            of: stamp, for: user, recorded: recorded[user], deliveredUpTo: slice.delivered[user],
            readUpTo: slice.read[user])
        return viewer.map {
            RecipientStatusLattice.reported(
                status, of: user, viewer: $0, deliveryReceipts: slice.deliveryReceipts, readReceipts: slice.readReceipts
            )
        } ?? status
    }
}

extension Columns {
    /// A `message_parts` row (a content reference; inline parts before v3).
    static func part(_ row: Row) throws(StorageError) -> MessagePart {
        let partID: Data? = row["part_id"]
        let mimeString: String = row["mime_type"]
        let mime: MIMEType
        do { mime = try MIMEType(mimeString) } catch {
            throw StorageError(.corrupt, "bad stored MIME type '\(mimeString)'")
        }
        let content: PartContent
        if let bytes: Data = row["inline_bytes"] {
            content = .inline([UInt8](bytes))
        } else {
            let contentID: Data? = row["content_id"]
            let size: Int64? = row["content_size"]
            guard let size, size >= 0 else { throw StorageError(.corrupt, "a content reference has no size") }
            content = .external(
                ContentReference(
                    id: ContentID(uuid: try Columns.uuid(contentID, column: "content_id")),
                    size: UInt64(size),
                    sha256: try Columns.bytes(row, "content_sha256")
                ))
        }
        return MessagePart(id: try Columns.uuid(partID, column: "part_id"), mimeType: mime, content: content)
    }
}
