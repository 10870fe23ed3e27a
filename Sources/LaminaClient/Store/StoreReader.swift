import Foundation
import GRDB
import LaminaMerge
import LaminaModel

/// Loads model objects from rows. Used inside read and write transactions alike.
enum StoreReader {
    /// The most merges followed from one identifier to its survivor.
    static let maxMergeHops = 32

    /// The ORDER BY of messages by position; messages without one (not sent) come last,
    /// in the order they were stored.
    static func positionOrder(descending: Bool, table: String = "message") -> String {
        let d = descending ? " DESC" : ""
        return
            "(\(table).pos_physical IS NULL)\(d), \(table).pos_physical\(d), \(table).pos_logical\(d), \(table).pos_node\(d), \(table).rowid\(d)"
    }

    /// Follows `merged_into` links to the surviving conversation (at most `maxMergeHops`).
    static func resolve(_ db: Database, _ id: ConversationID) throws -> ConversationID {
        var current = id
        for _ in 0..<maxMergeHops {
            guard
                let next = try Data.fetchOne(
                    db.cachedStatement(sql: "SELECT merged_into FROM conversation WHERE id = ?"),
                    arguments: [StoreCoding.blob(current)])
            else {
                return current
            }
            current = ConversationID(uuid: StoreCoding.uuid(next))
        }
        throw ClientError(.corruptRecord, "conversation \(id) has a chain of more than \(maxMergeHops) merges")
    }

    /// Whether the row of `id` exists and is a tombstone of a merge.
    static func isMerged(_ db: Database, _ id: ConversationID) throws -> Bool {
        try Bool.fetchOne(
            db.cachedStatement(sql: "SELECT merged_into IS NOT NULL FROM conversation WHERE id = ?"),
            arguments: [StoreCoding.blob(id)]) ?? false
    }

    /// Whether a live (not merged-away) conversation `id` is here, without loading it.
    static func isLive(_ db: Database, _ id: ConversationID) throws -> Bool {
        try Bool.fetchOne(
            db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM conversation WHERE id = ? AND merged_into IS NULL)"),
            arguments: [StoreCoding.blob(id)]) ?? false
    }

    /// A live (not merged-away) conversation, or nil.
    static func conversation(_ db: Database, _ id: ConversationID) throws -> StoredConversation? {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM conversation WHERE id = ? AND merged_into IS NULL"),
                arguments: [StoreCoding.blob(id)])
        else {
            return nil
        }
        return try conversation(db, row: row)
    }

    static func conversation(_ db: Database, row: Row) throws -> StoredConversation {
        let id = ConversationID(uuid: try StoreCoding.uuid(row, "id"))
        let users = try String.fetchAll(
            db.cachedStatement(sql: "SELECT user_id FROM participant WHERE conversation_id = ?"),
            arguments: [StoreCoding.blob(id)])
        var participants = Set<UserID>()
        for raw in users { participants.insert(try StoreCoding.user(raw)) }
        let metadataData: Data = row["metadata"]
        let conversation = Conversation(
            id: id,
            participants: participants,
            isDistinct: row["is_distinct"],
            metadata: try StoreCoding.decodeMetadata(metadataData),
            deliveryReceiptsEnabled: row["receipts_enabled"],
            readReceiptsEnabled: row["read_receipts_enabled"] as Bool,
            createdAt: Timestamp(millisecondsSince1970: row["created_at"]),
            creator: try StoreCoding.user(row["creator"]))
        var nodeCounts: NodeCounts?
        if let total = row["node_total"] as Int?, let unread = row["node_unread"] as Int? {
            nodeCounts = NodeCounts(
                messages: total, unread: unread,
                lastMessageID: try StoreCoding.optionalUUID(row, "node_last_message_id").map(MessageID.init(uuid:)))
        }
        var stored = StoredConversation(
            conversation: conversation,
            isSynced: row["is_synced"],
            lastMessageID: try StoreCoding.optionalUUID(row, "last_message_id").map(MessageID.init(uuid:)),
            totalMessageCount: row["total_count"],
            unreadMessageCount: row["unread_count"],
            nodeCounts: nodeCounts,
            totalNumberOfMessages: row["number_of_messages"],
            totalNumberOfUnreadMessages: row["number_of_unread"])
        stored.notificationLevel =
            NotificationLevel(rawValue: UInt8(clamping: row["notification_level"] as Int)) ?? .all
        stored.notificationLevelUntil = (row["notification_until"] as Int64?).map(
            Timestamp.init(millisecondsSince1970:))
        return stored
    }

    static func message(_ db: Database, _ id: MessageID) throws -> StoredMessage? {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM message WHERE id = ?"), arguments: [StoreCoding.blob(id)])
        else { return nil }
        return try message(db, row: row)
    }

    static func message(_ db: Database, row: Row) throws -> StoredMessage {
        let id = MessageID(uuid: try StoreCoding.uuid(row, "id"))
        let key = StoreCoding.blob(id)
        var parts: [MessagePart] = []
        var states: [PartState] = []
        for p in try Row.fetchAll(
            db.cachedStatement(sql: "SELECT * FROM part WHERE message_id = ? ORDER BY idx"), arguments: [key])
        {
            let partID = try StoreCoding.uuid(p, "part_id")
            let content: PartContent
            if let bytes = p["inline_bytes"] as Data? {
                content = .inline([UInt8](bytes))
            } else {
                guard let contentID = try StoreCoding.optionalUUID(p, "content_id"),
                    let size = p["content_size"] as Int64?,
                    let sha = p["content_sha256"] as Data?
                else {
                    throw ClientError(.corruptRecord, "part \(partID) has neither inline bytes nor a content reference")
                }
                content = .external(
                    ContentReference(id: ContentID(uuid: contentID), size: UInt64(size), sha256: [UInt8](sha)))
            }
            parts.append(MessagePart(id: partID, mimeType: try StoreCoding.mime(p["mime_type"]), content: content))
            guard let status = TransferStatus(rawValue: p["transfer_status"]) else {
                throw ClientError(.corruptRecord, "part \(partID) has an unknown transfer status")
            }
            states.append(
                PartState(
                    partID: partID, transferStatus: status, localPath: p["local_path"],
                    lastAccess: (p["last_access"] as Int64?).map(Timestamp.init(millisecondsSince1970:)),
                    autoDownloaded: p["auto_downloaded"], purged: p["purged"]))
        }
        var statuses: [UserID: RecipientStatus] = [:]
        for s in try Row.fetchAll(
            db.cachedStatement(sql: "SELECT user_id, status FROM recipient_status WHERE message_id = ?"),
            arguments: [key])
        {
            guard let status = RecipientStatus(rawValue: Int8(clamping: s["status"] as Int)) else {
                throw ClientError(.corruptRecord, "message \(id) has an unknown recipient status")
            }
            statuses[try StoreCoding.user(s["user_id"])] = status
        }
        var message = Message(
            id: id,
            conversationID: ConversationID(uuid: try StoreCoding.uuid(row, "conversation_id")),
            sender: try StoreCoding.user(row["sender"]),
            parts: parts,
            sentAt: (row["sent_at"] as Int64?).map(Timestamp.init(millisecondsSince1970:)),
            position: try StoreCoding.position(
                physical: row["pos_physical"], logical: row["pos_logical"], node: row["pos_node"]),
            push: try StoreCoding.decodePush(row["push"]),
            recipientStatus: statuses, mentions: try StoredMentions.mentions(db, of: key))
        (message.replyTo, message.thread) = try StoredThreads.fields(row)
        var stored = StoredMessage(
            message: message,
            receivedAt: (row["received_at"] as Int64?).map(Timestamp.init(millisecondsSince1970:)),
            isUnread: row["is_unread"],
            partStates: states,
            reactions: try StoredReactions.reactions(db, id))
        stored.editedAt = (row["edited_at"] as Int64?).map(Timestamp.init(millisecondsSince1970:))
        return stored
    }
}
