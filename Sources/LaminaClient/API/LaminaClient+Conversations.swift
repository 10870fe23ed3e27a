import Foundation
import LaminaModel
import LaminaWire

extension LaminaClient {
    /// A new conversation with `participants` (the local user is added: the creator is
    /// implicit). Distinct by default: when a distinct conversation of exactly these
    /// participants is already in the local store, that one is returned, unless these
    /// options differ from its own (metadata given and not equal to its metadata, or another
    /// receipts setting): then `.existingDistinctConversation` is thrown, its
    /// `existingConversation` naming the one that exists (as Layer's SDK did). A new one stays
    /// on this device (not synced) until its first message is sent.
    public func newConversation(participants: Set<UserID>, options: ConversationOptions = ConversationOptions())
        throws(ClientError) -> StoredConversation
    {
        guard !participants.subtracting([user]).isEmpty else {
            throw ClientError(
                .noParticipants, "a new conversation needs at least one participant besides the local user")
        }
        let conversation: Conversation
        do {
            conversation = try Conversation(
                creator: user, participants: participants, options: options, createdAt: environment.now())
        } catch { throw ClientError(error) }
        if options.isDistinct, let existing = try store.distinctConversation(participants: conversation.participants) {
            if let conflict = Self.distinctConflict(options, existing.conversation) {
                var error = ClientError(
                    .existingDistinctConversation,
                    "a distinct conversation with these participants exists (\(existing.id)) with other \(conflict)")
                error.existingConversation = existing.id
                throw error
            }
            return existing
        }
        return try store.insertLocalConversation(conversation)
    }

    /// What of `options` differs from the existing distinct conversation's (nil: nothing, so
    /// creating resolves to it). Metadata counts only when given, as on the node (SPEC §6.1).
    static func distinctConflict(_ options: ConversationOptions, _ existing: Conversation) -> String? {
        if !options.metadata.values.isEmpty, options.metadata != existing.metadata { return "metadata" }
        if options.deliveryReceiptsEnabled != existing.deliveryReceiptsEnabled
            || options.readReceiptsEnabled != existing.readReceiptsEnabled
        {
            return "receipt options"
        }
        return nil
    }

    /// Adds participants (the docs' `addParticipants:`). A distinct conversation becomes
    /// non-distinct. Any participant may add anyone.
    public func addParticipants(_ users: Set<UserID>, to conversation: ConversationID) throws(ClientError) {
        try changeParticipants(conversation, added: users, removed: [])
    }

    /// Removes participants; removing the local user is leaving.
    public func removeParticipants(_ users: Set<UserID>, from conversation: ConversationID) throws(ClientError) {
        try changeParticipants(conversation, added: [], removed: users)
    }

    private func changeParticipants(_ id: ConversationID, added: Set<UserID>, removed: Set<UserID>) throws(ClientError)
    {
        let users = added.union(removed)
        guard !users.isEmpty else {
            throw ClientError(.invalidArgument, "name at least one participant to add or remove")
        }
        guard users.count <= Limits.maxParticipants else {
            throw ClientError(
                .tooManyParticipants, "one change names at most \(Limits.maxParticipants) users, not \(users.count)")
        }
        let stored = try existingConversation(id)
        var after = stored.conversation
        after.participants.formUnion(added)
        after.participants.subtract(removed)
        guard !after.participants.isEmpty else {
            throw ClientError(.noParticipants, "removing these users would leave the conversation without participants")
        }
        guard after.participants.count <= after.participantLimit else {
            throw ClientError(
                .tooManyParticipants,
                "the conversation would have \(after.participants.count) participants; its limit is \(after.participantLimit)"
            )
        }
        let requestID = UUID()
        let frame: Frame =
            added.isEmpty
            ? .removeParticipants(ParticipantsUpdate(requestID: requestID, conversationID: stored.id, users: removed))
            : .addParticipants(ParticipantsUpdate(requestID: requestID, conversationID: stored.id, users: added))
        try commit([.participants(stored.id, added: added, removed: removed)], command: frame, about: stored)
    }

    /// Sets the metadata value at `path` (last writer wins per path on the node).
    public func setMetadata(_ value: MetadataValue, at path: MetadataKeyPath, in conversation: ConversationID)
        throws(ClientError)
    {
        let stored = try existingConversation(conversation)
        var metadata = stored.conversation.metadata
        metadata.set(value, at: path)
        do { try metadata.validate() } catch { throw ClientError(error) }
        let frame = Frame.setMetadata(
            SetMetadata(requestID: UUID(), conversationID: stored.id, keyPath: path, value: value))
        try commit([.metadata(stored.id, path: path, value: value)], command: frame, about: stored)
    }

    /// Deletes the metadata value at `path`.
    public func deleteMetadata(at path: MetadataKeyPath, in conversation: ConversationID) throws(ClientError) {
        let stored = try existingConversation(conversation)
        let frame = Frame.deleteMetadata(DeleteMetadata(requestID: UUID(), conversationID: stored.id, keyPath: path))
        try commit([.metadata(stored.id, path: path, value: nil)], command: frame, about: stored)
    }

    /// Deletes a conversation: from this user's devices, or for every participant.
    public func delete(_ conversation: ConversationID, mode: DeletionMode) throws(ClientError) {
        let stored = try existingConversation(conversation)
        let frame = Frame.deleteConversation(
            DeleteConversation(requestID: UUID(), conversationID: stored.id, mode: mode))
        try commit([.conversationDeleted(stored.id)], command: frame, about: stored)
    }

    /// Deletes the messages of a conversation positioned before `position` (the docs' delete
    /// with a position), from this user's devices or for every participant; the
    /// conversation and later messages stay.
    public func deleteMessages(in conversation: ConversationID, before position: MessagePosition, mode: DeletionMode)
        throws(ClientError)
    {
        let stored = try existingConversation(conversation)
        let frame = Frame.deleteConversation(
            DeleteConversation(requestID: UUID(), conversationID: stored.id, mode: mode, below: position))
        try commit([.messagesDeleted(stored.id, below: position)], command: frame, about: stored)
    }

    /// Marks every unread message of a conversation read (the docs' `markAllMessagesAsRead:`),
    /// those this device does not hold included (the node reads up to the latest one held).
    public func markAllMessagesAsRead(in conversation: ConversationID) throws(ClientError) {
        let stored = try existingConversation(conversation)
        let unread = try store.unreadMessageIDs(in: stored.id)
        var start = 0
        while start < unread.count {
            let chunk = Array(unread[start..<min(start + LocalStore.maxChangesPerApply, unread.count)])
            start += chunk.count
            var upTo: MessagePosition?
            for id in chunk {
                if let p = try store.message(id)?.message.position { upTo = max(upTo ?? p, p) }
            }
            var entry: OutboxEntry?
            if let upTo {
                entry = try OutboxEncoder.entry(
                    for: .markAllRead(MarkAllRead(requestID: UUID(), conversationID: stored.id, upTo: upTo)),
                    createdAt: environment.now())
            }
            try store.markRead(chunk, outbox: entry)
        }
        // The node may count unread messages this device does not hold (partial history):
        // read up to the latest message held, which covers them.
        if unread.isEmpty, stored.totalNumberOfUnreadMessages > 0, let last = stored.lastMessageID,
            let upTo = try store.message(last)?.message.position
        {
            try store.enqueue(
                try OutboxEncoder.entry(
                    for: .markAllRead(MarkAllRead(requestID: UUID(), conversationID: stored.id, upTo: upTo)),
                    createdAt: environment.now()))
        }
        outboxDidChange()
    }

    /// The user's unread messages over all conversations, right whatever part of the history
    /// this device holds (each conversation's `totalNumberOfUnreadMessages`, from the node).
    public func totalNumberOfUnreadMessages() throws(ClientError) -> Int { try store.totalNumberOfUnreadMessages() }

    /// How many conversations have unread messages (a badge's other number).
    public func numberOfConversationsWithUnreadMessages() throws(ClientError) -> Int {
        try store.numberOfConversationsWithUnreadMessages()
    }

    // MARK: helpers

    func existingConversation(_ id: ConversationID) throws(ClientError) -> StoredConversation {
        guard let stored = try store.conversation(id) else {
            throw ClientError(.notFound, "conversation \(id) is not in the local store")
        }
        return stored
    }

    /// Whether the node knows the conversation, or will before any command sent now
    /// (its creation is queued). Otherwise local edits need no command: the creation,
    /// sent with the first message, carries the conversation as it is then.
    func nodeKnows(_ stored: StoredConversation) throws(ClientError) -> Bool {
        if stored.isSynced || stored.conversation.creator != user { return true }
        return try store.outboxContains(stored.id.uuid)
    }

    /// Applies a local edit and, when the node knows the conversation, queues its command
    /// in the same transaction; then wakes the engine.
    func commit(_ changes: [RemoteChange], command: Frame, about stored: StoredConversation) throws(ClientError) {
        let entries = try nodeKnows(stored) ? [OutboxEncoder.entry(for: command, createdAt: environment.now())] : []
        try store.applyLocal(changes, outbox: entries)
        if !entries.isEmpty { outboxDidChange() }
    }
}
