import Foundation
import LaminaModel
import NIOCore

// Conversation commands (SPEC §6.1), client -> node. Each carries a client-chosen id:
// the conversation's own id for CREATE_CONVERSATION, a request id for the others (SPEC §7).

/// CREATE_CONVERSATION (0x0101).
/// ```
/// +----------------------+----------------+----------------+--------------+----------------+
/// | conversation id (16) | distinct (bool)| receipts (u8)  | participants | metadata (map) |
/// |  (client-chosen)     |                |                | (user set)   |                |
/// +----------------------+----------------+----------------+--------------+----------------+
/// ```
public struct CreateConversation: Hashable, Sendable {
    public var conversationID: ConversationID
    /// The other participants; the sender is always added by the node.
    public var participants: Set<UserID>
    public var options: ConversationOptions

    public init(
        conversationID: ConversationID, participants: Set<UserID>, options: ConversationOptions = ConversationOptions()
    ) {
        self.conversationID = conversationID
        self.participants = participants
        self.options = options
    }
}

/// ADD_PARTICIPANTS (0x0102) and REMOVE_PARTICIPANTS (0x0103).
/// ```
/// +-----------------+----------------------+--------------------+
/// | request id (16) | conversation id (16) | users (user set)   |
/// +-----------------+----------------------+--------------------+
/// ```
public struct ParticipantsUpdate: Hashable, Sendable {
    public var requestID: UUID
    public var conversationID: ConversationID
    public var users: Set<UserID>

    public init(requestID: UUID, conversationID: ConversationID, users: Set<UserID>) {
        self.requestID = requestID
        self.conversationID = conversationID
        self.users = users
    }
}

/// SET_METADATA (0x0104): set the value at a key path (last writer wins per key).
/// ```
/// +-----------------+----------------------+------------------+-------------------------+
/// | request id (16) | conversation id (16) | key path         | value (kind + value)    |
/// +-----------------+----------------------+------------------+-------------------------+
/// ```
public struct SetMetadata: Hashable, Sendable {
    public var requestID: UUID
    public var conversationID: ConversationID
    public var keyPath: MetadataKeyPath
    public var value: MetadataValue

    public init(requestID: UUID, conversationID: ConversationID, keyPath: MetadataKeyPath, value: MetadataValue) {
        self.requestID = requestID
        self.conversationID = conversationID
        self.keyPath = keyPath
        self.value = value
    }
}

/// DELETE_METADATA (0x0105): remove the value at a key path.
/// ```
/// +-----------------+----------------------+------------------+
/// | request id (16) | conversation id (16) | key path         |
/// +-----------------+----------------------+------------------+
/// ```
public struct DeleteMetadata: Hashable, Sendable {
    public var requestID: UUID
    public var conversationID: ConversationID
    public var keyPath: MetadataKeyPath

    public init(requestID: UUID, conversationID: ConversationID, keyPath: MetadataKeyPath) {
        self.requestID = requestID
        self.conversationID = conversationID
        self.keyPath = keyPath
    }
}

/// DELETE_CONVERSATION (0x0106): delete the conversation, or with `below` only its
/// messages before that position (the conversation stays).
/// ```
/// +-----------------+----------------------+-----------+------------------+
/// | request id (16) | conversation id (16) | mode (u8) | below (opt HLC)  |
/// +-----------------+----------------------+-----------+------------------+
/// ```
public struct DeleteConversation: Hashable, Sendable {
    public var requestID: UUID
    public var conversationID: ConversationID
    public var mode: DeletionMode
    public var below: MessagePosition?

    public init(requestID: UUID, conversationID: ConversationID, mode: DeletionMode, below: MessagePosition? = nil) {
        self.requestID = requestID
        self.conversationID = conversationID
        self.mode = mode
        self.below = below
    }
}

/// MARK_ALL_READ (0x0107): every message up to and including `upTo` is read by the sender.
/// ```
/// +-----------------+----------------------+--------------+
/// | request id (16) | conversation id (16) | up to (HLC)  |
/// +-----------------+----------------------+--------------+
/// ```
public struct MarkAllRead: Hashable, Sendable {
    public var requestID: UUID
    public var conversationID: ConversationID
    public var upTo: MessagePosition

    public init(requestID: UUID, conversationID: ConversationID, upTo: MessagePosition) {
        self.requestID = requestID
        self.conversationID = conversationID
        self.upTo = upTo
    }
}

/// A typing indicator's state (SPEC §3.11).
public enum TypingState: UInt8, Hashable, Sendable, CaseIterable {
    case started = 0
    case paused = 1
    case finished = 2
}

/// TYPING (0x0108), client -> node: not acknowledged, not stored; re-sent every 2.5 s
/// while typing; the node times indicators out.
/// ```
/// +----------------------+-------------+
/// | conversation id (16) | state (u8)  |
/// +----------------------+-------------+
/// ```
public struct Typing: Hashable, Sendable {
    /// How often, in milliseconds, a client re-sends `started` while its user types (SPEC §6.1).
    public static let refreshMilliseconds: Int64 = 2_500
    /// An indicator (`started` or `paused`) not refreshed for this many milliseconds is
    /// `finished` (SPEC §6.1), on the node and in the SDK.
    public static let expiryMilliseconds: Int64 = 6_000
    /// ``expiryMilliseconds`` as a duration.
    public static var expiry: Duration { .milliseconds(expiryMilliseconds) }

    public var conversationID: ConversationID
    public var state: TypingState

    public init(conversationID: ConversationID, state: TypingState) {
        self.conversationID = conversationID
        self.state = state
    }
}

// MARK: - Codec

extension CreateConversation {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeID(conversationID)
        b.writeBool(options.isDistinct)
        b.writeReceipts(options.receiptSwitches)
        try b.writeUserSet(participants)
        try b.writeMetadataMap(options.metadata.values, level: 1)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> CreateConversation {
        let id = try b.readID(ConversationID.self, "the conversation id")
        let distinct = try b.readBool("the distinct flag")
        let receipts = try b.readReceipts()
        let participants = try b.readUserSet(limits)
        let metadata = try b.readMetadataMap(level: 1, limits)
        return CreateConversation(
            conversationID: id, participants: participants,
            options: ConversationOptions(
                isDistinct: distinct, metadata: Metadata(metadata), deliveryReceiptsEnabled: receipts.delivery,
                readReceiptsEnabled: receipts.read)
        )
    }
}

extension ParticipantsUpdate {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeUUID(requestID)
        b.writeID(conversationID)
        try b.writeUserSet(users)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> ParticipantsUpdate {
        let id = try b.readUUID("the request id")
        let conversation = try b.readID(ConversationID.self, "the conversation id")
        let users = try b.readUserSet(limits)
        return ParticipantsUpdate(requestID: id, conversationID: conversation, users: users)
    }
}

extension SetMetadata {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeUUID(requestID)
        b.writeID(conversationID)
        try b.writeKeyPath(keyPath)
        // SPEC §3.14: the value sits at the key path's level.
        try b.writeMetadataValue(value, level: keyPath.components.count)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> SetMetadata {
        let id = try b.readUUID("the request id")
        let conversation = try b.readID(ConversationID.self, "the conversation id")
        let path = try b.readKeyPath(limits)
        let value = try b.readMetadataValue(level: path.components.count, limits)
        return SetMetadata(requestID: id, conversationID: conversation, keyPath: path, value: value)
    }
}

extension DeleteMetadata {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeUUID(requestID)
        b.writeID(conversationID)
        try b.writeKeyPath(keyPath)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> DeleteMetadata {
        let id = try b.readUUID("the request id")
        let conversation = try b.readID(ConversationID.self, "the conversation id")
        let path = try b.readKeyPath(limits)
        return DeleteMetadata(requestID: id, conversationID: conversation, keyPath: path)
    }
}

extension DeleteConversation {
    func encode(into b: inout ByteBuffer) {
        b.writeUUID(requestID)
        b.writeID(conversationID)
        b.writeInteger(mode.rawValue, as: UInt8.self)
        if let below {
            b.writeInteger(1, as: UInt8.self)
            b.writeHLC(below)
        } else {
            b.writeInteger(0, as: UInt8.self)
        }
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> DeleteConversation {
        let id = try b.readUUID("the request id")
        let conversation = try b.readID(ConversationID.self, "the conversation id")
        let mode = try b.readDeletionMode()
        let below = try b.readPresence("the position bound") ? try b.readHLC("the position bound") : nil
        return DeleteConversation(requestID: id, conversationID: conversation, mode: mode, below: below)
    }
}

extension MarkAllRead {
    func encode(into b: inout ByteBuffer) {
        b.writeUUID(requestID)
        b.writeID(conversationID)
        b.writeHLC(upTo)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> MarkAllRead {
        let id = try b.readUUID("the request id")
        let conversation = try b.readID(ConversationID.self, "the conversation id")
        let upTo = try b.readHLC("the position")
        return MarkAllRead(requestID: id, conversationID: conversation, upTo: upTo)
    }
}

extension Typing {
    func encode(into b: inout ByteBuffer) {
        b.writeID(conversationID)
        b.writeInteger(state.rawValue, as: UInt8.self)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> Typing {
        let conversation = try b.readID(ConversationID.self, "the conversation id")
        return Typing(conversationID: conversation, state: try b.readTypingState())
    }
}

extension PayloadReader {
    mutating func readTypingState() throws(WireError) -> TypingState {
        let raw = try peekU8("a typing state")
        guard let state = TypingState(rawValue: raw) else {
            throw WireError(.malformed, "typing state \(raw) is not 0 (started), 1 (paused) or 2 (finished)")
        }
        moveReaderIndex(forwardBy: 1)
        return state
    }
}
