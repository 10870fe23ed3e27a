import Foundation
import GRDB
import LaminaModel

extension LocalStore {
    /// After a snapshot replaced a feed this device missed part of (SPEC §6.3): drops the
    /// synced conversations the local user still takes part in here that the snapshot no
    /// longer lists (deleted meanwhile). Conversations the user left stay, as they would on a
    /// device that never went away; so do those not synced yet.
    public func dropConversations(notIn kept: Set<ConversationID>) throws(ClientError) {
        try write(Self.dropConversationsBody(notIn: kept, localUser: localUser))
    }

    static func dropConversationsBody(notIn kept: Set<ConversationID>, localUser: UserID)
        -> @Sendable (WriteContext) throws -> Void
    {
        { ctx in
            let rows = try Row.fetchAll(
                ctx.db,
                sql: """
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
    /// messages held here, positioned between the oldest (or after `start`, the page's start) and
    /// the newest of `returned`, that the answer left out (deleted on the node meanwhile).
    /// Messages outside that range, and those not sent yet, stay.
    public func dropMessages(
        in conversation: ConversationID, notIn returned: [MessageID], after start: MessagePosition? = nil
    ) throws(ClientError) {
        try write(Self.dropMessagesBody(in: conversation, notIn: returned, after: start))
    }

    static func dropMessagesBody(
        in conversation: ConversationID, notIn returned: [MessageID], after start: MessagePosition?
    ) -> @Sendable (WriteContext) throws -> Void {
        { ctx in
            let id = try StoreReader.resolve(ctx.db, conversation)
            var positions: [MessagePosition] = []
            for m in returned {
                if let p = try StoreReader.message(ctx.db, m)?.message.position { positions.append(p) }
            }
            guard let low = positions.min(), let high = positions.max() else { return }
            let keep = Set(returned)
            // A page that starts after `start` answers for everything after it, not only from its oldest.
            let (lp, ll, ln) = StoreCoding.positionColumns(start ?? low)
            let (hp, hl, hn) = StoreCoding.positionColumns(high)
            let rows = try Row.fetchAll(
                ctx.db,
                sql: """
                    SELECT * FROM message WHERE conversation_id = ? AND pos_physical IS NOT NULL
                      AND (pos_physical, pos_logical, pos_node) \(start == nil ? ">=" : ">") (?, ?, ?) AND (pos_physical, pos_logical, pos_node) <= (?, ?, ?)
                    """, arguments: [StoreCoding.blob(id), lp, ll, ln, hp, hl, hn])
            for row in rows {
                let stored = try StoreReader.message(ctx.db, row: row)
                if !keep.contains(stored.id) { try ctx.deleteMessage(stored) }
            }
        }
    }
}

/// A conversation a snapshot's first sync still has to fill, and how far its complete
/// history was fetched (nil: from its first message).
public struct PendingPolicyFill: Hashable, Sendable {
    public var conversation: ConversationID
    public var after: MessagePosition?

    public init(conversation: ConversationID, after: MessagePosition? = nil) {
        self.conversation = conversation
        self.after = after
    }
}

extension LocalStore {
    /// The conversations of a snapshot still waiting to be filled by the synchronization
    /// policy, in fill order (kept across sessions: a first sync cut short resumes on the next
    /// one, a complete history from the last page stored).
    public func pendingPolicyFills() throws(ClientError) -> [PendingPolicyFill] {
        try read(Self.pendingPolicyFillsBody)
    }

    static let pendingPolicyFillsBody: @Sendable (Database) throws -> [PendingPolicyFill] = {
        { db in
            try Row.fetchAll(db, sql: "SELECT * FROM policy_fill ORDER BY ord").map { row throws in
                PendingPolicyFill(
                    conversation: ConversationID(uuid: StoreCoding.uuid(row["conversation_id"])),
                    after: try StoreCoding.position(
                        physical: row["pos_physical"], logical: row["pos_logical"], node: row["pos_node"]))
            }
        }
    }()

    /// Replaces the conversations waiting to be filled (each from its first message).
    public func setPendingPolicyFills(_ ids: [ConversationID]) throws(ClientError) {
        try write(Self.setPendingPolicyFillsBody(ids))
    }

    static func setPendingPolicyFillsBody(_ ids: [ConversationID]) -> @Sendable (WriteContext) throws -> Void {
        { ctx in
            try ctx.db.execute(sql: "DELETE FROM policy_fill")
            for id in ids {
                try ctx.db.execute(
                    sql: "INSERT OR IGNORE INTO policy_fill(conversation_id) VALUES (?)",
                    arguments: [StoreCoding.blob(id)])
            }
        }
    }

    /// A page of a conversation's complete history is stored: its fill resumes after `position`.
    public func advancePolicyFill(_ id: ConversationID, after position: MessagePosition) throws(ClientError) {
        try write(Self.advancePolicyFillBody(id, after: position))
    }

    static func advancePolicyFillBody(_ id: ConversationID, after position: MessagePosition)
        -> @Sendable (WriteContext) throws -> Void
    {
        let (p, l, n) = StoreCoding.positionColumns(position)
        return { ctx in
            try ctx.db.execute(
                sql: "UPDATE policy_fill SET pos_physical = ?, pos_logical = ?, pos_node = ? WHERE conversation_id = ?",
                arguments: [p, l, n, StoreCoding.blob(id)])
        }
    }

    /// One conversation is filled (or cannot be): it no longer waits.
    public func removePendingPolicyFill(_ id: ConversationID) throws(ClientError) {
        try write(Self.removePendingPolicyFillBody(id))
    }

    static func removePendingPolicyFillBody(_ id: ConversationID) -> @Sendable (WriteContext) throws -> Void {
        { ctx in
            try ctx.db.execute(
                sql: "DELETE FROM policy_fill WHERE conversation_id = ?", arguments: [StoreCoding.blob(id)])
        }
    }
}
