import Foundation
import LaminaModel
import NIOCore

// Channel commands and changes (SPEC §6.8, channels feature §5.1 bit 11).

/// CREATE_CHANNEL (0x0011), client -> node: a channel named `name` with id `channelID`
/// (client-chosen: the command's id); the sender is its first member.
/// ```
/// +------------------+-----------------------+
/// | channelID (uuid) | name (string(128))    |
/// +------------------+-----------------------+
/// ```
public struct CreateChannel: Hashable, Sendable {
    public var channelID: ChannelID
    public var name: ChannelName

    public init(channelID: ChannelID, name: ChannelName) {
        self.channelID = channelID
        self.name = name
    }
}

/// JOIN_CHANNEL (0x0012) and LEAVE_CHANNEL (0x0013), client -> node: the sender joins or
/// leaves the channel. Also the layout of DELETE_CHANNEL (0x0016).
/// ```
/// +------------------+------------------+
/// | requestID (uuid) | channelID (uuid) |
/// +------------------+------------------+
/// ```
public struct ChannelRequest: Hashable, Sendable {
    public var requestID: UUID
    public var channelID: ChannelID

    public init(requestID: UUID, channelID: ChannelID) {
        self.requestID = requestID
        self.channelID = channelID
    }
}

/// SEND_CHANNEL_MESSAGE (0x0014), client -> node: a message to every member of the channel,
/// stored once. The message id is client-chosen (SPEC §7).
/// ```
/// +------------------+------------------+----------------+
/// | messageID (uuid) | channelID (uuid) | parts (§3.12)  |
/// +------------------+------------------+----------------+
/// ```
public struct SendChannelMessage: Hashable, Sendable {
    public var messageID: MessageID
    public var channelID: ChannelID
    public var parts: [MessagePart]

    public init(messageID: MessageID, channelID: ChannelID, parts: [MessagePart]) {
        self.messageID = messageID
        self.channelID = channelID
        self.parts = parts
    }
}

/// FETCH_CHANNEL (0x0015), client -> node: up to `count` messages of the channel's log after
/// the device's cursor `after` (0: from the start), answered by `channel-message` changes with
/// seq 0 in log order, then ACK whose `cursor` is the log position read up to.
/// ```
/// +------------------+------------------+----------------+--------------------+
/// | requestID (uuid) | channelID (uuid) | after (varint) | count (varint32)   |
/// +------------------+------------------+----------------+--------------------+
/// ```
public struct FetchChannel: Hashable, Sendable {
    /// The most messages one FETCH_CHANNEL may ask for (SPEC §6.8).
    public static let maxCount: UInt32 = 10_000

    public var requestID: UUID
    public var channelID: ChannelID
    public var after: UInt64
    /// 1 to ``maxCount`` (anything else is `invalid-argument`, checked by the node).
    public var count: UInt32

    public init(requestID: UUID, channelID: ChannelID, after: UInt64, count: UInt32) {
        self.requestID = requestID
        self.channelID = channelID
        self.after = after
        self.count = count
    }
}

/// Change kind 17 `channel-membership-changed`: `user` joined (`joined`) or left the channel,
/// by themselves or through the Server API (`by`), at the node's HLC reading `at`.
/// ```
/// +------------------+-------------+-----------------+-----------+----------+
/// | channelID (uuid) | user (user) | joined (bool)   | by (user) | at (hlc) |
/// +------------------+-------------+-----------------+-----------+----------+
/// ```
public struct ChannelMembershipChanged: Hashable, Sendable {
    public var channelID: ChannelID
    public var user: UserID
    public var joined: Bool
    public var by: UserID
    public var at: HLCTimestamp

    public init(channelID: ChannelID, user: UserID, joined: Bool, by: UserID, at: HLCTimestamp) {
        self.channelID = channelID
        self.user = user
        self.joined = joined
        self.by = by
        self.at = at
    }
}

/// Change kind 19 `channel-deleted`: the channel and its history are gone for everyone.
/// ```
/// +------------------+-----------+----------+
/// | channelID (uuid) | by (user) | at (hlc) |
/// +------------------+-----------+----------+
/// ```
public struct ChannelDeleted: Hashable, Sendable {
    public var channelID: ChannelID
    public var by: UserID
    public var at: HLCTimestamp

    public init(channelID: ChannelID, by: UserID, at: HLCTimestamp) {
        self.channelID = channelID
        self.by = by
        self.at = at
    }
}

// MARK: - Codec

extension CreateChannel {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeID(channelID)
        try b.writeChannelName(name)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> CreateChannel {
        let id = try b.readID(ChannelID.self, "the channel id")
        return CreateChannel(channelID: id, name: try b.readChannelName())
    }
}

extension ChannelRequest {
    func encode(into b: inout ByteBuffer) {
        b.writeUUID(requestID)
        b.writeID(channelID)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> ChannelRequest {
        let id = try b.readUUID("the request id")
        return ChannelRequest(requestID: id, channelID: try b.readID(ChannelID.self, "the channel id"))
    }
}

extension SendChannelMessage {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeID(messageID)
        b.writeID(channelID)
        try b.writeParts(parts)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> SendChannelMessage {
        let id = try b.readID(MessageID.self, "the message id")
        let channel = try b.readID(ChannelID.self, "the channel id")
        return SendChannelMessage(messageID: id, channelID: channel, parts: try b.readParts(limits))
    }
}

extension FetchChannel {
    func encode(into b: inout ByteBuffer) {
        b.writeUUID(requestID)
        b.writeID(channelID)
        b.writeVarint(after)
        b.writeVarint(UInt64(count))
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> FetchChannel {
        let id = try b.readUUID("the request id")
        let channel = try b.readID(ChannelID.self, "the channel id")
        let after = try b.readVarint("the log cursor")
        return FetchChannel(requestID: id, channelID: channel, after: after, count: try b.readVarint32("the count"))
    }
}

extension ByteBuffer {
    mutating func writeChannelName(_ name: ChannelName) throws(WireError) {
        try writeString(name.rawValue, max: ChannelName.maxBytes, "the channel name")
    }

    /// kind 16's fields: `| channelID (uuid) | name (string(128)) | creator (user) | createdAt (timestamp) |`.
    mutating func writeChannel(_ c: ChatChannel) throws(WireError) {
        writeID(c.id)
        try writeChannelName(c.name)
        try writeUserID(c.creator)
        writeTimestamp(c.createdAt)
    }

    /// kind 18's fields: `| channelID | messageID | sender | sentAt | position (hlc) | logSeq (varint) | parts |`.
    mutating func writeChannelMessage(_ m: ChannelMessage) throws(WireError) {
        writeID(m.channelID)
        writeID(m.id)
        try writeUserID(m.sender)
        writeTimestamp(m.sentAt)
        writeHLC(m.position)
        writeVarint(m.logSeq)
        try writeParts(m.parts)
    }

    mutating func writeChannelEvent(_ event: ChangeEvent) throws(WireError) {
        switch event {
        case .channelCreated(let c): try writeChannel(c)
        case .channelMembershipChanged(let c):
            writeID(c.channelID)
            try writeUserID(c.user)
            writeBool(c.joined)
            try writeUserID(c.by)
            writeHLC(c.at)
        case .channelMessage(let m): try writeChannelMessage(m)
        case .channelDeleted(let d):
            writeID(d.channelID)
            try writeUserID(d.by)
            writeHLC(d.at)
        default: preconditionFailure("not a channel event: kind \(event.kind)")
        }
    }
}

extension PayloadReader {
    /// A channel name: over 128 bytes `limit-exceeded` (on the length), empty or holding a
    /// control character `malformed` (SPEC §6.8).
    mutating func readChannelName() throws(WireError) -> ChannelName {
        let raw = try readString(max: ChannelName.maxBytes, "the channel name")
        do { return try ChannelName(raw) } catch { throw WireError(.malformed, error.reason) }
    }

    mutating func readChannelEvent(kind: UInt8, _ limits: WireLimits) throws(WireError) -> ChangeEvent {
        switch kind {
        case 16:
            let id = try readID(ChannelID.self, "the channel id")
            let name = try readChannelName()
            let creator = try readUserID(limits)
            let createdAt = try readTimestamp("the creation time")
            return .channelCreated(ChatChannel(id: id, name: name, creator: creator, createdAt: createdAt))
        case 17:
            let id = try readID(ChannelID.self, "the channel id")
            let user = try readUserID(limits)
            let joined = try readBool("the joined flag")
            let by = try readUserID(limits)
            let at = try readHLC("the change time")
            return .channelMembershipChanged(
                ChannelMembershipChanged(channelID: id, user: user, joined: joined, by: by, at: at))
        case 18:
            let channel = try readID(ChannelID.self, "the channel id")
            let id = try readID(MessageID.self, "the message id")
            let sender = try readUserID(limits)
            let sentAt = try readTimestamp("the sent-at time")
            let position = try readHLC("the message position")
            let logSeq = try readVarint("the log position")
            let parts = try readParts(limits)
            return .channelMessage(
                ChannelMessage(
                    id: id, channelID: channel, sender: sender, sentAt: sentAt, position: position, logSeq: logSeq,
                    parts: parts))
        default:
            let id = try readID(ChannelID.self, "the channel id")
            let by = try readUserID(limits)
            return .channelDeleted(ChannelDeleted(channelID: id, by: by, at: try readHLC("the deletion time")))
        }
    }
}
