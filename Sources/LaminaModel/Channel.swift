import Foundation

/// Identifies a channel: `lamina:///channels/<uuid>`.
public struct ChannelID: LaminaIdentifier {
    public static let collection = "channels"
    public let uuid: UUID
    public init(uuid: UUID) { self.uuid = uuid }
}

extension ModelError.Code {
    /// A channel name that is empty, too long or holds control characters (SPEC §6.8).
    public static let invalidChannelName = ModelError.Code(rawValue: "invalid-channel-name")
}

/// A channel's name (SPEC §6.8): unique on a node (and on the nodes sharing its store), 1 to
/// 128 UTF-8 bytes, no control characters. Compared as bytes: names that differ only in case
/// or normalization are different names.
public struct ChannelName: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The most UTF-8 bytes of a channel name.
    public static let maxBytes = 128

    public let rawValue: String

    /// Validates and wraps a channel name.
    public init(_ rawValue: String) throws(ModelError) {
        let bytes = rawValue.utf8.count
        guard bytes > 0 else { throw ModelError(.invalidChannelName, "a channel name must not be empty") }
        guard bytes <= Self.maxBytes else {
            throw ModelError(
                .invalidChannelName, "a channel name is at most \(Self.maxBytes) UTF-8 bytes, this one has \(bytes)")
        }
        guard !rawValue.unicodeScalars.contains(where: UserID.isControl) else {
            throw ModelError(.invalidChannelName, "a channel name must not contain control characters")
        }
        self.rawValue = rawValue
    }

    public var description: String { rawValue }
    public static func < (lhs: ChannelName, rhs: ChannelName) -> Bool {
        lhs.rawValue.utf8.lexicographicallyPrecedes(rhs.rawValue.utf8)
    }
}

/// A channel (Layer's large named room, SPEC §6.8): members join and leave it themselves, every
/// member reads one shared history, and there are no receipts and no unread counts.
public struct ChatChannel: Hashable, Sendable {
    public var id: ChannelID
    public var name: ChannelName
    /// Who created it (its first member), or the system sender that stands for the Server API.
    public var creator: UserID
    public var createdAt: Timestamp

    public init(id: ChannelID, name: ChannelName, creator: UserID, createdAt: Timestamp) {
        self.id = id
        self.name = name
        self.creator = creator
        self.createdAt = createdAt
    }
}

/// A message of a channel: stored once, read by every member from the channel's log
/// (SPEC §6.8). Parts as in a conversation's message; no recipient status, no push.
public struct ChannelMessage: Hashable, Sendable {
    public var id: MessageID
    public var channelID: ChannelID
    public var sender: UserID
    public var sentAt: Timestamp
    /// The HLC reading the message was accepted at: the order every node shows.
    public var position: MessagePosition
    /// The message's place in the channel's log on the node that serves it (1, 2, 3, …; 0 in a
    /// replicated operation, where each receiver numbers its own log): a device's cursor.
    public var logSeq: UInt64
    public var parts: [MessagePart]

    public init(
        id: MessageID, channelID: ChannelID, sender: UserID, sentAt: Timestamp, position: MessagePosition,
        logSeq: UInt64, parts: [MessagePart]
    ) {
        self.id = id
        self.channelID = channelID
        self.sender = sender
        self.sentAt = sentAt
        self.position = position
        self.logSeq = logSeq
        self.parts = parts
    }
}
