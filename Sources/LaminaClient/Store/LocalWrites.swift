import Foundation
import GRDB
import LaminaMerge
import LaminaModel

extension LocalStore {
    /// Stores a conversation created on this device. It is not synced until its first message
    /// reaches the node. Storing the same identifier again returns what is stored.
    @discardableResult
    public func insertLocalConversation(_ conversation: Conversation) throws(ClientError) -> StoredConversation {
        guard conversation.participants.contains(localUser) else {
            throw ClientError(.invalidObject, "the local user must be a participant of a conversation created here")
        }
        return try write { ctx in
            if let existing = try StoreReader.conversation(ctx.db, StoreReader.resolve(ctx.db, conversation.id)) {
                return existing
            }
            let stored = StoredConversation(conversation: conversation, isSynced: false)
            try ctx.createConversation(stored)
            return stored
        }
    }

    /// The live distinct conversation whose participants are exactly `participants`, if any.
    public func distinctConversation(participants: Set<UserID>) throws(ClientError) -> StoredConversation? {
        guard !participants.isEmpty, participants.count <= Limits.maxParticipants else { return nil }
        return try read { db in
            let marks = Array(repeating: "?", count: participants.count).joined(separator: ", ")
            var args: [any DatabaseValueConvertible] = participants.map(\.rawValue)
            args.append(participants.count)
            args.append(participants.count)
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT c.* FROM conversation c
                    WHERE c.is_distinct = 1 AND c.merged_into IS NULL
                      AND (SELECT COUNT(*) FROM participant p WHERE p.conversation_id = c.id AND p.user_id IN (\(marks))) = ?
                      AND (SELECT COUNT(*) FROM participant p WHERE p.conversation_id = c.id) = ?
                    """, arguments: StatementArguments(args))
            // Two here (created on this device and by another, before the node merged them):
            // LaminaMerge's rule picks the one the node will keep.
            let candidates = try rows.map { try StoreReader.conversation(db, row: $0) }
            guard
                let survivor = DistinctResolution.survivor(
                    of: candidates.map { c in
                        DistinctCandidate(
                            c.conversation,
                            createdAt: HLCTimestamp(
                                physical: UInt64(max(0, c.conversation.createdAt.millisecondsSince1970)), logical: 0,
                                node: NodeID(0)))
                    })
            else { return nil }
            return candidates.first { $0.id == survivor.id }
        }
    }

    /// Stores a message the local user is sending and, in the same transaction, its outbox
    /// entry. It is read, not sent, and has no position until the node accepts it. Rich
    /// parts wait for upload. Storing the same identifier again returns what is stored.
    @discardableResult
    public func insertLocalMessage(_ message: Message, outbox: OutboxEntry? = nil) throws(ClientError) -> StoredMessage
    {
        try insertLocalMessage(message, outbox: outbox.map { [$0] } ?? [])
    }

    /// As `insertLocalMessage(_:outbox:)`, enqueueing several commands (in order) in the
    /// same transaction, e.g. a conversation's creation before its first message.
    @discardableResult
    public func insertLocalMessage(_ message: Message, outbox: [OutboxEntry]) throws(ClientError) -> StoredMessage {
        guard message.sender == localUser else {
            throw ClientError(.invalidObject, "a message sent from this device has the local user as sender")
        }
        return try write { ctx in
            if let existing = try StoreReader.message(ctx.db, message.id) { return existing }
            var m = message
            m.conversationID = try StoreReader.resolve(ctx.db, message.conversationID)
            guard let conversation = try StoreReader.conversation(ctx.db, m.conversationID) else {
                throw ClientError(.notFound, "conversation \(message.conversationID) is not in the local store")
            }
            for user in conversation.conversation.participants where m.recipientStatus[user] == nil {
                m.recipientStatus[user] = .pending  // LaminaMerge's rule (in `settled`) makes the sender's own read
            }
            let now = Timestamp.now()
            let states = m.parts.map { part in
                switch part.content {
                case .inline: return PartState(partID: part.id, transferStatus: .complete)
                case .external:
                    // The staged file `send` moved under the content directory, when there is one.
                    let name = Self.contentFileName(m.identifier(of: part))
                    let staged = FileManager.default.fileExists(
                        atPath: location.contentDirectory.appendingPathComponent(name).path)
                    return PartState(
                        partID: part.id, transferStatus: .awaitingUpload, localPath: staged ? name : nil,
                        lastAccess: staged ? now : nil)
                }
            }
            let stored = try ctx.settled(
                StoredMessage(message: m, receivedAt: nil, isUnread: false, partStates: states))
            try ctx.createMessage(stored)
            for entry in outbox { try ctx.enqueue(entry) }
            return stored
        }
    }

    /// Marks messages read by the local user (unread flag off, the user's status to read)
    /// and enqueues `outbox` (the receipt command) in the same transaction when anything
    /// changed. Returns the messages that changed.
    @discardableResult
    public func markRead(_ ids: [MessageID], outbox: OutboxEntry? = nil) throws(ClientError) -> [MessageID] {
        guard ids.count <= Self.maxChangesPerApply else {
            throw ClientError(
                .invalidObject, "one markRead takes at most \(Self.maxChangesPerApply) messages, not \(ids.count)")
        }
        return try write { ctx in
            var changed: [MessageID] = []
            var reads: [ConversationID: Int] = [:]
            for id in ids {
                guard let before = try StoreReader.message(ctx.db, id) else { continue }
                var after = before
                after.message.recipientStatus[localUser] = max(
                    before.message.recipientStatus[localUser] ?? .invalid, .read)
                after = try ctx.settled(after)
                if after != before {
                    try ctx.updateMessage(from: before, to: after)
                    changed.append(id)
                    if before.isUnread, !after.isUnread { reads[after.message.conversationID, default: 0] += 1 }
                }
            }
            // The node's unread counts move with the reads made here at once (the feed's copy
            // of each read is then not counted again: `RemoteChange.readCounted`).
            for (conversation, count) in reads {
                guard let stored = try StoreReader.conversation(ctx.db, conversation), var counts = stored.nodeCounts
                else { continue }
                counts.unread = max(0, counts.unread - count)
                try ctx.setNodeCounts(counts, of: stored)
            }
            if !changed.isEmpty, let outbox { try ctx.enqueue(outbox) }
            return changed
        }
    }

    /// Unread messages of a conversation, in position order.
    public func unreadMessageIDs(in conversation: ConversationID) throws(ClientError) -> [MessageID] {
        try read { db in
            let id = try StoreReader.resolve(db, conversation)
            return try Data.fetchAll(
                db,
                sql:
                    "SELECT id FROM message WHERE conversation_id = ? AND is_unread = 1 ORDER BY \(StoreReader.positionOrder(descending: false))",
                arguments: [StoreCoding.blob(id)]
            ).map { MessageID(uuid: StoreCoding.uuid($0)) }
        }
    }
}
