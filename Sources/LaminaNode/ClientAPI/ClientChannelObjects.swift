import Foundation
import LaminaModel
import LaminaStore

// Channels (SPEC §6.8) on the Client API, shaped as Layer's Web SDK reads them
// (`layer.Channel`, `layer.Membership`, `layer.Message.ChannelMessage`).

/// A channel: anyone may see it (to join it); `membership` is the viewer's, absent when they
/// are not a member (the Web SDK's `isCurrentParticipant`).
public struct ClientChannelObject: Codable, Sendable, Hashable {
    /// `layer:///channels/<uuid>`.
    public var id: String
    public var url: String
    public var messages_url: String
    public var members_url: String
    public var name: String
    public var created_at: String
    /// The members now (absent in a WebSocket `create`, which the member's own join brings).
    public var member_count: Int?
    /// Always empty: channels have no metadata in this version.
    public var metadata: [String: JSONValue]
    public var membership: ClientMembershipObject?
}

/// A user's membership of a channel (`layer:///channels/<uuid>/members/<user id>`).
public struct ClientMembershipObject: Codable, Sendable, Hashable {
    public var id: String
    public var url: String
    public var channel: ClientReference
    public var identity: ClientIdentityObject
}

/// A channel's message: no receipts (`recipient_status` empty, never unread); `position` is its
/// place in the channel's log (1, 2, 3, ...).
public struct ClientChannelMessageObject: Codable, Sendable, Hashable {
    /// `layer:///messages/<uuid>`.
    public var id: String
    public var url: String
    public var channel: ClientReference
    public var parts: [ClientPartObject]
    public var sent_at: String
    public var sender: ClientIdentityObject
    public var is_unread: Bool
    public var recipient_status: [String: String]
    public var position: Int64
}

extension ClientAPIRepresentation {
    public static func channelID(_ id: ChannelID) -> String { "layer:///channels/\(Self.lowercase(id.uuid))" }

    /// A channel id from its Layer id or bare UUID.
    public static func channel(_ text: String) -> ChannelID? {
        let prefix = "layer:///channels/"
        let bare = text.hasPrefix(prefix) ? String(text.dropFirst(prefix.count)) : text
        return UUID(uuidString: bare).map(ChannelID.init(uuid:))
    }

    func channelReference(_ id: ChannelID) -> ClientReference {
        ClientReference(id: Self.channelID(id), url: "\(base)/channels/\(Self.lowercase(id.uuid))")
    }

    /// A channel as the viewer sees it (`isMember`: whether the viewer is a member).
    public func channel(_ c: ChatChannel, memberCount: Int, isMember: Bool) -> ClientChannelObject {
        let reference = channelReference(c.id)
        return ClientChannelObject(
            id: reference.id, url: reference.url, messages_url: "\(reference.url)/messages",
            members_url: "\(reference.url)/members", name: c.name.rawValue, created_at: Self.date(c.createdAt),
            member_count: memberCount, metadata: [:], membership: isMember ? membership(viewer, of: c.id) : nil)
    }

    /// `user`'s membership of `channel`.
    public func membership(_ user: UserID, of channel: ChannelID) -> ClientMembershipObject {
        let reference = channelReference(channel)
        return ClientMembershipObject(
            id: "\(reference.id)/members/\(user.rawValue)",
            url: "\(reference.url)/members/\(Self.pathSegment(user.rawValue))", channel: reference,
            identity: identity(user))
    }

    public func channelMessage(_ m: ChannelMessage) -> ClientChannelMessageObject {
        let reference = channelReference(m.channelID)
        return ClientChannelMessageObject(
            id: Self.messageID(m.id), url: "\(reference.url)/messages/\(Self.lowercase(m.id.uuid))",
            channel: reference, parts: parts(m.parts, of: m.id), sent_at: Self.date(m.sentAt),
            sender: identity(m.sender), is_unread: false, recipient_status: [:],
            position: Int64(clamping: m.logSeq))
    }
}
