import LaminaModel
import LaminaStore
import LaminaWire

/// A command's feed changes carry the seqs its appends returned; on PostgreSQL's set-oriented
/// group commit those are provisional until the group's feeds are written, and the writer
/// replaces them here before the command completes (ACK and fan-out see the real ones).
extension CommandResult: ProvisionalFeedSeqs {
    func resolvingFeedSeqs(_ resolve: (UserID, UInt64) -> UInt64) -> CommandResult {
        guard case .applied(let ack, var changes) = self else { return self }
        for i in changes.indices { changes[i].seq = resolve(changes[i].user, changes[i].seq) }
        return .applied(ack, changes)
    }
}

extension Frame {
    /// The conversation a command writes to, when its frame names one: the store's writer
    /// locks a group's conversations ahead, in one order, when several nodes share it.
    var writtenConversation: ConversationID? {
        switch self {
        case .sendMessage(let f): f.conversationID
        case .markAllRead(let f): f.conversationID
        case .markRead(let f): f.conversationID
        case .deleteMessage(let f): f.conversationID
        case .deliveryReceipt(let f): f.conversationID
        case .updateMessageParts(let f): f.conversationID
        case .react(let f): f.conversationID
        case .setMetadata(let f): f.conversationID
        case .deleteMetadata(let f): f.conversationID
        case .deleteConversation(let f): f.conversationID
        case .addParticipants(let f), .removeParticipants(let f): f.conversationID
        default: nil
        }
    }
}
