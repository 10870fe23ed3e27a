import Foundation
import LaminaModel
import LaminaWire

extension LaminaClient {
    /// Edits a message the local user sent (SPEC §6.2 UPDATE_MESSAGE_PARTS): its parts become
    /// `parts` (a part that stays keeps its id; 1 to 1,000 inline parts, no rich content). The
    /// local store changes at once, reported as an update of `parts` with before and after, and
    /// the edit is queued in the outbox: sent when connected, exactly once. The message must be
    /// held here and sent already (`.notFound`, `.invalidArgument`); only its sender may edit it
    /// (`.notAllowed`).
    public func edit(_ id: MessageID, parts: [MessagePart]) throws(ClientError) {
        guard let stored = try store.message(id) else {
            throw ClientError(.notFound, "message \(id) is not in the local store")
        }
        guard stored.message.sender == user else {
            throw ClientError(.notAllowed, "only the sender of message \(id) may edit it")
        }
        guard stored.message.isSent else {
            throw ClientError(.invalidArgument, "message \(id) is not sent yet: edit its draft instead")
        }
        do { try Message.validate(parts: parts) } catch { throw ClientError(error) }
        for part in parts {
            if case .external = part.content {
                throw ClientError(.invalidArgument, "an edit carries inline parts only (2 KiB or less each)")
            }
        }
        let conversation = try existingConversation(stored.message.conversationID)
        let frame = Frame.updateMessageParts(
            UpdateMessageParts(requestID: UUID(), conversationID: conversation.id, messageID: id, parts: parts))
        try commit([.messageParts(id, parts: parts, editedAt: environment.now())], command: frame, about: conversation)
    }
}
