import LaminaMerge
import LaminaModel
import NIOCore

/// One sync frame (SPEC §4): a fixed 8-byte header and a payload. One case per frame type;
/// the associated values are the payloads.
public enum Frame: Hashable, Sendable {
    // Session (SPEC §5)
    case hello(Hello)
    case welcome(Welcome)
    case nonceRequest(NonceRequest)
    case nonce(Nonce)
    case authenticate(Authenticate)
    case authenticated(Authenticated)
    case resumeSession(ResumeSession)
    case ping(Ping)
    case pong(Ping)
    case ack(Ack)
    case error(ErrorFrame)
    case endSession(EndSession)
    case registerPushToken(RegisterPushToken)
    case blockUser(BlockUser)
    case setPresence(SetPresence)
    case followUser(FollowUser)
    // Channels (SPEC §6.8)
    case createChannel(CreateChannel)
    case joinChannel(ChannelRequest)
    case leaveChannel(ChannelRequest)
    case sendChannelMessage(SendChannelMessage)
    case fetchChannel(FetchChannel)
    case deleteChannel(ChannelRequest)
    // Conversations (SPEC §6.1)
    case createConversation(CreateConversation)
    case addParticipants(ParticipantsUpdate)
    case removeParticipants(ParticipantsUpdate)
    case setMetadata(SetMetadata)
    case deleteMetadata(DeleteMetadata)
    case deleteConversation(DeleteConversation)
    case markAllRead(MarkAllRead)
    case typing(Typing)
    case setNotificationLevel(SetNotificationLevel)
    // Messages (SPEC §6.2)
    case sendMessage(SendMessage)
    case markRead(MarkRead)
    case deleteMessage(DeleteMessage)
    case deliveryReceipt(DeliveryReceipt)
    case updateMessageParts(UpdateMessageParts)
    case react(React)
    // Sync (SPEC §6.3)
    case sync(SyncRequest)
    case fetchHistory(FetchHistory)
    case change(Change)
    case changeBatch(ChangeBatch)
    case searchMessages(SearchMessages)
    // Peers (SPEC §6.5)
    case peerHello(PeerHello)
    case versionVector(VersionVector)
    case replicate(Replicate)
    case peerAck(PeerAck)
    case peerPresence(PeerPresence)
    case peerPresenceRelayed(PeerPresenceRelayed)
    case peerPresenceWithdrawn(PeerPresenceWithdrawn)

    /// The frame's type number.
    public var type: FrameType {
        switch self {
        case .hello: .hello
        case .welcome: .welcome
        case .nonceRequest: .nonceRequest
        case .nonce: .nonce
        case .authenticate: .authenticate
        case .authenticated: .authenticated
        case .resumeSession: .resumeSession
        case .ping: .ping
        case .pong: .pong
        case .ack: .ack
        case .error: .error
        case .endSession: .endSession
        case .registerPushToken: .registerPushToken
        case .blockUser: .blockUser
        case .setPresence: .setPresence
        case .followUser: .followUser
        case .createChannel: .createChannel
        case .joinChannel: .joinChannel
        case .leaveChannel: .leaveChannel
        case .sendChannelMessage: .sendChannelMessage
        case .fetchChannel: .fetchChannel
        case .deleteChannel: .deleteChannel
        case .createConversation: .createConversation
        case .addParticipants: .addParticipants
        case .removeParticipants: .removeParticipants
        case .setMetadata: .setMetadata
        case .deleteMetadata: .deleteMetadata
        case .deleteConversation: .deleteConversation
        case .markAllRead: .markAllRead
        case .typing: .typing
        case .setNotificationLevel: .setNotificationLevel
        case .sendMessage(let f): f.replyTo == nil ? .sendMessage : .sendReply
        case .markRead: .markRead
        case .deleteMessage: .deleteMessage
        case .deliveryReceipt: .deliveryReceipt
        case .updateMessageParts: .updateMessageParts
        case .react: .react
        case .sync: .sync
        case .fetchHistory: .fetchHistory
        case .searchMessages: .searchMessages
        case .change: .change
        case .changeBatch: .changeBatch
        case .peerHello: .peerHello
        case .versionVector: .versionVector
        case .replicate: .replicate
        case .peerAck: .peerAck
        case .peerPresence: .peerPresence
        case .peerPresenceRelayed: .peerPresenceRelayed
        case .peerPresenceWithdrawn: .peerPresenceWithdrawn
        }
    }
}

extension Frame {
    /// Appends the frame (header and payload) to `buffer`. Checks every limit of the spec
    /// first-hand (SPEC §3.15), so whatever it writes decodes with `WireLimits.default`.
    /// On error `buffer` is left as it was.
    public func encode(into buffer: inout ByteBuffer) throws(WireError) {
        let start = buffer.writerIndex
        // Length (patched below), type, flags (none for version-1 types), in one write.
        buffer.writeInteger(UInt64(type.rawValue) << 16, as: UInt64.self)
        do {
            try encodePayload(into: &buffer)
        } catch {
            buffer.moveWriterIndex(to: start)
            throw error
        }
        let length = buffer.writerIndex &- start &- FrameHeader.size
        // SPEC §2.3 (and each type's maximum, table 4.1).
        guard length <= type.maxPayloadSize(.default) else {
            buffer.moveWriterIndex(to: start)
            throw WireError(
                .frameTooLarge,
                "a \(type.name) payload of \(length) bytes exceeds its maximum of \(type.maxPayloadSize(.default))")
        }
        buffer.setInteger(UInt32(truncatingIfNeeded: length), at: start, as: UInt32.self)
    }

    /// The frame's bytes in a new buffer.
    public func encoded() throws(WireError) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: 64)
        try encode(into: &buffer)
        return buffer
    }

    /// Decodes exactly one whole frame: `buffer`'s readable bytes must be one header and its
    /// payload, nothing less (`truncated`) and nothing more (`trailing-bytes`). An unknown
    /// type fails with `unknown-frame-type` even when marked skippable (only a stream skips).
    public static func decode(exactly buffer: ByteBuffer, limits: WireLimits = .default) throws(WireError) -> Frame {
        guard let header = FrameHeader.peek(buffer) else {
            throw WireError(.truncated, "\(buffer.readableBytes) bytes are less than a frame header")
        }
        let disposition = try header.check(limits)
        let length = Int(header.payloadLength)
        let available = buffer.readableBytes &- FrameHeader.size
        guard available >= length else {
            throw WireError(.truncated, "the header declares \(length) payload bytes, \(available) follow")
        }
        guard available == length else {
            throw WireError(.trailingBytes, "\(available &- length) bytes follow the frame")
        }
        guard case .decode(let type) = disposition else {
            throw WireError(
                .unknownFrameType, "frame type 0x\(String(header.type, radix: 16)) is unknown (marked skippable)")
        }
        return try decodePayload(type, in: buffer, offset: FrameHeader.size, length: length, limits)
    }

    /// Decodes the payload at `offset` (from the reader index) of `buffer`, whose `length`
    /// bytes are known to be readable, straight from the buffer's storage.
    static func decodePayload(_ type: FrameType, in buffer: ByteBuffer, offset: Int, length: Int, _ limits: WireLimits)
        throws(WireError) -> Frame
    {
        // `withUnsafeReadableBytes` rethrows untyped errors: the only error the closure can
        // throw is a `WireError` (boxed on the error path only, never on success).
        do {
            return try buffer.withUnsafeReadableBytes { raw in
                var reader = PayloadReader(UnsafeRawBufferPointer(rebasing: raw[offset..<(offset &+ length)]))
                return try decodePayload(type, from: &reader, limits)
            }
        } catch let error as WireError {
            throw error
        } catch {
            throw WireError(.internalError, "unexpected error \(error)")
        }
    }

    func encodePayload(into b: inout ByteBuffer) throws(WireError) {
        switch self {
        case .hello(let f): try f.encode(into: &b)
        case .welcome(let f): try f.encode(into: &b)
        case .nonceRequest(let f): f.encode(into: &b)
        case .nonce(let f): try f.encode(into: &b)
        case .authenticate(let f): try f.encode(into: &b)
        case .authenticated(let f): try f.encode(into: &b)
        case .resumeSession(let f): try f.encode(into: &b)
        case .ping(let f): f.encode(into: &b)
        case .pong(let f): f.encode(into: &b)
        case .ack(let f): f.encode(into: &b)
        case .error(let f): try f.encode(into: &b)
        case .endSession(let f): f.encode(into: &b)
        case .registerPushToken(let f): try f.encode(into: &b)
        case .blockUser(let f): try f.encode(into: &b)
        case .setPresence(let f): f.encode(into: &b)
        case .followUser(let f): try f.encode(into: &b)
        case .createChannel(let f): try f.encode(into: &b)
        case .joinChannel(let f), .leaveChannel(let f), .deleteChannel(let f): f.encode(into: &b)
        case .sendChannelMessage(let f): try f.encode(into: &b)
        case .fetchChannel(let f): f.encode(into: &b)
        case .createConversation(let f): try f.encode(into: &b)
        case .addParticipants(let f): try f.encode(into: &b)
        case .removeParticipants(let f): try f.encode(into: &b)
        case .setMetadata(let f): try f.encode(into: &b)
        case .deleteMetadata(let f): try f.encode(into: &b)
        case .deleteConversation(let f): f.encode(into: &b)
        case .markAllRead(let f): f.encode(into: &b)
        case .typing(let f): f.encode(into: &b)
        case .setNotificationLevel(let f): f.encode(into: &b)
        case .sendMessage(let f): try f.encode(into: &b)
        case .markRead(let f): f.encode(into: &b)
        case .deleteMessage(let f): f.encode(into: &b)
        case .deliveryReceipt(let f): f.encode(into: &b)
        case .updateMessageParts(let f): try f.encode(into: &b)
        case .react(let f): try f.encode(into: &b)
        case .sync(let f): f.encode(into: &b)
        case .fetchHistory(let f): try f.encode(into: &b)
        case .searchMessages(let f): try f.encode(into: &b)
        case .change(let f): try f.encode(into: &b)
        case .changeBatch(let f): try f.encode(into: &b)
        case .peerHello(let f): try f.encode(into: &b)
        case .versionVector(let f): try f.encode(into: &b)
        case .replicate(let f): try f.encode(into: &b)
        case .peerAck(let f): try f.encode(into: &b)
        case .peerPresence(let f): try f.encode(into: &b)
        case .peerPresenceRelayed(let f): try f.encode(into: &b)
        case .peerPresenceWithdrawn(let f): try f.encode(into: &b)
        }
    }

    /// Decodes a whole payload of a known type; every payload byte must be consumed (SPEC §2.4).
    static func decodePayload(_ type: FrameType, from b: inout PayloadReader, _ limits: WireLimits) throws(WireError)
        -> Frame
    {
        let frame: Frame
        switch type {
        case .hello: frame = .hello(try Hello.decode(from: &b, limits))
        case .welcome: frame = .welcome(try Welcome.decode(from: &b, limits))
        case .nonceRequest: frame = .nonceRequest(try NonceRequest.decode(from: &b, limits))
        case .nonce: frame = .nonce(try Nonce.decode(from: &b, limits))
        case .authenticate: frame = .authenticate(try Authenticate.decode(from: &b, limits))
        case .authenticated: frame = .authenticated(try Authenticated.decode(from: &b, limits))
        case .resumeSession: frame = .resumeSession(try ResumeSession.decode(from: &b, limits))
        case .ping: frame = .ping(try Ping.decode(from: &b, limits))
        case .pong: frame = .pong(try Ping.decode(from: &b, limits))
        case .ack: frame = .ack(try Ack.decode(from: &b, limits))
        case .error: frame = .error(try ErrorFrame.decode(from: &b, limits))
        case .endSession: frame = .endSession(try EndSession.decode(from: &b, limits))
        case .registerPushToken: frame = .registerPushToken(try RegisterPushToken.decode(from: &b, limits))
        case .blockUser: frame = .blockUser(try BlockUser.decode(from: &b, limits))
        case .setPresence: frame = .setPresence(try SetPresence.decode(from: &b, limits))
        case .followUser: frame = .followUser(try FollowUser.decode(from: &b, limits))
        case .createChannel: frame = .createChannel(try CreateChannel.decode(from: &b, limits))
        case .joinChannel: frame = .joinChannel(try ChannelRequest.decode(from: &b, limits))
        case .leaveChannel: frame = .leaveChannel(try ChannelRequest.decode(from: &b, limits))
        case .sendChannelMessage: frame = .sendChannelMessage(try SendChannelMessage.decode(from: &b, limits))
        case .fetchChannel: frame = .fetchChannel(try FetchChannel.decode(from: &b, limits))
        case .deleteChannel: frame = .deleteChannel(try ChannelRequest.decode(from: &b, limits))
        case .createConversation: frame = .createConversation(try CreateConversation.decode(from: &b, limits))
        case .addParticipants: frame = .addParticipants(try ParticipantsUpdate.decode(from: &b, limits))
        case .removeParticipants: frame = .removeParticipants(try ParticipantsUpdate.decode(from: &b, limits))
        case .setMetadata: frame = .setMetadata(try SetMetadata.decode(from: &b, limits))
        case .deleteMetadata: frame = .deleteMetadata(try DeleteMetadata.decode(from: &b, limits))
        case .deleteConversation: frame = .deleteConversation(try DeleteConversation.decode(from: &b, limits))
        case .markAllRead: frame = .markAllRead(try MarkAllRead.decode(from: &b, limits))
        case .typing: frame = .typing(try Typing.decode(from: &b, limits))
        case .setNotificationLevel:
            frame = .setNotificationLevel(try SetNotificationLevel.decode(from: &b, limits))
        case .sendMessage: frame = .sendMessage(try SendMessage.decode(from: &b, limits))
        case .sendReply: frame = .sendMessage(try SendMessage.decode(from: &b, limits, reply: true))
        case .markRead: frame = .markRead(try MarkRead.decode(from: &b, limits))
        case .deleteMessage: frame = .deleteMessage(try DeleteMessage.decode(from: &b, limits))
        case .deliveryReceipt: frame = .deliveryReceipt(try DeliveryReceipt.decode(from: &b, limits))
        case .updateMessageParts: frame = .updateMessageParts(try UpdateMessageParts.decode(from: &b, limits))
        case .react: frame = .react(try React.decode(from: &b, limits))
        case .sync: frame = .sync(try SyncRequest.decode(from: &b, limits))
        case .fetchHistory: frame = .fetchHistory(try FetchHistory.decode(from: &b, limits))
        case .searchMessages: frame = .searchMessages(try SearchMessages.decode(from: &b, limits))
        case .change: frame = .change(try Change.decode(from: &b, limits))
        case .changeBatch: frame = .changeBatch(try ChangeBatch.decode(from: &b, limits))
        case .peerHello: frame = .peerHello(try PeerHello.decode(from: &b, limits))
        case .versionVector: frame = .versionVector(try VersionVector.decode(from: &b, limits))
        case .replicate: frame = .replicate(try Replicate.decode(from: &b, limits))
        case .peerAck: frame = .peerAck(try PeerAck.decode(from: &b, limits))
        case .peerPresence: frame = .peerPresence(try PeerPresence.decode(from: &b, limits))
        case .peerPresenceRelayed: frame = .peerPresenceRelayed(try PeerPresenceRelayed.decode(from: &b, limits))
        case .peerPresenceWithdrawn: frame = .peerPresenceWithdrawn(try PeerPresenceWithdrawn.decode(from: &b, limits))
        }
        // SPEC §2.4: "A payload MUST be consumed exactly by its fields."
        guard b.readableBytes == 0 else {
            throw WireError(.trailingBytes, "\(b.readableBytes) bytes follow the fields of a \(type.name) payload")
        }
        return frame
    }
}
