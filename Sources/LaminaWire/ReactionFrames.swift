import Foundation
import LaminaMerge
import LaminaModel
import NIOCore

// Reactions (SPEC §6.9): REACT, client -> node, and the `reactions-changed` change (§6.4 kind 20).

/// Whether a REACT adds or removes the reaction.
public enum ReactionOp: UInt8, Hashable, Sendable {
    case remove = 0
    case add = 1

    /// The readable form's name (SPEC §10.1).
    public var name: String { self == .add ? "add" : "remove" }
}

/// REACT (0x0206): the user adds or removes a reaction (`key`, e.g. an emoji) on a message.
/// Needs the reactions feature (SPEC §5.1 bit 14).
/// ```
/// +-----------------+----------------------+-----------------+-------------------+---------+
/// | request id (16) | conversation id (16) | message id (16) | key (string(64))  | op (u8) |
/// +-----------------+----------------------+-----------------+-------------------+---------+
/// ```
public struct React: Hashable, Sendable {
    public var requestID: UUID
    public var conversationID: ConversationID
    public var messageID: MessageID
    /// 1 to 64 bytes of UTF-8 without control characters (the node checks the characters).
    public var key: String
    public var op: ReactionOp

    public init(requestID: UUID, conversationID: ConversationID, messageID: MessageID, key: String, op: ReactionOp) {
        self.requestID = requestID
        self.conversationID = conversationID
        self.messageID = messageID
        self.key = key
        self.op = op
    }
}

/// §6.4 kind 20: a user's reaction on a message appeared (`present`) or went away. In a feed,
/// `present` is the state after the change; in REPLICATE, `present` is an add whose tag is
/// `at`, else a remove of `removedTags` (SPEC §6.9).
/// ```
/// +----------------------+-----------------+------+-------------------+----------------+---------+--------------------------+
/// | conversation id (16) | message id (16) | user | key (string(64))  | present (bool) | at (HLC)| removed tags (count+HLC) |
/// +----------------------+-----------------+------+-------------------+----------------+---------+--------------------------+
/// ```
public struct ReactionsChanged: Hashable, Sendable {
    public var conversationID: ConversationID
    public var messageID: MessageID
    public var user: UserID
    public var key: String
    public var present: Bool
    /// The change's HLC reading; an add's tag.
    public var at: HLCTimestamp
    /// The tags a remove took away (empty for an add), at most ``ReactionKey/maxRemovedTags``.
    public var removedTags: [HLCTimestamp]

    public init(
        conversationID: ConversationID, messageID: MessageID, user: UserID, key: String, present: Bool,
        at: HLCTimestamp, removedTags: [HLCTimestamp] = []
    ) {
        self.conversationID = conversationID
        self.messageID = messageID
        self.user = user
        self.key = key
        self.present = present
        self.at = at
        self.removedTags = removedTags
    }
}

// MARK: - Codec

extension React {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeUUID(requestID)
        b.writeID(conversationID)
        b.writeID(messageID)
        try b.writeString(key, max: ReactionKey.maxBytes, "a reaction key")
        b.writeInteger(op.rawValue, as: UInt8.self)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> React {
        let id = try b.readUUID("the request id")
        let conversation = try b.readID(ConversationID.self, "the conversation id")
        let message = try b.readID(MessageID.self, "the message id")
        // Length here (fatal); emptiness and characters are the node's check (non-fatal).
        let key = try b.readString(max: ReactionKey.maxBytes, "a reaction key")
        let raw = try b.readU8("the reaction op")
        guard let op = ReactionOp(rawValue: raw) else {
            throw WireError(.malformed, "reaction op \(raw) is not 0 or 1")
        }
        return React(requestID: id, conversationID: conversation, messageID: message, key: key, op: op)
    }
}

extension ByteBuffer {
    mutating func writeReactionsChanged(_ r: ReactionsChanged) throws(WireError) {
        writeID(r.conversationID)
        writeID(r.messageID)
        try writeUserID(r.user)
        do { try ReactionKey.validate(r.key) } catch { throw WireError(.invalidArgument, error.reason) }
        try writeString(r.key, max: ReactionKey.maxBytes, "a reaction key")
        writeBool(r.present)
        writeHLC(r.at)
        guard r.removedTags.count <= ReactionKey.maxRemovedTags else {
            throw WireError(
                .limitExceeded,
                "a reaction change names \(r.removedTags.count) tags, at most \(ReactionKey.maxRemovedTags)")
        }
        guard r.present == r.removedTags.isEmpty else {
            throw WireError(.invalidArgument, "an added reaction names no removed tags, a removed one at least one")
        }
        writeVarint(UInt64(r.removedTags.count))
        for tag in r.removedTags { writeHLC(tag) }
    }
}

extension PayloadReader {
    mutating func readReactionsChanged(_ limits: WireLimits) throws(WireError) -> ReactionsChanged {
        let conversation = try readID(ConversationID.self, "the conversation id")
        let message = try readID(MessageID.self, "the message id")
        let user = try readUserID(limits)
        let key = try readString(max: ReactionKey.maxBytes, "a reaction key")
        do { try ReactionKey.validate(key) } catch { throw WireError(.malformed, error.reason) }
        let present = try readBool("the presence flag")
        let at = try readHLC("the change time")
        // An HLC takes at least 10 bytes (two varints and the node).
        let count = try readCount(max: ReactionKey.maxRemovedTags, minElementSize: 10, "a removed tag count")
        var tags: [HLCTimestamp] = []
        tags.reserveCapacity(count)
        for _ in 0..<count { tags.append(try readHLC("a removed tag")) }
        // An add has no removed tags, a remove at least one (SPEC §6.9).
        guard present == tags.isEmpty else {
            throw WireError(.malformed, "a reaction change with present \(present) has \(count) removed tags")
        }
        return ReactionsChanged(
            conversationID: conversation, messageID: message, user: user, key: key, present: present, at: at,
            removedTags: tags)
    }
}
