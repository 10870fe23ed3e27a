import Foundation
import LaminaModel
import LaminaWire

extension ClientError.Code {
    /// A reaction key that is empty, over 64 UTF-8 bytes or holds a control character (SPEC §6.9).
    public static let invalidReactionKey = ClientError.Code(rawValue: ModelError.Code.invalidReactionKey.rawValue)
}

extension LaminaClient {
    /// Reacts to a message with `key` (an emoji or another short string: 1 to 64 UTF-8 bytes, no
    /// control characters). The message shows the reaction at once; the command waits in the
    /// outbox until connected, like every command, and the node tells the other participants
    /// (SPEC §6.9). Reacting again with a key already shown changes nothing.
    public func react(_ key: String, to message: MessageID) throws(ClientError) {
        try setReaction(key, on: message, present: true)
    }

    /// Takes back the local user's reaction `key` on a message (from every device of the user's
    /// that the node had heard of; one made meanwhile on another node survives, SPEC §6.9).
    public func unreact(_ key: String, from message: MessageID) throws(ClientError) {
        try setReaction(key, on: message, present: false)
    }

    private func setReaction(_ key: String, on id: MessageID, present: Bool) throws(ClientError) {
        do { try ReactionKey.validate(key) } catch { throw ClientError(error) }
        guard let stored = try store.message(id) else {
            throw ClientError(.notFound, "message \(id) is not in the local store")
        }
        let conversation = try existingConversation(stored.message.conversationID)
        guard conversation.conversation.participants.contains(user) else {
            throw ClientError(.notAllowed, "the local user is not a participant of conversation \(conversation.id)")
        }
        let frame = Frame.react(
            React(
                requestID: UUID(), conversationID: conversation.id, messageID: id, key: key,
                op: present ? .add : .remove))
        let entry = try OutboxEncoder.entry(for: frame, createdAt: environment.now())
        try store.applyLocal([.reaction(id, user: user, key: key, present: present)], outbox: [entry])
        outboxDidChange()
    }
}
