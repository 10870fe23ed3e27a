import Foundation
import GRDB
import LaminaModel

/// Which messages of a conversation a history query returns. Results are always in
/// ascending position order.
public enum HistoryPolicy: Hashable, Sendable {
    /// Every message after `position` (from the start when nil), at most `limit`.
    case complete(after: MessagePosition?, limit: Int)
    /// The last `count` messages.
    case last(Int)
    /// The messages after the user's read marker (all when none), at most `limit`.
    case unread(limit: Int)
}

/// A message as stored, with what replication needs.
public struct StoredMessage: Hashable, Sendable {
    public var message: Message
    public var origin: NodeID
    public var hlc: HLCTimestamp
    public var isDeleted: Bool
}

extension StorageTransaction {
    /// Appends a message whose position and `sentAt` the caller assigned. Its
    /// `recipientStatus` entries are stored as the initial statuses. Refuses a message id that
    /// exists (`.alreadyExists`) and a position another message of the conversation holds
    /// (`.positionTaken`).
    public func appendMessage(_ message: Message, hlc: HLCTimestamp, origin: NodeID) throws(StorageError) {
        do { try message.validate() } catch { throw error.storageError }
        guard let position = message.position, let sentAt = message.sentAt else {
            throw StorageError(.invalidArgument, "message \(message.id) has no position or sentAt; the node assigns both before storing")
        }
        _ = try requireLive(message.conversationID)
        let id = Columns.blob(message.id.uuid)
        let conversation = Columns.blob(message.conversationID.uuid)
        guard try db.int64("SELECT 1 FROM messages WHERE id = ?", [id]) == nil else {
            throw StorageError(.alreadyExists, "message \(message.id) exists")
        }
        let (pp, pl, pn) = try Columns.hlc(position)
        guard try db.int64(
            "SELECT 1 FROM messages WHERE conversation_id = ? AND pos_physical = ? AND pos_logical = ? AND pos_node = ?",
            [conversation, pp, pl, pn]
        ) == nil else {
            throw StorageError(.positionTaken, "position \(position) of \(message.conversationID) is held by another message")
        }
        let (hp, hl, hn) = try Columns.hlc(hlc)
        let push = message.push
        let pushData: Data?
        if let data = push?.data, !data.isEmpty {
            do { pushData = try JSONSerialization.data(withJSONObject: data, options: [.sortedKeys]) } catch {
                throw StorageError(.invalidArgument, "push data cannot be encoded: \(error)")
            }
        } else {
            pushData = nil
        }
        try db.run(
            """
            INSERT INTO messages (id, conversation_id, sender, pos_physical, pos_logical, pos_node, sent_at,
                push_alert, push_sound, push_title, push_category, push_data, has_push,
                origin_node, hlc_physical, hlc_logical, hlc_node)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [id, conversation, message.sender.rawValue, pp, pl, pn, sentAt.millisecondsSince1970,
             push?.alert, push?.sound, push?.title, push?.category, pushData, push != nil,
             Columns.node(origin), hp, hl, hn]
        )
        for (index, part) in message.parts.enumerated() {
            switch part.content {
            case .inline(let bytes):
                try db.run(
                    "INSERT INTO message_parts (message_id, idx, part_id, mime_type, inline_bytes) VALUES (?, ?, ?, ?, ?)",
                    [id, index, Columns.blob(part.id), part.mimeType.rawValue, Data(bytes)]
                )
            case .external(let ref):
                try db.run(
                    "INSERT INTO message_parts (message_id, idx, part_id, mime_type, content_id, content_size, content_sha256) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [id, index, Columns.blob(part.id), part.mimeType.rawValue, Columns.blob(ref.id.uuid),
                     try Columns.int64(ref.size, "content size"), Data(ref.sha256)]
                )
            }
        }
        for (user, status) in message.recipientStatus.sorted(by: { $0.key < $1.key }) {
            _ = try recordStatus(status, of: message.id, for: user)
        }
    }

    /// Marks a message deleted for every participant; history no longer returns it.
    public func deleteMessage(_ message: MessageID) throws(StorageError) {
        try db.run("UPDATE messages SET deleted = 1 WHERE id = ?", [Columns.blob(message.uuid)])
        guard db.changesCount == 1 else { throw StorageError(.notFound, "no message \(message)") }
    }
}

extension StorageReader {
    /// A message by id, deleted or not.
    public func message(_ id: MessageID) throws(StorageError) -> StoredMessage? {
        guard let row = try db.row("SELECT * FROM messages WHERE id = ?", [Columns.blob(id.uuid)]) else { return nil }
        return try storedMessages([row]).first
    }

    /// A page of a conversation's history as `user` may see it: all of it while they take part;
    /// after their removal, only what was positioned before the removal. Deleted messages are
    /// left out. Throws `.notAParticipant` if the user never took part.
    public func history(of conversation: ConversationID, for user: UserID, _ policy: HistoryPolicy) throws(StorageError) -> [Message] {
        guard let state = try participantState(of: user, in: conversation) else {
            throw StorageError(.notAParticipant, "\(user) never took part in \(conversation)")
        }
        let cutoff = state.isMember ? nil : state.since
        var sql = "SELECT * FROM messages WHERE conversation_id = ? AND deleted = 0"
        var arguments: StatementArguments = [Columns.blob(conversation.uuid)]
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
        }
        try checkLimit(limit)
        let order = descending ? "DESC" : "ASC"
        sql += " ORDER BY pos_physical \(order), pos_logical \(order), pos_node \(order) LIMIT ?"
        arguments += [limit]
        var rows = try db.rows(sql, arguments)
        if descending { rows.reverse() }
        return try storedMessages(rows).map(\.message)
    }

    /// How many messages of others after the user's read marker the user can see.
    public func unreadCount(of conversation: ConversationID, for user: UserID) throws(StorageError) -> Int {
        guard let state = try participantState(of: user, in: conversation) else { return 0 }
        var sql = """
            SELECT count(*) FROM messages m
            LEFT JOIN read_markers r ON r.conversation_id = m.conversation_id AND r.user_id = ?
            WHERE m.conversation_id = ? AND m.deleted = 0 AND m.sender <> ?
              AND (r.user_id IS NULL OR (m.pos_physical, m.pos_logical, m.pos_node) > (r.pos_physical, r.pos_logical, r.pos_node))
            """
        var arguments: StatementArguments = [user.rawValue, Columns.blob(conversation.uuid), user.rawValue]
        if !state.isMember {
            sql += " AND (m.pos_physical, m.pos_logical, m.pos_node) < (?, ?, ?)"
            let (p, l, n) = try Columns.hlc(state.since)
            arguments += [p, l, n]
        }
        return Int(try db.int64(sql, arguments) ?? 0)
    }

    /// Unread counts of every conversation the user takes part in now (zero counts included).
    public func unreadCounts(for user: UserID) throws(StorageError) -> [ConversationID: Int] {
        var out: [ConversationID: Int] = [:]
        for row in try db.rows(
            """
            SELECT c.id AS id, (
                SELECT count(*) FROM messages m
                LEFT JOIN read_markers r ON r.conversation_id = m.conversation_id AND r.user_id = p.user_id
                WHERE m.conversation_id = c.id AND m.deleted = 0 AND m.sender <> p.user_id
                  AND (r.user_id IS NULL OR (m.pos_physical, m.pos_logical, m.pos_node) > (r.pos_physical, r.pos_logical, r.pos_node))
            ) AS unread
            FROM participants p JOIN conversations c ON c.id = p.conversation_id
            WHERE p.user_id = ? AND p.is_member = 1 AND c.merged_into IS NULL AND c.deleted = 0
            """,
            [user.rawValue]
        ) {
            let id: Data? = row["id"]
            out[ConversationID(uuid: try Columns.uuid(id, column: "id"))] = row["unread"]
        }
        return out
    }

    /// How many messages a conversation holds (deleted ones left out).
    public func messageCount(of conversation: ConversationID) throws(StorageError) -> Int {
        Int(try db.int64("SELECT count(*) FROM messages WHERE conversation_id = ? AND deleted = 0", [Columns.blob(conversation.uuid)]) ?? 0)
    }

    /// Decodes message rows with their parts and statuses.
    func storedMessages(_ rows: [Row]) throws(StorageError) -> [StoredMessage] {
        var out: [StoredMessage] = []
        out.reserveCapacity(rows.count)
        for row in rows {
            let idData: Data? = row["id"]
            let id = MessageID(uuid: try Columns.uuid(idData, column: "id"))
            let conversationData: Data? = row["conversation_id"]
            var push: PushConfiguration?
            if row["has_push"] as Bool {
                var data: [String: String] = [:]
                if let encoded: Data = row["push_data"] {
                    guard let decoded = try? JSONSerialization.jsonObject(with: encoded) as? [String: String] else {
                        throw StorageError(.corrupt, "push data of \(id) is not a string dictionary")
                    }
                    data = decoded
                }
                push = PushConfiguration(alert: row["push_alert"], sound: row["push_sound"], title: row["push_title"], category: row["push_category"], data: data)
            }
            let message = Message(
                id: id,
                conversationID: ConversationID(uuid: try Columns.uuid(conversationData, column: "conversation_id")),
                sender: try Columns.user(row, "sender"),
                parts: try parts(of: Columns.blob(id.uuid)),
                sentAt: try Columns.timestamp(row, "sent_at"),
                position: try Columns.hlc(row, "pos"),
                push: push,
                recipientStatus: try recipientStatus(of: id)
            )
            out.append(StoredMessage(message: message, origin: Columns.node(row["origin_node"] as Int64), hlc: try Columns.hlc(row, "hlc"), isDeleted: row["deleted"]))
        }
        return out
    }

    private func parts(of message: Data) throws(StorageError) -> [MessagePart] {
        try db.rows("SELECT * FROM message_parts WHERE message_id = ? ORDER BY idx", [message]).map { (row) throws(StorageError) -> MessagePart in
            let partID: Data? = row["part_id"]
            let mimeString: String = row["mime_type"]
            let mime: MIMEType
            do { mime = try MIMEType(mimeString) } catch { throw StorageError(.corrupt, "bad stored MIME type '\(mimeString)'") }
            let content: PartContent
            if let bytes: Data = row["inline_bytes"] {
                content = .inline([UInt8](bytes))
            } else {
                let contentID: Data? = row["content_id"]
                let size: Int64? = row["content_size"]
                guard let size, size >= 0 else { throw StorageError(.corrupt, "a content reference has no size") }
                content = .external(ContentReference(
                    id: ContentID(uuid: try Columns.uuid(contentID, column: "content_id")),
                    size: UInt64(size),
                    sha256: try Columns.bytes(row, "content_sha256")
                ))
            }
            return MessagePart(id: try Columns.uuid(partID, column: "part_id"), mimeType: mime, content: content)
        }
    }
}
