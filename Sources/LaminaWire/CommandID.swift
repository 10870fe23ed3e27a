import Foundation

extension Frame {
    /// The client-chosen id of a command (SPEC §7) — the object's id for creations, else the
    /// request id — which the node's ACK or ERROR carries; nil for frames that are not commands.
    public var commandID: UUID? {
        switch self {
        case .createConversation(let f): f.conversationID.uuid
        case .sendMessage(let f): f.messageID.uuid
        case .addParticipants(let f), .removeParticipants(let f): f.requestID
        case .setMetadata(let f): f.requestID
        case .deleteMetadata(let f): f.requestID
        case .deleteConversation(let f): f.requestID
        case .markAllRead(let f): f.requestID
        case .setNotificationLevel(let f): f.requestID
        case .markRead(let f): f.requestID
        case .deleteMessage(let f): f.requestID
        case .deliveryReceipt(let f): f.requestID
        case .updateMessageParts(let f): f.requestID
        case .react(let f): f.requestID
        case .sync(let f): f.requestID
        case .fetchHistory(let f): f.requestID
        case .searchMessages(let f): f.requestID
        case .nonceRequest(let f): f.requestID
        case .authenticate(let f): f.requestID
        case .resumeSession(let f): f.requestID
        case .endSession(let f): f.requestID
        case .registerPushToken(let f): f.requestID
        case .blockUser(let f): f.requestID
        case .setPresence(let f): f.requestID
        case .followUser(let f): f.requestID
        case .createChannel(let f): f.channelID.uuid
        case .joinChannel(let f), .leaveChannel(let f), .deleteChannel(let f): f.requestID
        case .sendChannelMessage(let f): f.messageID.uuid
        case .fetchChannel(let f): f.requestID
        default: nil
        }
    }
}
