import Foundation
import LaminaModel

/// A channel as `Channel.created` and `Channel.deleted` tell it: the channel as it was when the
/// event happened (for a deletion, just before), with its member count then.
struct WebhookChannel: Equatable, Sendable, Codable {
    var id: UUID
    var name: String
    var creator: String
    /// Milliseconds since 1970.
    var createdAt: Int64
    var memberCount: Int

    init(_ channel: ChatChannel, memberCount: Int) {
        id = channel.id.uuid
        name = channel.name.rawValue
        creator = channel.creator.rawValue
        createdAt = channel.createdAt.millisecondsSince1970
        self.memberCount = memberCount
    }
}

/// A membership as `Membership.created` and `Membership.deleted` tell it: which user in which
/// channel (the event's actor says who made the change: the member, or the Server API).
struct WebhookMembership: Equatable, Sendable, Codable {
    var channel: UUID
    var user: String
}

/// `Membership.*`'s `membership`, shaped as Layer's Web SDK reads a membership: `id`
/// `layer:///channels/<uuid>/members/<user id>`, `url`, the `channel` and the member's `identity`.
struct WebhookMembershipObject: Encodable, Sendable {
    var id: String
    var url: String
    var channel: ConversationReference
    var identity: SenderObject

    init(_ membership: WebhookMembership, _ r: ServerAPIRepresentation) {
        let channel = membership.channel.uuidString.lowercased()
        let user = membership.user
        id = "layer:///channels/\(channel)/members/\(user)"
        url = "\(r.base)/channels/\(channel)/members/\(user)"
        self.channel = ConversationReference(id: "layer:///channels/\(channel)", url: "\(r.base)/channels/\(channel)")
        identity = (try? UserID(membership.user)).map(r.sender) ?? .system(name: membership.user)
    }
}

extension ServerAPIRepresentation {
    /// A channel as the Server API shows it.
    func channel(_ c: WebhookChannel) -> ChannelObject {
        let uuid = c.id.uuidString.lowercased()
        return ChannelObject(
            id: "layer:///channels/\(uuid)", url: "\(base)/channels/\(uuid)",
            messages_url: "\(base)/channels/\(uuid)/messages",
            members_url: "\(base)/channels/\(uuid)/members", name: c.name,
            created_at: ServerAPIJSON.date(millisecondsSince1970: c.createdAt), member_count: c.memberCount)
    }

    /// A channel's message as the Server API shows it (`position`: its place in the log).
    func channelMessage(_ m: ChannelMessage) -> ChannelMessageObject {
        let channel = m.channelID.uuid.uuidString.lowercased()
        return ChannelMessageObject(
            id: Self.messageID(m.id),
            url: "\(base)/channels/\(channel)/messages/\(m.id.uuid.uuidString.lowercased())",
            channel: ConversationReference(id: "layer:///channels/\(channel)", url: "\(base)/channels/\(channel)"),
            parts: parts(m.parts, of: m.id),
            sent_at: ServerAPIJSON.date(millisecondsSince1970: m.sentAt.millisecondsSince1970),
            sender: sender(m.sender), position: m.logSeq)
    }
}
