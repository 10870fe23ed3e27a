import Foundation
import LaminaMerge
import LaminaModel

/// One add of a reaction as stored: its tag and whether a remove took it away.
package struct StoredReactionTag: Hashable, Sendable {
    package var tag: HLCTimestamp
    package var removed: Bool
}

/// A reaction present on a message: who, which key, and its latest live tag.
package struct PresentReaction: Hashable, Sendable {
    package var message: MessageID
    package var user: UserID
    package var key: String
    package var latest: HLCTimestamp
}

extension StorageTransaction {
    /// Records an add of (`user`, `key`) on `message` with `tag` (SPEC §6.9). A tag already
    /// held (added, or removed before its add arrived) is left as it is.
    package func addReaction(_ key: String, by user: UserID, on message: MessageID, tag: HLCTimestamp)
        throws(StorageError)
    {
        let (p, l, n) = try Columns.hlc(tag)
        try db.run(
            """
            INSERT INTO message_reactions (message_id, user_id, reaction_key, tag_physical, tag_logical, tag_node, removed)
            VALUES (?, ?, ?, ?, ?, ?, 0) ON CONFLICT DO NOTHING
            """,
            [Columns.blob(message.uuid), user.rawValue, key, p, l, n])
    }

    /// Marks the adds `tags` of (`user`, `key`) on `message` removed, writing a removed row for
    /// a tag not held yet (its add, arriving later, stays removed).
    package func removeReactionTags(
        _ tags: some Sequence<HLCTimestamp>, key: String, by user: UserID, on message: MessageID
    ) throws(StorageError) {
        let id = Columns.blob(message.uuid)
        for tag in tags {
            let (p, l, n) = try Columns.hlc(tag)
            try db.run(
                """
                INSERT INTO message_reactions (message_id, user_id, reaction_key, tag_physical, tag_logical, tag_node, removed)
                VALUES (?, ?, ?, ?, ?, ?, 1)
                ON CONFLICT (message_id, user_id, reaction_key, tag_physical, tag_logical, tag_node) DO UPDATE SET removed = 1
                """,
                [id, user.rawValue, key, p, l, n])
        }
    }

    /// Drops every reaction of `message` (deleted for everyone).
    package func dropReactions(of message: MessageID) throws(StorageError) {
        try db.run("DELETE FROM message_reactions WHERE message_id = ?", [Columns.blob(message.uuid)])
    }

    /// Drops the reactions of the messages of `conversation` deleted for everyone (after a
    /// range deletion).
    package func dropReactionsOfDeletedMessages(in conversation: ConversationID) throws(StorageError) {
        try db.run(
            """
            DELETE FROM message_reactions WHERE message_id IN
                (SELECT id FROM messages WHERE conversation_id = ? AND deleted = 1)
            """,
            [Columns.blob(conversation.uuid)])
    }
}

extension StorageReader {
    /// The adds of (`user`, `key`) on `message`, removed or not: one index range read.
    package func reactionTags(of key: String, by user: UserID, on message: MessageID) throws(StorageError)
        -> [StoredReactionTag]
    {
        try db.rows(
            """
            SELECT tag_physical, tag_logical, tag_node, removed FROM message_reactions
            WHERE message_id = ? AND user_id = ? AND reaction_key = ?
            """,
            [Columns.blob(message.uuid), user.rawValue, key]
        ).map { row throws(StorageError) in
            StoredReactionTag(tag: try Columns.hlc(row, from: 0), removed: row.int64(3) != 0)
        }
    }

    /// The reactions present on `messages`, each with its latest live tag, in message, user and
    /// key order (one index range read per message).
    package func presentReactions(on messages: [MessageID]) throws(StorageError) -> [PresentReaction] {
        var out: [PresentReaction] = []
        var start = 0
        while start < messages.count {
            let chunk = messages[start..<min(messages.count, start + 256)]
            start += chunk.count
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
            let rows = try db.rows(
                """
                SELECT message_id, user_id, reaction_key, tag_physical, tag_logical, tag_node FROM message_reactions
                WHERE removed = 0 AND message_id IN (\(marks))
                ORDER BY message_id, user_id, reaction_key
                """,
                SQLArguments(chunk.map { Columns.blob($0.uuid) }))
            var latest: [Int: PresentReaction] = [:]
            var order: [Int] = []
            var index: [String: Int] = [:]
            for row in rows {
                guard let uuid = row.uuid(0), let key = row.text(2) else {
                    throw StorageError(.corrupt, "a reaction row without its message or key")
                }
                let user = try Columns.user(row, 1)
                let tag = try Columns.hlc(row, from: 3)
                let name = "\(uuid.uuidString)\u{0}\(user.rawValue)\u{0}\(key)"
                if let i = index[name] {
                    if tag > latest[i]!.latest { latest[i]!.latest = tag }
                } else {
                    let i = order.count
                    index[name] = i
                    order.append(i)
                    latest[i] = PresentReaction(message: MessageID(uuid: uuid), user: user, key: key, latest: tag)
                }
            }
            out += order.map { latest[$0]! }
        }
        return out
    }

    /// How many reaction rows the node holds (benchmarks: rows a reaction writes).
    package func reactionRowCount() throws(StorageError) -> Int {
        Int(try db.int64("SELECT count(*) FROM message_reactions") ?? 0)
    }
}
