import Foundation
import GRDB
import LaminaModel

extension LocalStore {
    /// After a snapshot replaced a feed this device missed part of (SPEC §6.3): drops the
    /// synced conversations the local user still takes part in here that the snapshot no
    /// longer lists (deleted meanwhile). Conversations the user left stay, as they would on a
    /// device that never went away; so do those not synced yet.
    public func dropConversations(notIn kept: Set<ConversationID>) throws(ClientError) {
        try write { ctx in
            let rows = try Row.fetchAll(ctx.db, sql: """
                SELECT c.* FROM conversation c JOIN participant p ON p.conversation_id = c.id AND p.user_id = ?
                WHERE c.merged_into IS NULL AND c.is_synced = 1
                """, arguments: [localUser.rawValue])
            for row in rows {
                let stored = try StoreReader.conversation(ctx.db, row: row)
                if !kept.contains(stored.id) { try ctx.deleteConversation(stored) }
            }
        }
    }

    /// After a snapshot's history answer for a conversation this device held before: drops the
    /// messages held here, positioned between the oldest and the newest of `returned`, that the
    /// answer left out (deleted on the node meanwhile). Messages outside that range, and those
    /// not sent yet, stay.
    public func dropMessages(in conversation: ConversationID, notIn returned: [MessageID]) throws(ClientError) {
        try write { ctx in
            let id = try StoreReader.resolve(ctx.db, conversation)
            var positions: [MessagePosition] = []
            for m in returned {
                if let p = try StoreReader.message(ctx.db, m)?.message.position { positions.append(p) }
            }
            guard let low = positions.min(), let high = positions.max() else { return }
            let keep = Set(returned)
            let (lp, ll, ln) = StoreCoding.positionColumns(low)
            let (hp, hl, hn) = StoreCoding.positionColumns(high)
            let rows = try Row.fetchAll(ctx.db, sql: """
                SELECT * FROM message WHERE conversation_id = ? AND pos_physical IS NOT NULL
                  AND (pos_physical, pos_logical, pos_node) >= (?, ?, ?) AND (pos_physical, pos_logical, pos_node) <= (?, ?, ?)
                """, arguments: [StoreCoding.blob(id), lp, ll, ln, hp, hl, hn])
            for row in rows {
                let stored = try StoreReader.message(ctx.db, row: row)
                if !keep.contains(stored.id) { try ctx.deleteMessage(stored) }
            }
        }
    }
}
