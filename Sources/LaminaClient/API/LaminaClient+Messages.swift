import Foundation
import LaminaModel
import LaminaWire

extension LaminaClient {
    /// A new message from parts (1 to 1,000, distinct part ids), optional push options
    /// (alert, sound, title...) and the users it mentions (at most 250). With `replyTo`, a reply
    /// in that message's thread (the root must be in the same conversation when sent, and not a
    /// reply itself). Validated now; sent by `send(_:in:)`.
    public func newMessage(
        parts: [MessagePart], push: PushConfiguration? = nil, replyTo: MessageID? = nil, mentions: Set<UserID> = []
    ) throws(ClientError) -> MessageDraft {
        guard mentions.count <= Limits.maxParticipants else {
            throw ClientError(
                .invalidArgument, "a message mentions at most \(Limits.maxParticipants) users, not \(mentions.count)")
        }
        let draft = MessageDraft(id: .timeOrdered(), parts: parts, push: push, replyTo: replyTo, mentions: mentions)
        let probe = Message(id: draft.id, conversationID: .random(), sender: user, parts: parts, push: push)
        do { try probe.validate() } catch { throw ClientError(error) }
        return draft
    }

    /// Sends a message: validates it, stores it with its outbox entry (and, for the first
    /// message of a conversation created here, the conversation's creation before it) in one
    /// transaction, and returns at once. The engine sends it when connected, in outbox
    /// order, exactly once by its client-chosen id. Sending the same draft again returns
    /// the stored message and queues nothing.
    @discardableResult
    public func send(_ draft: MessageDraft, in conversation: ConversationID) throws(ClientError) -> StoredMessage {
        if let existing = try store.message(draft.id) { return existing }
        let stored = try existingConversation(conversation)
        guard stored.conversation.participants.contains(user) else {
            throw ClientError(.notAllowed, "the local user is not a participant of conversation \(stored.id)")
        }
        if let root = draft.replyTo { try checkReplyTarget(root, in: stored.id) }
        let message = Message(
            id: draft.id, conversationID: stored.id, sender: user, parts: draft.parts, push: draft.push,
            replyTo: draft.replyTo, mentions: draft.mentions)
        do { try message.validate() } catch { throw ClientError(error) }
        var entries: [OutboxEntry] = []
        let now = environment.now()
        if !stored.isSynced, stored.conversation.creator == user, !(try store.outboxContains(stored.id.uuid)) {
            let c = stored.conversation
            entries.append(
                try OutboxEncoder.entry(
                    for: .createConversation(
                        CreateConversation(
                            conversationID: c.id, participants: c.participants.subtracting([user]),
                            options: ConversationOptions(
                                isDistinct: c.isDistinct, metadata: c.metadata,
                                deliveryReceiptsEnabled: c.deliveryReceiptsEnabled,
                                readReceiptsEnabled: c.readReceiptsEnabled))), createdAt: now))
        }
        entries.append(
            try OutboxEncoder.entry(
                for: .sendMessage(
                    SendMessage(
                        messageID: message.id, conversationID: stored.id, parts: message.parts, push: message.push,
                        replyTo: message.replyTo, mentions: message.mentions)),
                createdAt: now))
        // Rich parts: their staged bytes move under the content directory; the outbox holds
        // the message back until the uploader has put them on the node.
        let adopted = try adoptStagedContent(of: message)
        let result: StoredMessage
        do { result = try store.insertLocalMessage(message, outbox: entries) } catch {
            restoreStagedContent(adopted)
            throw error
        }
        if !adopted.isEmpty { transfers.uploader.kick() }
        outboxDidChange()
        return result
    }

    /// Whether the node has accepted the message (it has a position).
    public func isSent(_ id: MessageID) throws(ClientError) -> Bool {
        guard let stored = try store.message(id) else {
            throw ClientError(.notFound, "message \(id) is not in the local store")
        }
        return stored.message.isSent
    }

    /// Marks one message read by the local user (the docs' `markAsRead:`). The user's own
    /// messages are always read; marking one changes nothing.
    public func markAsRead(_ id: MessageID) throws(ClientError) {
        guard let stored = try store.message(id) else {
            throw ClientError(.notFound, "message \(id) is not in the local store")
        }
        guard stored.message.sender != user else { return }
        let entry = try OutboxEncoder.entry(
            for: .markRead(MarkRead(requestID: UUID(), conversationID: stored.message.conversationID, messageID: id)),
            createdAt: environment.now())
        if !(try store.markRead([id], outbox: entry)).isEmpty { outboxDidChange() }
    }

    /// Deletes a message: from this user's devices, or for every participant.
    public func delete(_ id: MessageID, mode: DeletionMode) throws(ClientError) {
        guard let stored = try store.message(id) else {
            throw ClientError(.notFound, "message \(id) is not in the local store")
        }
        let conversation = try existingConversation(stored.message.conversationID)
        let frame = Frame.deleteMessage(
            DeleteMessage(requestID: UUID(), conversationID: conversation.id, messageID: id, mode: mode))
        try commit([.messageDeleted(id)], command: frame, about: conversation)
    }

    /// Why a message did not go out, when the node refused it for good.
    public func sendFailure(of id: MessageID) throws(ClientError) -> OutboxFailure? {
        try store.failure(for: id.uuid)
    }
}
