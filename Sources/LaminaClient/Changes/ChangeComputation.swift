import LaminaModel

/// Computes the object changes between two states of one object: one update change per
/// property that differs, carrying the value before and after. The object in each change
/// is the state after.
enum ChangeComputation {
    static func conversationUpdates(before: StoredConversation, after: StoredConversation) -> [ObjectChange] {
        let object = ChangedObject.conversation(after.conversation)
        var out: [ObjectChange] = []
        func add(_ property: String, _ b: PropertyValue?, _ a: PropertyValue?) {
            if b != a {
                out.append(ObjectChange(type: .update, object: object, property: property, before: b, after: a))
            }
        }
        let b = before.conversation
        let a = after.conversation
        add(ConversationProperty.identifier, .conversationID(b.id), .conversationID(a.id))
        add(ConversationProperty.participants, .participants(b.participants), .participants(a.participants))
        add(ConversationProperty.isDistinct, .bool(b.isDistinct), .bool(a.isDistinct))
        add(ConversationProperty.metadata, .metadata(b.metadata), .metadata(a.metadata))
        add(
            ConversationProperty.deliveryReceiptsEnabled, .bool(b.deliveryReceiptsEnabled),
            .bool(a.deliveryReceiptsEnabled))
        add(
            ConversationProperty.readReceiptsEnabled, .bool(b.readReceiptsEnabled), .bool(a.readReceiptsEnabled))
        add(ConversationProperty.isSynced, .bool(before.isSynced), .bool(after.isSynced))
        add(
            ConversationProperty.lastMessage, before.lastMessageID.map { .string($0.url) },
            after.lastMessageID.map { .string($0.url) })
        add(
            ConversationProperty.totalMessageCount, .integer(Int64(before.totalMessageCount)),
            .integer(Int64(after.totalMessageCount)))
        add(
            ConversationProperty.unreadMessageCount, .integer(Int64(before.unreadMessageCount)),
            .integer(Int64(after.unreadMessageCount)))
        add(
            ConversationProperty.totalNumberOfMessages, .integer(Int64(before.totalNumberOfMessages)),
            .integer(Int64(after.totalNumberOfMessages)))
        add(
            ConversationProperty.totalNumberOfUnreadMessages, .integer(Int64(before.totalNumberOfUnreadMessages)),
            .integer(Int64(after.totalNumberOfUnreadMessages)))
        return out
    }

    static func messageUpdates(before: StoredMessage, after: StoredMessage) -> [ObjectChange] {
        let object = ChangedObject.message(after.message)
        var out: [ObjectChange] = []
        func add(_ property: String, _ b: PropertyValue?, _ a: PropertyValue?) {
            if b != a {
                out.append(ObjectChange(type: .update, object: object, property: property, before: b, after: a))
            }
        }
        let b = before.message
        let a = after.message
        add(MessageProperty.conversation, .conversationID(b.conversationID), .conversationID(a.conversationID))
        add(MessageProperty.position, b.position.map(PropertyValue.position), a.position.map(PropertyValue.position))
        add(MessageProperty.sentAt, b.sentAt.map(PropertyValue.timestamp), a.sentAt.map(PropertyValue.timestamp))
        add(MessageProperty.isSent, .bool(b.isSent), .bool(a.isSent))
        add(MessageProperty.parts, .parts(b.parts), .parts(a.parts))
        add(MessageProperty.recipientStatus, .recipientStatus(b.recipientStatus), .recipientStatus(a.recipientStatus))
        add(MessageProperty.isUnread, .bool(before.isUnread), .bool(after.isUnread))
        add(
            MessageProperty.receivedAt, before.receivedAt.map(PropertyValue.timestamp),
            after.receivedAt.map(PropertyValue.timestamp))
        add(MessageProperty.reactions, .reactions(before.reactions), .reactions(after.reactions))
        add(
            MessageProperty.thread, b.thread.map { .integer(Int64(clamping: $0.replyCount)) },
            a.thread.map { .integer(Int64(clamping: $0.replyCount)) })
        add(
            MessageProperty.editedAt, before.editedAt.map(PropertyValue.timestamp),
            after.editedAt.map(PropertyValue.timestamp))
        return out
    }
}
