import Foundation
import GRDB
import LaminaModel

/// Replies and threads in the local store (client migration `v16-threads`): a message's root
/// (`reply_to`, indexed with the position so a thread's query reads one index range) and, on
/// a root, its thread summary as the node last reported it (kind 21 in history) and as this
/// device kept it since from the replies it received.
enum StoredThreads {
    static let migration = "v16-threads"

    static let create = """
        ALTER TABLE message ADD COLUMN reply_to BLOB;
        ALTER TABLE message ADD COLUMN thread_count INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE message ADD COLUMN thread_last_reply BLOB;
        ALTER TABLE message ADD COLUMN thread_last_physical INTEGER;
        ALTER TABLE message ADD COLUMN thread_last_logical INTEGER;
        ALTER TABLE message ADD COLUMN thread_last_node INTEGER;
        CREATE INDEX message_thread ON message(reply_to, pos_physical, pos_logical, pos_node) WHERE reply_to IS NOT NULL;
        ALTER TABLE message ADD COLUMN edited_at INTEGER;
        """

    /// The root and thread summary of a `message` row.
    static func fields(_ row: Row) throws(ClientError) -> (replyTo: MessageID?, thread: MessageThread?) {
        let replyTo = try StoreCoding.optionalUUID(row, "reply_to").map(MessageID.init(uuid:))
        let count: Int64 = row["thread_count"] ?? 0
        guard count > 0, let last = try StoreCoding.optionalUUID(row, "thread_last_reply"),
            let at = try StoreCoding.position(
                physical: row["thread_last_physical"], logical: row["thread_last_logical"],
                node: row["thread_last_node"])
        else { return (replyTo, nil) }
        return (replyTo, MessageThread(replyCount: UInt64(count), lastReply: MessageID(uuid: last), lastReplyAt: at))
    }

    /// The summary that wins of two reports of one root's thread: the one with the later last
    /// reply (the larger count at the same one), so a stale history answer never undoes what
    /// the feed brought since.
    static func merged(_ a: MessageThread?, _ b: MessageThread?) -> MessageThread? {
        guard let a else { return b }
        guard let b else { return a }
        if a.lastReplyAt != b.lastReplyAt { return a.lastReplyAt > b.lastReplyAt ? a : b }
        return a.replyCount >= b.replyCount ? a : b
    }
}

extension WriteContext {
    /// Writes the message's root, thread summary and edit time into its row (after `putMessage`).
    func putThreadFields(_ s: StoredMessage, isNew: Bool) throws {
        let m = s.message
        guard !isNew || m.hasThreadFields || s.editedAt != nil else { return }
        let last = m.thread.map { StoreCoding.positionColumns($0.lastReplyAt) }
        try db.cachedStatement(
            sql: """
                UPDATE message SET reply_to = ?, thread_count = ?, thread_last_reply = ?, thread_last_physical = ?,
                    thread_last_logical = ?, thread_last_node = ?, edited_at = ? WHERE id = ?
                """
        ).execute(arguments: [
            m.replyTo.map { StoreCoding.blob($0) }, Int64(clamping: m.thread?.replyCount ?? 0),
            m.thread.map { StoreCoding.blob($0.lastReply) }, last?.0, last?.1, last?.2,
            s.editedAt?.millisecondsSince1970, StoreCoding.blob(m.id),
        ])
    }

    /// A reply got its position here (arrived, or its send was acknowledged): its root, when
    /// held, counts it. A reply after the summary's last one adds one. One at or before it (a
    /// report that already counts it, or a reply that arrives late: made on the other side of a
    /// healed partition) leaves the count alone unless this device now holds more replies to
    /// the root than the summary counts, so devices holding the same replies show the same
    /// count whatever order they arrived in.
    func countReply(_ reply: Message) throws {
        guard let root = reply.replyTo, let at = reply.position, let stored = try StoreReader.message(db, root) else {
            return
        }
        if let thread = stored.message.thread, thread.lastReplyAt >= at {
            let held =
                try Int64.fetchOne(
                    db,
                    sql: "SELECT COUNT(*) FROM message WHERE reply_to = ? AND pos_physical IS NOT NULL",
                    arguments: [StoreCoding.blob(root)]) ?? 0
            guard held > Int64(clamping: thread.replyCount) else { return }
            var after = stored
            after.message.thread?.replyCount = UInt64(held)
            try updateMessage(from: stored, to: after)
            return
        }
        var after = stored
        after.message.thread = MessageThread(
            replyCount: (stored.message.thread?.replyCount ?? 0) + 1, lastReply: reply.id, lastReplyAt: at)
        try updateMessage(from: stored, to: after)
    }

    /// A reply left this device (deleted): its root, when held and counting it, counts one
    /// less, and its last reply becomes the latest reply still held (the node's next report
    /// corrects what this device cannot know).
    func uncountReply(_ reply: Message) throws {
        guard let root = reply.replyTo, let at = reply.position, let stored = try StoreReader.message(db, root),
            let thread = stored.message.thread, at <= thread.lastReplyAt
        else { return }
        var after = stored
        let count = thread.replyCount - 1
        if count == 0 {
            after.message.thread = nil
        } else if thread.lastReply == reply.id {
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT id, pos_physical, pos_logical, pos_node FROM message
                    WHERE reply_to = ? AND id != ? AND pos_physical IS NOT NULL
                    ORDER BY pos_physical DESC, pos_logical DESC, pos_node DESC LIMIT 1
                    """, arguments: [StoreCoding.blob(root), StoreCoding.blob(reply.id)])
            if let row,
                let position = try StoreCoding.position(
                    physical: row["pos_physical"], logical: row["pos_logical"], node: row["pos_node"])
            {
                after.message.thread = MessageThread(
                    replyCount: count, lastReply: MessageID(uuid: try StoreCoding.uuid(row, "id")),
                    lastReplyAt: position)
            } else {
                after.message.thread = MessageThread(
                    replyCount: count, lastReply: thread.lastReply, lastReplyAt: thread.lastReplyAt)
            }
        } else {
            after.message.thread?.replyCount = count
        }
        try updateMessage(from: stored, to: after)
    }
}
