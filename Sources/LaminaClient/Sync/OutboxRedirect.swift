import LaminaModel
import LaminaWire

/// Queued commands that name a conversation the node has since resolved into another (a
/// distinct conversation created concurrently elsewhere) are sent to the survivor: the
/// node takes no commands for the loser's identifier. Pure.
enum OutboxRedirect {
    /// The conversation a queued command addresses; nil for CREATE_CONVERSATION (its id is
    /// the command's own) and for frames that are not commands.
    static func conversation(of frame: Frame) -> ConversationID? {
        switch frame {
        case .addParticipants(let f), .removeParticipants(let f): f.conversationID
        case .setMetadata(let f): f.conversationID
        case .deleteMetadata(let f): f.conversationID
        case .deleteConversation(let f): f.conversationID
        case .markAllRead(let f): f.conversationID
        case .setNotificationLevel(let f): f.conversationID
        case .sendMessage(let f): f.conversationID
        case .markRead(let f): f.conversationID
        case .deleteMessage(let f): f.conversationID
        case .deliveryReceipt(let f): f.conversationID
        case .react(let f): f.conversationID
        case .updateMessageParts(let f): f.conversationID
        default: nil
        }
    }

    /// `frame` addressed to `conversation` instead; other frames unchanged.
    static func redirect(_ frame: Frame, to conversation: ConversationID) -> Frame {
        switch frame {
        case .addParticipants(var f):
            f.conversationID = conversation
            return .addParticipants(f)
        case .removeParticipants(var f):
            f.conversationID = conversation
            return .removeParticipants(f)
        case .setMetadata(var f):
            f.conversationID = conversation
            return .setMetadata(f)
        case .deleteMetadata(var f):
            f.conversationID = conversation
            return .deleteMetadata(f)
        case .deleteConversation(var f):
            f.conversationID = conversation
            return .deleteConversation(f)
        case .markAllRead(var f):
            f.conversationID = conversation
            return .markAllRead(f)
        case .setNotificationLevel(var f):
            f.conversationID = conversation
            return .setNotificationLevel(f)
        case .sendMessage(var f):
            f.conversationID = conversation
            return .sendMessage(f)
        case .markRead(var f):
            f.conversationID = conversation
            return .markRead(f)
        case .deleteMessage(var f):
            f.conversationID = conversation
            return .deleteMessage(f)
        case .deliveryReceipt(var f):
            f.conversationID = conversation
            return .deliveryReceipt(f)
        case .react(var f):
            f.conversationID = conversation
            return .react(f)
        case .updateMessageParts(var f):
            f.conversationID = conversation
            return .updateMessageParts(f)
        default: return frame
        }
    }
}
