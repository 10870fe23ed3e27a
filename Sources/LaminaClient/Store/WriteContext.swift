import Foundation
import GRDB
import LaminaMerge
import LaminaModel
import LaminaWire

/// One write transaction: row-level primitives that also record the object changes they
/// make, and the conversations whose summaries (counts, last message) need refreshing
/// before commit.
final class WriteContext {
    let db: Database
    let localUser: UserID
    let contentDirectory: URL
    private(set) var changes: [ObjectChange] = []
    private(set) var retiredFiles: [URL] = []
    private var touched: [ConversationID] = []
    private var touchedSet: Set<ConversationID> = []
    private var createdHere: Set<ConversationID> = []
    /// What every message applied in this transaction reads of its conversation, read once per
    /// conversation: whether receipts are on, and the status marks (user → status → position).
    /// Kept current by the writes below; forgotten by a merge, which moves rows wholesale.
    private var receiptsCache: [ConversationID: ReceiptSwitches] = [:]
    private var marksCache: [ConversationID: [UserID: [RecipientStatus: MessagePosition]]] = [:]

    init(db: Database, store: LocalStore) {
        self.db = db
        self.localUser = store.localUser
        self.contentDirectory = store.location.contentDirectory
    }

    func record(_ change: ObjectChange) { changes.append(change) }
    func record(_ more: [ObjectChange]) { changes.append(contentsOf: more) }

    /// Marks a conversation's summary for refreshing at the end of the transaction.
    func touch(_ id: ConversationID) {
        if touchedSet.insert(id).inserted { touched.append(id) }
    }

    func retire(localPath: String?) {
        if let localPath { retiredFiles.append(contentDirectory.appendingPathComponent(localPath)) }
    }

    /// Forgets the per-conversation caches (after writes that move rows between conversations).
    func forgetCaches() {
        receiptsCache.removeAll()
        marksCache.removeAll()
    }

    /// The conversation's receipt switches (both on when it is not here).
    func receiptSwitches(_ conversation: ConversationID) throws -> ReceiptSwitches {
        if let known = receiptsCache[conversation] { return known }
        let bits =
            try Int.fetchOne(
                db.cachedStatement(
                    sql:
                        "SELECT receipts_enabled + 2 * read_receipts_enabled FROM conversation WHERE id = ? AND merged_into IS NULL"
                ),
                arguments: [StoreCoding.blob(conversation)]) ?? 3
        let switches = ReceiptSwitches(delivery: bits & 1 != 0, read: bits & 2 != 0)
        receiptsCache[conversation] = switches
        return switches
    }

    /// The conversation's status marks, read once per transaction.
    private func marks(_ conversation: ConversationID) throws -> [UserID: [RecipientStatus: MessagePosition]] {
        if let known = marksCache[conversation] { return known }
        var out: [UserID: [RecipientStatus: MessagePosition]] = [:]
        for row in try Row.fetchAll(
            db.cachedStatement(
                sql:
                    "SELECT user_id, status, pos_physical, pos_logical, pos_node FROM status_mark WHERE conversation_id = ?"
            ),
            arguments: [StoreCoding.blob(conversation)])
        {
            guard let status = RecipientStatus(rawValue: Int8(clamping: row["status"] as Int)),
                let position = try StoreCoding.position(
                    physical: row["pos_physical"], logical: row["pos_logical"], node: row["pos_node"])
            else {
                throw ClientError(.corruptRecord, "a status mark of \(conversation) is malformed")
            }
            out[try StoreCoding.user(row["user_id"]), default: [:]][status] = position
        }
        marksCache[conversation] = out
        return out
    }

    func setCursor(_ cursor: UInt64) throws {
        try db.execute(
            sql:
                "INSERT INTO store_info(key, value) VALUES ('sync_cursor', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            arguments: [Int64(bitPattern: cursor)])
    }

    // MARK: conversations

    func createConversation(_ stored: StoredConversation) throws {
        try stored.conversation.validate()
        try putConversation(stored)
        createdHere.insert(stored.id)
        record(ObjectChange(type: .create, object: .conversation(stored.conversation)))
    }

    func updateConversation(from before: StoredConversation, to after: StoredConversation) throws {
        guard before != after else { return }
        try after.conversation.validate()
        try putConversation(after)
        record(ChangeComputation.conversationUpdates(before: before, after: after))
    }

    /// Deletes a conversation with its messages (each reported deleted first).
    func deleteConversation(_ stored: StoredConversation) throws {
        let key = StoreCoding.blob(stored.id)
        for row in try Row.fetchAll(
            db,
            sql:
                "SELECT * FROM message WHERE conversation_id = ? ORDER BY \(StoreReader.positionOrder(descending: false))",
            arguments: [key])
        {
            let message = try StoreReader.message(db, row: row)
            message.partStates.forEach { retire(localPath: $0.localPath) }
            record(ObjectChange(type: .delete, object: .message(message.message)))
        }
        try db.execute(sql: "DELETE FROM conversation WHERE id = ?", arguments: [key])
        receiptsCache[stored.id] = nil
        marksCache[stored.id] = nil
        record(ObjectChange(type: .delete, object: .conversation(stored.conversation)))
    }

    private func putConversation(_ s: StoredConversation) throws {
        let c = s.conversation
        let key = StoreCoding.blob(c.id)
        receiptsCache[c.id] = c.receiptSwitches
        try db.execute(
            sql: """
                INSERT INTO conversation(id, creator, is_distinct, receipts_enabled, read_receipts_enabled, created_at, metadata, is_synced, last_message_id, total_count, unread_count,
                                         node_total, node_unread, node_last_message_id, number_of_messages, number_of_unread)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET creator = excluded.creator, is_distinct = excluded.is_distinct,
                    receipts_enabled = excluded.receipts_enabled, read_receipts_enabled = excluded.read_receipts_enabled, created_at = excluded.created_at, metadata = excluded.metadata,
                    is_synced = excluded.is_synced, last_message_id = excluded.last_message_id,
                    total_count = excluded.total_count, unread_count = excluded.unread_count,
                    node_total = excluded.node_total, node_unread = excluded.node_unread, node_last_message_id = excluded.node_last_message_id,
                    number_of_messages = excluded.number_of_messages, number_of_unread = excluded.number_of_unread
                """,
            arguments: [
                key, c.creator.rawValue, c.isDistinct, c.deliveryReceiptsEnabled, c.readReceiptsEnabled,
                c.createdAt.millisecondsSince1970,
                StoreCoding.encode(c.metadata), s.isSynced, s.lastMessageID.map(StoreCoding.blob),
                s.totalMessageCount, s.unreadMessageCount, s.nodeCounts?.messages, s.nodeCounts?.unread,
                s.nodeCounts?.lastMessageID.map(StoreCoding.blob), s.totalNumberOfMessages,
                s.totalNumberOfUnreadMessages,
            ])
        try db.execute(sql: "DELETE FROM participant WHERE conversation_id = ?", arguments: [key])
        for user in c.participants {
            try db.execute(
                sql: "INSERT INTO participant(conversation_id, user_id) VALUES (?, ?)", arguments: [key, user.rawValue])
        }
        try db.execute(sql: "DELETE FROM metadata_leaf WHERE conversation_id = ?", arguments: [key])
        for (path, value) in c.metadata.leaves {
            try db.execute(
                sql: "INSERT INTO metadata_leaf(conversation_id, path, value) VALUES (?, ?, ?)",
                arguments: [key, path.description, value])
        }
    }

    // MARK: messages

    func createMessage(_ stored: StoredMessage) throws {
        try stored.message.validate()
        try putMessage(stored, isNew: true)
        record(ObjectChange(type: .create, object: .message(stored.message)))
        touch(stored.message.conversationID)
    }

    func updateMessage(from before: StoredMessage, to after: StoredMessage) throws {
        guard before != after else { return }
        try after.message.validate()
        try putMessage(after, isNew: false)
        let kept = Set(after.partStates.compactMap(\.localPath))
        for state in before.partStates where state.localPath.map({ !kept.contains($0) }) ?? false {
            retire(localPath: state.localPath)
        }
        record(ChangeComputation.messageUpdates(before: before, after: after))
        touch(before.message.conversationID)
        touch(after.message.conversationID)
    }

    func deleteMessage(_ stored: StoredMessage) throws {
        stored.partStates.forEach { retire(localPath: $0.localPath) }
        try db.execute(sql: "DELETE FROM message WHERE id = ?", arguments: [StoreCoding.blob(stored.id)])
        try uncountReply(stored.message)
        record(ObjectChange(type: .delete, object: .message(stored.message)))
        touch(stored.message.conversationID)
    }

    private func putMessage(_ s: StoredMessage, isNew: Bool) throws {
        let m = s.message
        guard s.partStates.count == m.parts.count else {
            throw ClientError(.invalidObject, "a stored message needs one part state per part")
        }
        let key = StoreCoding.blob(m.id)
        let pos = m.position.map(StoreCoding.positionColumns)
        let args: StatementArguments = [
            key, StoreCoding.blob(m.conversationID), m.sender.rawValue, m.sentAt?.millisecondsSince1970,
            s.receivedAt?.millisecondsSince1970, pos?.0, pos?.1, pos?.2, m.isSent, s.isUnread,
            StoreCoding.encode(m.push),
        ]
        if isNew {
            try db.cachedStatement(
                sql: """
                    INSERT INTO message(id, conversation_id, sender, sent_at, received_at, pos_physical, pos_logical, pos_node, is_sent, is_unread, push)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: args)
        } else {
            try db.execute(
                sql: """
                    UPDATE message SET id = ?1, conversation_id = ?2, sender = ?3, sent_at = ?4, received_at = ?5,
                        pos_physical = ?6, pos_logical = ?7, pos_node = ?8, is_sent = ?9, is_unread = ?10, push = ?11
                    WHERE id = ?1
                    """, arguments: args)
            try db.execute(sql: "DELETE FROM part WHERE message_id = ?", arguments: [key])
            try db.execute(sql: "DELETE FROM recipient_status WHERE message_id = ?", arguments: [key])
            try StoredMentions.delete(db, of: key)
        }
        try putThreadFields(s, isNew: isNew)
        for (index, (part, state)) in zip(m.parts, s.partStates).enumerated() {
            var inline: Data?
            var contentID: Data?
            var size: Int64?
            var sha: Data?
            switch part.content {
            case .inline(let bytes): inline = Data(bytes)
            case .external(let ref):
                contentID = StoreCoding.blob(ref.id)
                size = Int64(clamping: ref.size)
                sha = Data(ref.sha256)
            }
            try db.cachedStatement(
                sql: """
                    INSERT INTO part(message_id, idx, part_id, mime_type, inline_bytes, content_id, content_size, content_sha256,
                                     local_path, local_size, transfer_status, last_access, auto_downloaded, purged)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                key, index, StoreCoding.blob(part.id), part.mimeType.rawValue, inline, contentID, size, sha,
                state.localPath, state.localPath == nil ? 0 : Int64(clamping: part.size), state.transferStatus.rawValue,
                state.lastAccess?.millisecondsSince1970, state.autoDownloaded, state.purged,
            ])
        }
        for (user, status) in m.recipientStatus {
            try db.cachedStatement(sql: "INSERT INTO recipient_status(message_id, user_id, status) VALUES (?, ?, ?)")
                .execute(arguments: [key, user.rawValue, Int(status.rawValue)])
        }
        try StoredMentions.insert(db, m.mentions, of: key)
    }

    // MARK: recipient status (LaminaMerge decides)

    /// `user`'s delivered-up-to or read-up-to position (`status` .delivered or .read) in a conversation.
    func statusMark(_ status: RecipientStatus, of user: UserID, in conversation: ConversationID) throws
        -> MessagePosition?
    {
        try marks(conversation)[user]?[status]
    }

    /// Raises a mark to `position`; returns whether it moved (LaminaMerge's `raises`).
    func raiseStatusMark(
        _ status: RecipientStatus, of user: UserID, in conversation: ConversationID, to position: MessagePosition
    ) throws -> Bool {
        guard RecipientStatusLattice.raises(try statusMark(status, of: user, in: conversation), to: position) else {
            return false
        }
        let (p, l, n) = StoreCoding.positionColumns(position)
        try db.execute(
            sql: """
                INSERT INTO status_mark(conversation_id, user_id, status, pos_physical, pos_logical, pos_node) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(conversation_id, user_id, status) DO UPDATE SET
                    pos_physical = excluded.pos_physical, pos_logical = excluded.pos_logical, pos_node = excluded.pos_node
                """, arguments: [StoreCoding.blob(conversation), user.rawValue, Int64(status.rawValue), p, l, n])
        marksCache[conversation]?[user, default: [:]][status] = position
        return true
    }

    /// `message` with every status it carries derived by LaminaMerge from the recorded one and
    /// the conversation's marks (`RecipientStatusLattice.status`), as the local user is shown it
    /// (`RecipientStatusLattice.reported`, by the conversation's receipt switches: delivery off,
    /// `sent` until read; read off, `read` once delivered; both off, `invalid`), and whether it
    /// is unread (`UnreadCounts.isUnread`).
    func settled(_ stored: StoredMessage) throws -> StoredMessage {
        var out = stored
        let m = stored.message
        let receipts = try receiptSwitches(m.conversationID)
        let stamp = MessageStamp(m)
        // The statuses it carries, and those of users with a mark in the conversation.
        let users = Set(m.recipientStatus.keys).union(try marks(m.conversationID).keys)
        for user in users {
            let status = RecipientStatusLattice.status(
                of: stamp, for: user, recorded: m.recipientStatus[user],
                deliveredUpTo: try statusMark(.delivered, of: user, in: m.conversationID),
                readUpTo: try statusMark(.read, of: user, in: m.conversationID))
            out.message.recipientStatus[user] = RecipientStatusLattice.reported(
                status, of: user, viewer: localUser, deliveryReceipts: receipts.delivery,
                readReceipts: receipts.read)
        }
        out.isUnread = UnreadCounts.isUnread(
            stamp, for: localUser, deleted: false, visible: true, recorded: m.recipientStatus[localUser],
            readUpTo: try statusMark(.read, of: localUser, in: m.conversationID))
        return out
    }

    // MARK: summaries

    /// Recomputes counts and last message of every touched conversation (`ConversationSummary`:
    /// independent of its size), reporting what changed.
    func finish() throws {
        for id in touched {
            guard let before = try StoreReader.conversation(db, id) else { continue }
            let key = StoreCoding.blob(id)
            let summary = try ConversationSummary.read(db, id)
            var after = before
            after.totalMessageCount = summary.total
            after.unreadMessageCount = summary.unread
            after.lastMessageID = summary.lastMessageID
            if summary.anySent { after.isSynced = true }
            // The node's counts when it told them (messages not sent yet are not among them).
            after.totalNumberOfMessages =
                after.nodeCounts.map { $0.messages + summary.unsent } ?? after.totalMessageCount
            after.totalNumberOfUnreadMessages = after.nodeCounts?.unread ?? after.unreadMessageCount
            guard after != before else { continue }
            try db.execute(
                sql: """
                    UPDATE conversation SET total_count = ?, unread_count = ?, last_message_id = ?, is_synced = ?,
                        number_of_messages = ?, number_of_unread = ? WHERE id = ?
                    """,
                arguments: [
                    after.totalMessageCount, after.unreadMessageCount, after.lastMessageID.map(StoreCoding.blob),
                    after.isSynced,
                    after.totalNumberOfMessages, after.totalNumberOfUnreadMessages, key,
                ])
            if !createdHere.contains(id) {
                record(ChangeComputation.conversationUpdates(before: before, after: after))
            }
        }
        touched.removeAll()
        touchedSet.removeAll()
    }
}
