import Foundation
import LaminaModel
import NIOCore

// Message commands (SPEC §6.2), client -> node.

/// SEND_MESSAGE (0x0201). The message id is client-chosen: a retry with the same id and
/// the same content is acknowledged again, never stored twice (SPEC §7).
/// ```
/// +-----------------+----------------------+-------------------------+---------------+
/// | message id (16) | conversation id (16) | parts (count + parts)   | push (opt)    |
/// +-----------------+----------------------+-------------------------+---------------+
/// ```
public struct SendMessage: Hashable, Sendable {
    public var messageID: MessageID
    public var conversationID: ConversationID
    /// 1 to 1,000 parts, inline (<= 2 KB) or content references.
    public var parts: [MessagePart]
    public var push: PushConfiguration?
    /// The thread root this message replies to (replies feature, SPEC §5.1 bit 15): the frame
    /// is then SEND_REPLY (0x0207), SEND_MESSAGE's fields with `replyTo` after the conversation.
    public var replyTo: MessageID?
    /// The users the message mentions (mentions feature, SPEC §5.1 bit 17, §3.17).
    public var mentions: Set<UserID>

    public init(
        messageID: MessageID, conversationID: ConversationID, parts: [MessagePart], push: PushConfiguration? = nil,
        replyTo: MessageID? = nil, mentions: Set<UserID> = []
    ) {
        self.messageID = messageID
        self.conversationID = conversationID
        self.parts = parts
        self.push = push
        self.replyTo = replyTo
        self.mentions = mentions
    }
}

/// MARK_READ (0x0202): one message is read by the sender.
/// ```
/// +-----------------+----------------------+-----------------+
/// | request id (16) | conversation id (16) | message id (16) |
/// +-----------------+----------------------+-----------------+
/// ```
public struct MarkRead: Hashable, Sendable {
    public var requestID: UUID
    public var conversationID: ConversationID
    public var messageID: MessageID

    public init(requestID: UUID, conversationID: ConversationID, messageID: MessageID) {
        self.requestID = requestID
        self.conversationID = conversationID
        self.messageID = messageID
    }
}

/// DELETE_MESSAGE (0x0203).
/// ```
/// +-----------------+----------------------+-----------------+-----------+
/// | request id (16) | conversation id (16) | message id (16) | mode (u8) |
/// +-----------------+----------------------+-----------------+-----------+
/// ```
public struct DeleteMessage: Hashable, Sendable {
    public var requestID: UUID
    public var conversationID: ConversationID
    public var messageID: MessageID
    public var mode: DeletionMode

    public init(requestID: UUID, conversationID: ConversationID, messageID: MessageID, mode: DeletionMode) {
        self.requestID = requestID
        self.conversationID = conversationID
        self.messageID = messageID
        self.mode = mode
    }
}

/// UPDATE_MESSAGE_PARTS (0x0205): the message's parts become `parts` (added, replaced or
/// removed as a whole list; part ids say which part is which). Only the message's sender may,
/// and the Server API on its behalf; devices learn it as `message-parts-changed` (§6.4).
/// ```
/// +-----------------+----------------------+-----------------+-------------------------+
/// | request id (16) | conversation id (16) | message id (16) | parts (count + parts)   |
/// +-----------------+----------------------+-----------------+-------------------------+
/// ```
public struct UpdateMessageParts: Hashable, Sendable {
    public var requestID: UUID
    public var conversationID: ConversationID
    public var messageID: MessageID
    /// 1 to 1,000 parts, as in SEND_MESSAGE.
    public var parts: [MessagePart]

    public init(requestID: UUID, conversationID: ConversationID, messageID: MessageID, parts: [MessagePart]) {
        self.requestID = requestID
        self.conversationID = conversationID
        self.messageID = messageID
        self.parts = parts
    }
}

/// DELIVERY_RECEIPT (0x0204): this device holds every message of the conversation up to
/// and including `upTo` (the node moves the sender's status to delivered).
/// ```
/// +-----------------+----------------------+--------------+
/// | request id (16) | conversation id (16) | up to (HLC)  |
/// +-----------------+----------------------+--------------+
/// ```
public struct DeliveryReceipt: Hashable, Sendable {
    public var requestID: UUID
    public var conversationID: ConversationID
    public var upTo: MessagePosition

    public init(requestID: UUID, conversationID: ConversationID, upTo: MessagePosition) {
        self.requestID = requestID
        self.conversationID = conversationID
        self.upTo = upTo
    }
}

// MARK: - Codec

extension SendMessage {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeID(messageID)
        b.writeID(conversationID)
        if let replyTo { b.writeID(replyTo) }
        try b.writeParts(parts)
        try b.writeMessageTrailer(push: push, mentions: mentions)
    }

    /// SEND_MESSAGE, or SEND_REPLY (`reply`): the same fields with the root after the conversation.
    static func decode(from b: inout PayloadReader, _ limits: WireLimits, reply: Bool = false) throws(WireError)
        -> SendMessage
    {
        let id = try b.readID(MessageID.self, "the message id")
        let conversation = try b.readID(ConversationID.self, "the conversation id")
        let replyTo = reply ? try b.readID(MessageID.self, "the message replied to") : nil
        let parts = try b.readParts(limits)
        let (push, mentions) = try b.readMessageTrailer(limits)
        return SendMessage(
            messageID: id, conversationID: conversation, parts: parts, push: push, replyTo: replyTo, mentions: mentions)
    }
}

extension MarkRead {
    func encode(into b: inout ByteBuffer) {
        b.writeUUID(requestID)
        b.writeID(conversationID)
        b.writeID(messageID)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> MarkRead {
        let id = try b.readUUID("the request id")
        let conversation = try b.readID(ConversationID.self, "the conversation id")
        let message = try b.readID(MessageID.self, "the message id")
        return MarkRead(requestID: id, conversationID: conversation, messageID: message)
    }
}

extension DeleteMessage {
    func encode(into b: inout ByteBuffer) {
        b.writeUUID(requestID)
        b.writeID(conversationID)
        b.writeID(messageID)
        b.writeInteger(mode.rawValue, as: UInt8.self)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> DeleteMessage {
        let id = try b.readUUID("the request id")
        let conversation = try b.readID(ConversationID.self, "the conversation id")
        let message = try b.readID(MessageID.self, "the message id")
        let mode = try b.readDeletionMode()
        return DeleteMessage(requestID: id, conversationID: conversation, messageID: message, mode: mode)
    }
}

extension UpdateMessageParts {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeUUID(requestID)
        b.writeID(conversationID)
        b.writeID(messageID)
        try b.writeParts(parts)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> UpdateMessageParts {
        let id = try b.readUUID("the request id")
        let conversation = try b.readID(ConversationID.self, "the conversation id")
        let message = try b.readID(MessageID.self, "the message id")
        let parts = try b.readParts(limits)
        return UpdateMessageParts(requestID: id, conversationID: conversation, messageID: message, parts: parts)
    }
}

extension DeliveryReceipt {
    func encode(into b: inout ByteBuffer) {
        b.writeUUID(requestID)
        b.writeID(conversationID)
        b.writeHLC(upTo)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> DeliveryReceipt {
        let id = try b.readUUID("the request id")
        let conversation = try b.readID(ConversationID.self, "the conversation id")
        let upTo = try b.readHLC("the position")
        return DeliveryReceipt(requestID: id, conversationID: conversation, upTo: upTo)
    }
}
