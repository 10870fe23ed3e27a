import Foundation
import LaminaMerge
import LaminaModel
import NIOCore

/// SET_NOTIFICATION_LEVEL (0x0109), client -> node (notificationLevels feature, SPEC §6.10): how
/// much of a conversation notifies the session's user (pushes and the badge) — every message,
/// only those that mention them, or none — until a time or with no end. Answered with ACK, or
/// ERROR.
/// ```
/// +------------------+----------------------+------------+-----------------------+
/// | requestID (uuid) | conversationID (uuid)| level (u8) | until (opt timestamp) |
/// +------------------+----------------------+------------+-----------------------+
/// ```
public struct SetNotificationLevel: Hashable, Sendable {
    public var requestID: UUID
    public var conversationID: ConversationID
    public var level: NotificationLevel
    /// When the level ends (then it is `all` again); nil: no end.
    public var until: Timestamp?

    public init(requestID: UUID, conversationID: ConversationID, level: NotificationLevel, until: Timestamp? = nil) {
        self.requestID = requestID
        self.conversationID = conversationID
        self.level = level
        self.until = until
    }

    func encode(into b: inout ByteBuffer) {
        b.writeUUID(requestID)
        b.writeID(conversationID)
        b.writeNotificationLevel(level, until: until)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> SetNotificationLevel {
        let id = try b.readUUID("the request id")
        let conversation = try b.readID(ConversationID.self, "the conversation id")
        let (level, until) = try b.readNotificationLevel()
        return SetNotificationLevel(requestID: id, conversationID: conversation, level: level, until: until)
    }
}

/// Change kind 22 `notification-level-changed` (SPEC §6.4): the feed's user set their
/// notification level of a conversation (from any device, the Server API or the Client API).
/// In that user's own feed only.
/// ```
/// +----------------------+------------+-----------------------+
/// | conversationID (uuid)| level (u8) | until (opt timestamp) |
/// +----------------------+------------+-----------------------+
/// ```
public struct NotificationLevelChanged: Hashable, Sendable {
    public var conversationID: ConversationID
    public var level: NotificationLevel
    public var until: Timestamp?

    public init(conversationID: ConversationID, level: NotificationLevel, until: Timestamp? = nil) {
        self.conversationID = conversationID
        self.level = level
        self.until = until
    }
}

/// kind 73 (SPEC §6.5): `user` set their notification level of `conversationID`; a
/// last-writer-wins register per user and conversation (`NotificationSetting`'s rule, at the
/// operation's HLC reading).
/// ```
/// +-------------+----------------------+------------+-----------------------+
/// | user (user) | conversationID (uuid)| level (u8) | until (opt timestamp) |
/// +-------------+----------------------+------------+-----------------------+
/// ```
public struct NotificationLevelChange: Hashable, Sendable {
    public var user: UserID
    public var conversationID: ConversationID
    public var level: NotificationLevel
    public var until: Timestamp?

    public init(user: UserID, conversationID: ConversationID, level: NotificationLevel, until: Timestamp? = nil) {
        self.user = user
        self.conversationID = conversationID
        self.level = level
        self.until = until
    }

    /// The register write this change makes when accepted at `hlc` (an `until` before 1970 is 0:
    /// already over).
    public func write(at hlc: HLCTimestamp) -> NotificationSetting.Write {
        NotificationSetting.Write(
            level: level, until: until.map { UInt64(clamping: $0.millisecondsSince1970) }, at: hlc)
    }
}

extension ByteBuffer {
    /// A level byte, then an optional end time.
    mutating func writeNotificationLevel(_ level: NotificationLevel, until: Timestamp?) {
        writeInteger(level.rawValue, as: UInt8.self)
        if let until {
            writeInteger(1, as: UInt8.self)
            writeTimestamp(until)
        } else {
            writeInteger(0, as: UInt8.self)
        }
    }
}

extension PayloadReader {
    /// SPEC §3.11: a level is 0 (all), 1 (mentions) or 2 (none); any other byte is `malformed`.
    mutating func readNotificationLevel() throws(WireError) -> (NotificationLevel, Timestamp?) {
        let raw = try peekU8("the notification level")
        guard let level = NotificationLevel(rawValue: raw) else {
            throw WireError(.malformed, "notification level \(raw) is not one of 0...2")
        }
        moveReaderIndex(forwardBy: 1)
        let until = try readPresence("the level's end") ? try readTimestamp("the level's end") : nil
        return (level, until)
    }
}
