import Foundation
import LaminaModel

/// A channel message that references a content (`channel_content`), with what download
/// authorization and collection need.
package struct ChannelContentReference: Hashable, Sendable {
    package var message: MessageID
    package var channel: ChannelID
    /// The channel was deleted (its messages are gone; the content goes at the next collection).
    package var isDeleted: Bool
}

extension StorageTransaction {
    /// Records each content `message`'s parts reference (`appendChannelMessage` calls it in the
    /// same transaction): one row per content and message.
    func linkChannelContent(of message: ChannelMessage) throws(StorageError) {
        var linked: Set<ContentID> = []
        for part in message.parts {
            guard case .external(let reference) = part.content, linked.insert(reference.id).inserted else { continue }
            try db.run(
                """
                INSERT INTO channel_content (content_id, message_id, channel_id) VALUES (?, ?, ?)
                ON CONFLICT DO NOTHING
                """,
                [Columns.blob(reference.id.uuid), Columns.blob(message.id.uuid), Columns.blob(message.channelID.uuid)])
        }
    }

    /// Forgets the channel messages' links to a content that is gone (collected).
    package func unlinkChannelContent(_ id: ContentID) throws(StorageError) {
        try db.run("DELETE FROM channel_content WHERE content_id = ?", [Columns.blob(id.uuid)])
    }
}

extension StorageReader {
    /// Every channel message that references the content, its channel deleted or not.
    package func channelContentReferences(_ id: ContentID) throws(StorageError) -> [ChannelContentReference] {
        let rows = try db.rows(
            """
            SELECT cc.message_id, cc.channel_id, c.deleted FROM channel_content cc
            JOIN channels c ON c.id = cc.channel_id WHERE cc.content_id = ?
            """,
            [Columns.blob(id.uuid)])
        var out: [ChannelContentReference] = []
        for row in rows {
            let deleted: Int64 = row["deleted"]
            out.append(
                ChannelContentReference(
                    message: MessageID(uuid: try Columns.uuid(row["message_id"], column: "message_id")),
                    channel: ChannelID(uuid: try Columns.uuid(row["channel_id"], column: "channel_id")),
                    isDeleted: deleted != 0))
        }
        return out
    }

    /// Whether `user` is now a member of a live channel one of whose messages references the
    /// content (members only: a user who left, or never joined, is not).
    package func maySeeChannelContent(_ id: ContentID, user: UserID) throws(StorageError) -> Bool {
        try db.int64(
            """
            SELECT 1 FROM channel_content cc JOIN channels c ON c.id = cc.channel_id
            JOIN channel_members m ON m.channel_id = cc.channel_id AND m.member = ?
            WHERE cc.content_id = ? AND c.deleted = 0 LIMIT 1
            """,
            [user.rawValue, Columns.blob(id.uuid)]) != nil
    }
}
