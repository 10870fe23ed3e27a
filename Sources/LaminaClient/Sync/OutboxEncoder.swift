import Foundation
import LaminaModel
import LaminaWire
import NIOCore

/// What an outbox entry asks of the node: one client command frame type (SPEC §6.1, §6.2).
/// The raw value is the entry's `kind` in the store.
public enum OutboxCommandKind: String, Hashable, Sendable, CaseIterable {
    case createConversation = "conversation.create"
    case addParticipants = "conversation.add-participants"
    case removeParticipants = "conversation.remove-participants"
    case setMetadata = "conversation.set-metadata"
    case deleteMetadata = "conversation.delete-metadata"
    case deleteConversation = "conversation.delete"
    case markAllRead = "conversation.mark-all-read"
    case setNotificationLevel = "conversation.set-notification-level"
    case sendMessage = "message.send"
    case markRead = "message.mark-read"
    case deleteMessage = "message.delete"
    case deliveryReceipt = "message.delivery-receipt"
    case react = "message.react"
    /// An edit by the sender (UPDATE_MESSAGE_PARTS, SPEC §6.2).
    case updateMessageParts = "message.update-parts"
}

extension OutboxCommandKind {
    /// The frame type of the command.
    var frameType: FrameType {
        switch self {
        case .createConversation: .createConversation
        case .addParticipants: .addParticipants
        case .removeParticipants: .removeParticipants
        case .setMetadata: .setMetadata
        case .deleteMetadata: .deleteMetadata
        case .deleteConversation: .deleteConversation
        case .markAllRead: .markAllRead
        case .setNotificationLevel: .setNotificationLevel
        case .sendMessage: .sendMessage
        case .markRead: .markRead
        case .deleteMessage: .deleteMessage
        case .deliveryReceipt: .deliveryReceipt
        case .react: .react
        case .updateMessageParts: .updateMessageParts
        }
    }
}

/// Maps commands to outbox entries and back. An entry's payload is the command's frame
/// exactly as it goes on the wire (SPEC §2), and its id is the command's client-chosen id
/// (SPEC §7): the object's id for creations, a request id otherwise. So a retry after a
/// lost stream sends the very same bytes under the very same id.
public enum OutboxEncoder {
    /// The outbox entry for a command frame. Encoding checks every wire limit first.
    public static func entry(for frame: Frame, createdAt: Timestamp = .now()) throws(ClientError) -> OutboxEntry {
        guard let kind = kind(of: frame), let id = frame.commandID else {
            throw ClientError(
                .invalidArgument, "a \(frame.type.name) frame is not a command that goes through the outbox")
        }
        let bytes = try encode(frame)
        return OutboxEntry(
            id: id, kind: kind.rawValue, objectID: objectID(of: frame),
            conversationID: OutboxRedirect.conversation(of: frame)?.uuid,
            payload: Array(bytes.readableBytesView), createdAt: createdAt)
    }

    /// An entry's stored bytes, ready to write as they are: its header is checked against
    /// its kind and length (the payload was checked when encoded, and is not decoded again).
    static func bytes(of entry: OutboxEntry) throws(ClientError) -> ByteBuffer {
        let bytes = ByteBuffer(bytes: entry.payload)
        guard let kind = OutboxCommandKind(rawValue: entry.kind), let header = FrameHeader.peek(bytes),
            header.type == kind.frameType.rawValue
                || (kind == .sendMessage && header.type == FrameType.sendReply.rawValue),
            Int(header.payloadLength) + FrameHeader.size == bytes.readableBytes
        else {
            throw ClientError(.corruptRecord, "outbox entry \(entry.id) does not hold a whole \(entry.kind) frame")
        }
        return bytes
    }

    /// The command frame of an outbox entry, checked against its kind and id.
    public static func frame(for entry: OutboxEntry) throws(ClientError) -> Frame {
        guard let kind = OutboxCommandKind(rawValue: entry.kind) else {
            throw ClientError(.corruptRecord, "outbox entry \(entry.id) has an unknown kind '\(entry.kind)'")
        }
        guard let frame = try? Frame.decode(exactly: ByteBuffer(bytes: entry.payload)) else {
            throw ClientError(.corruptRecord, "outbox entry \(entry.id) does not hold a whole, valid frame")
        }
        guard Self.kind(of: frame) == kind, frame.commandID == entry.id else {
            throw ClientError(
                .corruptRecord,
                "outbox entry \(entry.id) holds a \(frame.type.name) frame that does not match its kind or id")
        }
        return frame
    }

    static func encode(_ frame: Frame) throws(ClientError) -> ByteBuffer {
        do { return try frame.encoded() } catch { throw ClientError(wire: error) }
    }

    /// The outbox kind of a command frame; nil for frames that do not go through the outbox.
    public static func kind(of frame: Frame) -> OutboxCommandKind? {
        switch frame {
        case .createConversation: .createConversation
        case .addParticipants: .addParticipants
        case .removeParticipants: .removeParticipants
        case .setMetadata: .setMetadata
        case .deleteMetadata: .deleteMetadata
        case .deleteConversation: .deleteConversation
        case .markAllRead: .markAllRead
        case .setNotificationLevel: .setNotificationLevel
        case .sendMessage: .sendMessage
        case .markRead: .markRead
        case .deleteMessage: .deleteMessage
        case .deliveryReceipt: .deliveryReceipt
        case .react: .react
        case .updateMessageParts: .updateMessageParts
        default: nil
        }
    }

    /// The object a command is about: the message for message commands, else the conversation.
    static func objectID(of frame: Frame) -> UUID? {
        switch frame {
        case .createConversation(let f): f.conversationID.uuid
        case .addParticipants(let f), .removeParticipants(let f): f.conversationID.uuid
        case .setMetadata(let f): f.conversationID.uuid
        case .deleteMetadata(let f): f.conversationID.uuid
        case .deleteConversation(let f): f.conversationID.uuid
        case .markAllRead(let f): f.conversationID.uuid
        case .setNotificationLevel(let f): f.conversationID.uuid
        case .sendMessage(let f): f.messageID.uuid
        case .markRead(let f): f.messageID.uuid
        case .deleteMessage(let f): f.messageID.uuid
        case .deliveryReceipt(let f): f.conversationID.uuid
        case .react(let f): f.messageID.uuid
        case .updateMessageParts(let f): f.messageID.uuid
        default: nil
        }
    }
}
