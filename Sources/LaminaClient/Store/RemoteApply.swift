import Foundation
import GRDB
import LaminaMerge
import LaminaModel

extension LocalStore {
    /// The most remote changes one `apply` call (one transaction) takes.
    public static let maxChangesPerApply = 10_000

    /// Applies changes from the node in one transaction, then records `cursor` (when given)
    /// and queues `outbox` (the commands the changes call for, such as delivery receipts)
    /// in the same transaction, so the cursor never runs ahead of what is stored and no
    /// stored change loses the command it caused. `acknowledged` names an outbox entry the
    /// node acknowledged with these changes: it leaves the outbox in the same transaction.
    /// Returns the object changes it made (also published to subscribers and delegates).
    @discardableResult
    public func apply(
        _ changes: [RemoteChange], cursor: UInt64? = nil, outbox: [OutboxEntry] = [],
        acknowledged: UUID? = nil
    ) throws(ClientError) -> [ObjectChange] {
        guard changes.count <= Self.maxChangesPerApply else {
            throw ClientError(
                .invalidObject, "one apply takes at most \(Self.maxChangesPerApply) changes, not \(changes.count)")
        }
        return try write { ctx in
            try Self.apply(changes, cursor: cursor, outbox: outbox, acknowledged: acknowledged, in: ctx)
        }
    }

    /// As `apply`, through GRDB's async API (the sync session's path: it never blocks a
    /// cooperative thread on SQLite).
    @discardableResult
    public func applyAsync(
        _ changes: [RemoteChange], cursor: UInt64? = nil, outbox: [OutboxEntry] = [],
        acknowledged: UUID? = nil
    ) async throws(ClientError) -> [ObjectChange] {
        guard changes.count <= Self.maxChangesPerApply else {
            throw ClientError(
                .invalidObject, "one apply takes at most \(Self.maxChangesPerApply) changes, not \(changes.count)")
        }
        return try await writeAsync { ctx in
            try Self.apply(changes, cursor: cursor, outbox: outbox, acknowledged: acknowledged, in: ctx)
        }
    }

    static func apply(
        _ changes: [RemoteChange], cursor: UInt64?, outbox: [OutboxEntry], acknowledged: UUID?,
        in ctx: WriteContext
    ) throws -> [ObjectChange] {
        for change in changes { try ctx.apply(change) }
        try ctx.finish()
        if let cursor { try ctx.setCursor(cursor) }
        for entry in outbox { try ctx.enqueue(entry) }
        if let acknowledged {
            try ctx.db.execute(sql: "DELETE FROM outbox WHERE id = ?", arguments: [StoreCoding.blob(acknowledged)])
        }
        return ctx.changes
    }
}

extension LocalStore {
    /// The node acknowledged sending message `id`: in one transaction, the stored message
    /// becomes what `sent` makes of it and its outbox entry leaves. When the message cannot
    /// be stored any more (its conversation was deleted here), only the entry leaves.
    func acknowledgeSentMessageAsync(
        _ id: MessageID, receivedAt: Timestamp, sent: @escaping @Sendable (Message) -> Message?
    ) async throws(ClientError) {
        do {
            try await writeAsync { ctx in
                let changes: [RemoteChange] =
                    try StoreReader.message(ctx.db, id).flatMap { sent($0.message) }.map {
                        [.message($0, receivedAt: receivedAt)]
                    } ?? []
                _ = try Self.apply(changes, cursor: nil, outbox: [], acknowledged: id.uuid, in: ctx)
            }
        } catch {
            guard error.code == .notFound else { throw error }
            try await applyAsync([], acknowledged: id.uuid)
        }
    }
}

extension WriteContext {
    func apply(_ change: RemoteChange) throws {
        switch change {
        case .conversation(let conversation): try applyConversation(conversation)
        case .conversationDeleted(let id):
            // Deleting a merged-away identifier never deletes the survivor.
            if let stored = try StoreReader.conversation(db, id) { try deleteConversation(stored) }
        case .message(let message, let receivedAt): try applyMessage(message, receivedAt: receivedAt)
        case .messageDeleted(let id):
            if let stored = try StoreReader.message(db, id) { try deleteMessage(stored) }
        case .messageParts(let id, let parts, let editedAt):
            if let existing = try StoreReader.message(db, id), existing.message.parts != parts {
                var after = existing
                Self.replaceParts(of: &after, with: parts)
                after.editedAt = [existing.editedAt, editedAt].compactMap { $0 }.max()
                try updateMessage(from: existing, to: try settled(after))
            }
        case .reaction(let id, let user, let key, let present):
            try applyReaction(on: id, user: user, key: key, present: present)
        case .reactionsReplaced(let id, let reactions): try replaceReactions(of: id, with: reactions)
        case .messagesDeleted(let id, let below): try deleteMessages(of: id, below: below)
        case .recipientStatus(let id, let user, let status): try applyStatus(id, user: user, status: status)
        case .statusUpTo(let id, let user, let status, let upTo):
            try applyStatus(upTo: upTo, in: id, user: user, status: status)
        case .metadata(let id, let path, let value):
            try modifyConversation(id) { c in
                if let value { c.metadata.set(value, at: path) } else { c.metadata.remove(at: path) }
            }
        case .participants(let id, let added, let removed):
            try modifyConversation(id) { c in
                let before = c.participants
                c.participants.formUnion(added)
                c.participants.subtract(removed)
                if c.participants != before { c.isDistinct = false }
            }
        case .distinctMerge(let from, let into): try applyMerge(from: from, into: into)
        case .counts(let id, let counts, let isDistinct, let delivery, let read):
            try applyCounts(
                counts, of: id, isDistinct: isDistinct, deliveryReceiptsEnabled: delivery, readReceiptsEnabled: read)
        case .messageCounted(let id, let message): try countArrival(of: message, in: id)
        case .readCounted(let id, let message): try countRead(of: message, in: id)
        case .identity(let user, let identity): try applyIdentity(identity, of: user)
        case .blockList(let user, let blocking):
            if blocking {
                try db.execute(
                    sql: "INSERT OR IGNORE INTO blocked_user (user_id) VALUES (?)", arguments: [user.rawValue])
            } else {
                try db.execute(sql: "DELETE FROM blocked_user WHERE user_id = ?", arguments: [user.rawValue])
            }
        case .following(let user, let following):
            if following {
                try db.execute(
                    sql: "INSERT OR IGNORE INTO followed_user (user_id) VALUES (?)", arguments: [user.rawValue])
            } else {
                try db.execute(sql: "DELETE FROM followed_user WHERE user_id = ?", arguments: [user.rawValue])
            }
            // A held identity's `isFollowed` changed: queries over identities see it.
            if db.changesCount > 0, let identity = try StoredIdentities.identity(db, user) {
                record(
                    ObjectChange(
                        type: .update, object: .identity(identity), property: "isFollowed",
                        before: .bool(!following), after: .bool(following)))
            }
        case .notificationLevel(let id, let level, let until):
            try applyNotificationLevel(level, until: until, of: id)
            try rebaseNotificationLevelUndo(level, until: until, of: id)
        case .channel(let channel): try applyChannel(channel)
        case .channelMembership(let id, let isMember): try applyChannelMembership(id, isMember: isMember)
        case .channelDeleted(let id): try deleteChannel(id)
        case .channelMessage(let message): try applyChannelMessage(message)
        }
    }

    // MARK: counts (SPEC §6.4)

    /// The node's counts replace the ones kept here; its flags that change after creation
    /// (distinct, receipts) apply to the conversation.
    private func applyCounts(
        _ counts: NodeCounts, of named: ConversationID, isDistinct: Bool, deliveryReceiptsEnabled: Bool,
        readReceiptsEnabled: Bool
    ) throws {
        // Counts of a merged-away identifier are stale: the survivor's come on their own.
        guard let before = try StoreReader.conversation(db, named) else { return }
        let id = before.id
        var after = before
        after.nodeCounts = counts
        after.conversation.isDistinct = isDistinct
        after.conversation.deliveryReceiptsEnabled = deliveryReceiptsEnabled
        after.conversation.readReceiptsEnabled = readReceiptsEnabled
        try updateConversation(from: before, to: after)
        touch(id)
    }

    /// A message that entered the feed after the counts kept here were taken: one more
    /// message, and one more unread when it is unread here.
    private func countArrival(of message: MessageID, in named: ConversationID) throws {
        let id = try StoreReader.resolve(db, named)
        guard var counts = try nodeCounts(of: id) else { return }
        counts.messages += 1
        if try isUnread(message) == true { counts.unread += 1 }
        counts.lastMessageID = message
        try writeNodeCounts(counts, of: id)
    }

    /// The node's counts of a live conversation, read without loading the conversation (a
    /// feed's messages each move them: one cached statement per message, not a full read).
    private func nodeCounts(of id: ConversationID) throws -> NodeCounts? {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql:
                        "SELECT node_total, node_unread, node_last_message_id FROM conversation WHERE id = ? AND merged_into IS NULL"
                ),
                arguments: [StoreCoding.blob(id)]),
            let total = row["node_total"] as Int?, let unread = row["node_unread"] as Int?
        else { return nil }
        return NodeCounts(
            messages: total, unread: unread,
            lastMessageID: try StoreCoding.optionalUUID(row, "node_last_message_id").map(MessageID.init(uuid:)))
    }

    /// Writes the node's counts only; the counts the app reads follow in `finish()`, which
    /// reports what changed.
    private func writeNodeCounts(_ counts: NodeCounts, of id: ConversationID) throws {
        try db.cachedStatement(
            sql: "UPDATE conversation SET node_total = ?, node_unread = ?, node_last_message_id = ? WHERE id = ?"
        )
        .execute(arguments: [
            counts.messages, counts.unread, counts.lastMessageID.map(StoreCoding.blob), StoreCoding.blob(id),
        ])
        touch(id)
    }

    /// Whether a held message is unread (nil: not held).
    private func isUnread(_ message: MessageID) throws -> Bool? {
        try Bool.fetchOne(
            db.cachedStatement(sql: "SELECT is_unread FROM message WHERE id = ?"),
            arguments: [StoreCoding.blob(message)])
    }

    /// The local user read one message (the node's feed says so): one less unread, unless
    /// this device counted the read when the user made it here (the message is held and
    /// already read). Apply before the status change itself.
    private func countRead(of message: MessageID, in named: ConversationID) throws {
        let id = try StoreReader.resolve(db, named)
        guard var counts = try nodeCounts(of: id) else { return }
        if try isUnread(message) == false { return }
        counts.unread = max(0, counts.unread - 1)
        try writeNodeCounts(counts, of: id)
    }

    func setNodeCounts(_ counts: NodeCounts, of before: StoredConversation) throws {
        var after = before
        after.nodeCounts = counts
        try updateConversation(from: before, to: after)
        touch(before.id)
    }

    private func applyConversation(_ conversation: Conversation) throws {
        // A late update of a merged-away conversation is stale: the survivor is authoritative.
        if try StoreReader.isMerged(db, conversation.id) { return }
        if let existing = try StoreReader.conversation(db, conversation.id) {
            var after = existing
            after.conversation = conversation
            after.isSynced = true
            // The node counts a conversation of its own from here (SPEC §6.4): from zero when
            // none of its messages is held yet, else when it next sends the counts.
            if after.nodeCounts == nil, try !holdsSentMessages(conversation.id) {
                after.nodeCounts = NodeCounts(messages: 0, unread: 0)
            }
            try updateConversation(from: existing, to: after)
            touch(conversation.id)
        } else {
            try createConversation(
                StoredConversation(
                    conversation: conversation, isSynced: true, nodeCounts: NodeCounts(messages: 0, unread: 0)))
        }
    }

    private func holdsSentMessages(_ id: ConversationID) throws -> Bool {
        try Bool.fetchOne(
            db, sql: "SELECT EXISTS (SELECT 1 FROM message WHERE conversation_id = ? AND pos_physical IS NOT NULL)",
            arguments: [StoreCoding.blob(id)]) ?? false
    }

    /// Changes addressed to a merged-away identifier are stale and ignored: the node
    /// addresses the survivor after a merge.
    private func modifyConversation(_ id: ConversationID, _ body: (inout Conversation) -> Void) throws {
        if try StoreReader.isMerged(db, id) { return }
        guard let before = try StoreReader.conversation(db, id) else {
            throw ClientError(.notFound, "conversation \(id) is not in the local store")
        }
        var after = before
        body(&after.conversation)
        try updateConversation(from: before, to: after)
    }

    private func applyMessage(_ incoming: Message, receivedAt: Timestamp) throws {
        var message = incoming
        message.conversationID = try StoreReader.resolve(db, incoming.conversationID)
        guard try StoreReader.isLive(db, message.conversationID) else {
            throw ClientError(
                .notFound,
                "message \(message.id) belongs to conversation \(incoming.conversationID), which is not in the local store"
            )
        }
        if let existing = try StoreReader.message(db, message.id) {
            var after = existing
            // Position and sent-at are fixed once assigned; a replay never moves a message.
            if existing.message.position == nil {
                after.message.position = message.position
                after.message.sentAt = message.sentAt
            }
            after.message.recipientStatus.merge(message.recipientStatus, uniquingKeysWith: max)
            if after.message.parts != message.parts { Self.replaceParts(of: &after, with: message.parts) }
            after.message.replyTo = existing.message.replyTo ?? message.replyTo
            after.message.thread = StoredThreads.merged(existing.message.thread, message.thread)
            try updateMessage(from: existing, to: try settled(after))
            if existing.message.position == nil, after.message.position != nil { try countReply(after.message) }
        } else {
            let own = message.sender == localUser
            let stored = StoredMessage(
                message: message,
                receivedAt: own ? nil : receivedAt,
                isUnread: false,
                partStates: message.parts.map(Self.remoteState(of:)))
            try createMessage(try settled(stored))
            try countReply(message)
        }
        // The node holds the message (it has a position): its send is done, whether the ACK
        // or the feed says so first. Leaving the entry would show the message sent while its
        // command still waits in the outbox, and after a dropped stream send it again.
        if message.sender == localUser, message.position != nil {
            try db.execute(
                sql: "DELETE FROM outbox WHERE id = ? AND kind = ?",
                arguments: [StoreCoding.blob(message.id.uuid), OutboxCommandKind.sendMessage.rawValue])
        }
    }

    /// Deletes the conversation's messages positioned before `below` (not yet sent ones
    /// have no position and stay).
    private func deleteMessages(of conversation: ConversationID, below: MessagePosition) throws {
        let id = try StoreReader.resolve(db, conversation)
        let ids = try Data.fetchAll(
            db, sql: "SELECT id FROM message WHERE conversation_id = ? AND pos_physical IS NOT NULL",
            arguments: [StoreCoding.blob(id)])
        for key in ids {
            guard let stored = try StoreReader.message(db, MessageID(uuid: StoreCoding.uuid(key))),
                let position = stored.message.position, position < below
            else { continue }
            try deleteMessage(stored)
        }
    }

    /// Gives a stored message new parts: a part that stays the same keeps its transfer state
    /// (a download in progress or done), a new or changed one starts as a remote part.
    static func replaceParts(of message: inout StoredMessage, with parts: [MessagePart]) {
        let oldStates = Dictionary(
            zip(message.message.parts, message.partStates).map { ($0.0.id, ($0.0, $0.1)) },
            uniquingKeysWith: { a, _ in a })
        message.message.parts = parts
        message.partStates = parts.map { part in
            if let (oldPart, state) = oldStates[part.id], oldPart == part { return state }
            return remoteState(of: part)
        }
    }

    static func remoteState(of part: MessagePart) -> PartState {
        switch part.content {
        case .inline: PartState(partID: part.id, transferStatus: .complete)
        case .external: PartState(partID: part.id, transferStatus: .readyForDownload)
        }
    }

    private func applyStatus(_ id: MessageID, user: UserID, status: RecipientStatus) throws {
        // A status for a message not (or no longer) here has nothing to update.
        guard let before = try StoreReader.message(db, id) else { return }
        var after = before
        after.message.recipientStatus[user] = max(before.message.recipientStatus[user] ?? .invalid, status)
        try updateMessage(from: before, to: try settled(after))
    }

    /// Raises `user`'s delivered-up-to or read-up-to mark of the conversation to `upTo` (kept,
    /// so that messages arriving later get their status from it), then re-derives the status
    /// of the messages of others this device holds at or before `upTo` whose status is below
    /// `status`: each one that changes is an object change, as a per-message status was.
    private func applyStatus(
        upTo: MessagePosition, in conversation: ConversationID, user: UserID, status: RecipientStatus
    ) throws {
        guard status == .delivered || status == .read else {
            throw ClientError(.invalidObject, "a status-up-to carries delivered or read, not \(status)")
        }
        let id = try StoreReader.resolve(db, conversation)
        guard try StoreReader.conversation(db, id) != nil, try raiseStatusMark(status, of: user, in: id, to: upTo)
        else { return }
        let (p, l, n) = StoreCoding.positionColumns(upTo)
        let ids = try Data.fetchAll(
            db,
            sql: """
                SELECT m.id FROM message m LEFT JOIN recipient_status s ON s.message_id = m.id AND s.user_id = ?
                WHERE m.conversation_id = ? AND m.sender <> ? AND m.pos_physical IS NOT NULL
                  AND (m.pos_physical, m.pos_logical, m.pos_node) <= (?, ?, ?)
                  AND (s.status IS NULL OR s.status < ?)
                ORDER BY \(StoreReader.positionOrder(descending: false, table: "m"))
                """,
            arguments: [user.rawValue, StoreCoding.blob(id.uuid), user.rawValue, p, l, n, Int64(status.rawValue)])
        for raw in ids {
            guard let before = try StoreReader.message(db, MessageID(uuid: StoreCoding.uuid(raw))) else { continue }
            var after = before
            if after.message.recipientStatus[user] == nil { after.message.recipientStatus[user] = .sent }
            try updateMessage(from: before, to: try settled(after))
        }
    }

    /// Moves everything of `from` to `into` and leaves `from` as a tombstone pointing there.
    /// When the survivor is not here yet, the loser's row becomes it (renamed).
    private func applyMerge(from: ConversationID, into: ConversationID) throws {
        guard from != into else { return }
        defer { forgetCaches() }
        let survivorID = try StoreReader.resolve(db, into)
        guard survivorID != from, !(try StoreReader.isMerged(db, from)),
            let loser = try StoreReader.conversation(db, from)
        else { return }
        let fromKey = StoreCoding.blob(from)
        let intoKey = StoreCoding.blob(survivorID)
        let movedMessages = try Data.fetchAll(
            db,
            sql:
                "SELECT id FROM message WHERE conversation_id = ? ORDER BY \(StoreReader.positionOrder(descending: false))",
            arguments: [fromKey]
        )
        .compactMap { try StoreReader.message(db, MessageID(uuid: StoreCoding.uuid($0))) }
        if let survivor = try StoreReader.conversation(db, survivorID) {
            try db.execute(
                sql: "UPDATE message SET conversation_id = ? WHERE conversation_id = ?", arguments: [intoKey, fromKey])
            try db.execute(sql: "DELETE FROM participant WHERE conversation_id = ?", arguments: [fromKey])
            try db.execute(sql: "DELETE FROM metadata_leaf WHERE conversation_id = ?", arguments: [fromKey])
            try db.execute(
                sql:
                    "UPDATE conversation SET merged_into = ?, last_message_id = NULL, total_count = 0, unread_count = 0 WHERE id = ?",
                arguments: [intoKey, fromKey])
            // The app's object for the loser follows the identifier to the survivor.
            record(
                ObjectChange(
                    type: .update, object: .conversation(survivor.conversation),
                    property: ConversationProperty.identifier,
                    before: .conversationID(from), after: .conversationID(survivorID)))
        } else {
            // Rename: ON UPDATE CASCADE carries participants, metadata and messages along.
            try db.execute(
                sql: "UPDATE conversation SET id = ?, is_synced = 1 WHERE id = ?", arguments: [intoKey, fromKey])
            var renamed = loser.conversation
            renamed.id = survivorID
            try db.execute(
                sql: """
                    INSERT INTO conversation(id, creator, is_distinct, receipts_enabled, read_receipts_enabled,
                        created_at, metadata, merged_into)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    fromKey, loser.conversation.creator.rawValue, loser.conversation.isDistinct,
                    loser.conversation.deliveryReceiptsEnabled, loser.conversation.readReceiptsEnabled,
                    loser.conversation.createdAt.millisecondsSince1970, StoreCoding.encode(Metadata()), intoKey,
                ])
            record(
                ObjectChange(
                    type: .update, object: .conversation(renamed), property: ConversationProperty.identifier,
                    before: .conversationID(from), after: .conversationID(survivorID)))
        }
        // Any older tombstones that pointed at the loser now point at the survivor.
        try db.execute(
            sql: "UPDATE conversation SET merged_into = ? WHERE merged_into = ? AND id != ?",
            arguments: [intoKey, fromKey, fromKey])
        for before in movedMessages {
            guard let after = try StoreReader.message(db, before.id) else { continue }
            record(ChangeComputation.messageUpdates(before: before, after: after))
        }
        touch(survivorID)
    }
}
