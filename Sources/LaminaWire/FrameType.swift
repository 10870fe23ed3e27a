/// The frame types of protocol version 1 and their numbers on the wire (SPEC §4, table 4.1).
/// Ranges: 0x00xx session, 0x01xx conversations, 0x02xx messages, 0x03xx sync, 0x04xx peers.
public enum FrameType: UInt16, CaseIterable, Hashable, Sendable {
    case hello = 0x0001
    case welcome = 0x0002
    case nonceRequest = 0x0003
    case nonce = 0x0004
    case authenticate = 0x0005
    case authenticated = 0x0006
    case resumeSession = 0x0007
    case ping = 0x0008
    case pong = 0x0009
    case ack = 0x000A
    case error = 0x000B
    case endSession = 0x000C
    case registerPushToken = 0x000D
    case blockUser = 0x000E
    case setPresence = 0x000F
    case followUser = 0x0010
    case createChannel = 0x0011
    case joinChannel = 0x0012
    case leaveChannel = 0x0013
    case sendChannelMessage = 0x0014
    case fetchChannel = 0x0015
    case deleteChannel = 0x0016

    case createConversation = 0x0101
    case addParticipants = 0x0102
    case removeParticipants = 0x0103
    case setMetadata = 0x0104
    case deleteMetadata = 0x0105
    case deleteConversation = 0x0106
    case markAllRead = 0x0107
    case typing = 0x0108
    case setNotificationLevel = 0x0109

    case sendMessage = 0x0201
    case markRead = 0x0202
    case deleteMessage = 0x0203
    case deliveryReceipt = 0x0204
    case updateMessageParts = 0x0205
    case react = 0x0206
    case sendReply = 0x0207

    case sync = 0x0301
    case fetchHistory = 0x0302
    case change = 0x0303
    case changeBatch = 0x0304
    case searchMessages = 0x0305

    case peerHello = 0x0401
    case versionVector = 0x0402
    case replicate = 0x0403
    case peerAck = 0x0404
    case peerPresence = 0x0405
    case peerPresenceRelayed = 0x0406
    case peerPresenceWithdrawn = 0x0407

    /// The type's name in the spec and in the vectors' readable form.
    public var name: String {
        switch self {
        case .hello: "hello"
        case .welcome: "welcome"
        case .nonceRequest: "nonce-request"
        case .nonce: "nonce"
        case .authenticate: "authenticate"
        case .authenticated: "authenticated"
        case .resumeSession: "resume-session"
        case .ping: "ping"
        case .pong: "pong"
        case .ack: "ack"
        case .error: "error"
        case .endSession: "end-session"
        case .registerPushToken: "register-push-token"
        case .blockUser: "block-user"
        case .setPresence: "set-presence"
        case .followUser: "follow-user"
        case .createChannel: "create-channel"
        case .joinChannel: "join-channel"
        case .leaveChannel: "leave-channel"
        case .sendChannelMessage: "send-channel-message"
        case .fetchChannel: "fetch-channel"
        case .deleteChannel: "delete-channel"
        case .createConversation: "create-conversation"
        case .addParticipants: "add-participants"
        case .removeParticipants: "remove-participants"
        case .setMetadata: "set-metadata"
        case .deleteMetadata: "delete-metadata"
        case .deleteConversation: "delete-conversation"
        case .markAllRead: "mark-all-read"
        case .typing: "typing"
        case .setNotificationLevel: "set-notification-level"
        case .sendMessage: "send-message"
        case .markRead: "mark-read"
        case .deleteMessage: "delete-message"
        case .deliveryReceipt: "delivery-receipt"
        case .updateMessageParts: "update-message-parts"
        case .react: "react"
        case .sendReply: "send-reply"
        case .sync: "sync"
        case .fetchHistory: "fetch-history"
        case .change: "change"
        case .changeBatch: "change-batch"
        case .searchMessages: "search-messages"
        case .peerHello: "peer-hello"
        case .versionVector: "version-vector"
        case .replicate: "replicate"
        case .peerAck: "peer-ack"
        case .peerPresence: "peer-presence"
        case .peerPresenceRelayed: "peer-presence-relayed"
        case .peerPresenceWithdrawn: "peer-presence-withdrawn"
        }
    }

    /// The largest payload a frame of this type can have (SPEC §4, table 4.1, column "max"),
    /// never more than the receiver's maximum frame size. Checked on the header.
    public func maxPayloadSize(_ limits: WireLimits) -> Int {
        let fixed: Int
        switch self {
        case .ping, .pong: fixed = 8
        case .nonceRequest, .endSession: fixed = 16
        case .typing, .sync, .setPresence: fixed = 32
        case .markRead, .markAllRead, .deleteConversation, .deleteMessage, .deliveryReceipt, .joinChannel,
            .leaveChannel,
            .fetchChannel, .deleteChannel, .setNotificationLevel:
            fixed = 64
        case .searchMessages: fixed = 320
        case .ack, .react, .fetchHistory: fixed = 128
        case .hello, .welcome, .error, .peerHello, .deleteMetadata, .registerPushToken, .blockUser, .followUser,
            .createChannel:
            fixed = 2_048
        case .nonce, .authenticate, .resumeSession: fixed = 8_448
        case .authenticated: fixed = 12_288
        case .createConversation, .addParticipants, .removeParticipants, .setMetadata, .sendMessage,
            .updateMessageParts, .sendReply, .sendChannelMessage,
            .change, .changeBatch, .versionVector, .replicate, .peerAck, .peerPresence, .peerPresenceRelayed,
            .peerPresenceWithdrawn:
            return max(0, limits.maxFrameSize)
        }
        return min(fixed, max(0, limits.maxFrameSize))
    }
}

/// Protocol constants (SPEC §5.1).
public enum WireProtocol {
    /// The protocol version this implementation speaks.
    public static let version: UInt16 = 1
}
