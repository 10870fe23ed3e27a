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

extension LocalStore {
    /// The conversations of a snapshot still waiting to be filled by the synchronization
    /// policy (kept across sessions: a first sync cut short resumes on the next one).
    public func pendingPolicyFills() throws(ClientError) -> [ConversationID] {
        try read { db in
            guard let blob = try Data.fetchOne(db, sql: "SELECT value FROM store_info WHERE key = 'policy_fills'") else { return [] }
            return stride(from: 0, to: blob.count - blob.count % 16, by: 16).map { offset in
                ConversationID(uuid: StoreCoding.uuid(blob.subdata(in: blob.startIndex + offset..<blob.startIndex + offset + 16)))
            }
        }
    }

    /// Replaces the conversations waiting to be filled.
    public func setPendingPolicyFills(_ ids: [ConversationID]) throws(ClientError) {
        try write { ctx in try Self.storePolicyFills(ids, ctx.db) }
    }

    /// One conversation is filled (or cannot be): it no longer waits.
    public func removePendingPolicyFill(_ id: ConversationID) throws(ClientError) {
        try write { ctx in
            let blob = try Data.fetchOne(ctx.db, sql: "SELECT value FROM store_info WHERE key = 'policy_fills'") ?? Data()
            let key = StoreCoding.blob(id)
            var kept: [Data] = []
            for offset in stride(from: 0, to: blob.count - blob.count % 16, by: 16) {
                let one = blob.subdata(in: blob.startIndex + offset..<blob.startIndex + offset + 16)
                if one != key { kept.append(one) }
            }
            try ctx.db.execute(sql: "INSERT INTO store_info(key, value) VALUES ('policy_fills', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                               arguments: [kept.reduce(Data(), +)])
        }
    }

    private static func storePolicyFills(_ ids: [ConversationID], _ db: Database) throws {
        try db.execute(sql: "INSERT INTO store_info(key, value) VALUES ('policy_fills', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                       arguments: [ids.map { StoreCoding.blob($0) }.reduce(Data(), +)])
    }
}
