import Foundation
import LaminaModel

/// An alias: a client-chosen conversation id that resolved to another conversation (SPEC §6.1).
package struct ConversationAlias: Hashable, Sendable {
    /// The conversation the alias names.
    package var conversation: ConversationID
    /// The user whose CREATE_CONVERSATION chose the id.
    package var user: UserID
}

extension StorageTransaction {
    /// Records `alias` (the id of `user`'s CREATE_CONVERSATION) as a name of `conversation`.
    /// Recording the same alias again is a no-op; an id already naming a conversation or
    /// another alias is `.alreadyExists`.
    package func recordAlias(
        _ alias: ConversationID, of conversation: ConversationID, by user: UserID, at time: Timestamp
    ) throws(StorageError) {
        guard alias != conversation else {
            throw StorageError(.invalidArgument, "a conversation is not an alias of itself")
        }
        if let existing = try read.alias(alias) {
            guard existing.conversation == conversation, existing.user == user else {
                throw StorageError(.alreadyExists, "\(alias) already names \(existing.conversation)")
            }
            return
        }
        guard try read.conversation(alias) == nil else {
            throw StorageError(.alreadyExists, "\(alias) names a conversation")
        }
        try db.run(
            "INSERT INTO conversation_aliases (alias, conversation_id, user_id, created_at) VALUES (?, ?, ?, ?)",
            [Columns.blob(alias.uuid), Columns.blob(conversation.uuid), user.rawValue, time.millisecondsSince1970])
    }
}

extension StorageReader {
    /// The alias `id`, if it is one.
    package func alias(_ id: ConversationID) throws(StorageError) -> ConversationAlias? {
        guard
            let row = try db.row(
                "SELECT conversation_id, user_id FROM conversation_aliases WHERE alias = ?", [Columns.blob(id.uuid)])
        else {
            return nil
        }
        let data: Data? = row[0]
        return ConversationAlias(
            conversation: ConversationID(uuid: try Columns.uuid(data, column: "conversation_id")),
            user: try Columns.user(row, 1))
    }

    /// The conversation a command naming `id` addresses when `id` names no live conversation:
    /// the target of the alias `id`, or the survivor a distinct merge retired `id` into,
    /// followed to the end (at most `maxHops` steps). Nil when `id` resolves to nothing else.
    package func resolvedConversation(_ id: ConversationID, maxHops: Int = 8) throws(StorageError) -> ConversationID? {
        var current = id
        for _ in 0..<maxHops {
            let next: ConversationID
            if let alias = try alias(current) {
                next = alias.conversation
            } else if let row = try db.row(
                "SELECT merged_into FROM conversations WHERE id = ?", [Columns.blob(current.uuid)]),
                let merged = row[0] as Data?
            {
                next = ConversationID(uuid: try Columns.uuid(merged, column: "merged_into"))
            } else {
                return current == id ? nil : current
            }
            current = next
        }
        return current == id ? nil : current
    }
}
