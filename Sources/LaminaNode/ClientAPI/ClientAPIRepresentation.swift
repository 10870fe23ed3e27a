import Foundation
import LaminaModel
import LaminaStore

/// Builds the Client API objects (ClientAPIObjects.swift) from the model, as `viewer` sees
/// them: `base` is the node's `https://host:port` (the Client API's root), `identities` the
/// profiles set for the users shown.
public struct ClientAPIRepresentation: Sendable {
    /// `https://host:port`.
    public let base: String
    /// The session's user: unread flags and counts are theirs.
    public let viewer: UserID
    /// Identities set through the Server API for the users shown (missing: the user id is
    /// the display name).
    var identities: [UserID: StoredIdentity] = [:]
    /// The presence shown on identities (the identity routes load it; elsewhere none is shown).
    var presences: [UserID: Presence] = [:]
    /// Shows rich content's signed download URLs (nil: content without URLs).
    var content: ServerAPIRepresentation?
    /// When the messages shown were last edited (their `edited_at`; absent: never).
    var editTimes: [MessageID: HLCTimestamp] = [:]

    init(base: String, viewer: UserID, identities: [UserID: StoredIdentity] = [:]) {
        self.base = base
        self.viewer = viewer
        self.identities = identities
    }

    // MARK: Ids

    public static func conversationID(_ id: ConversationID) -> String {
        "layer:///conversations/\(Self.lowercase(id.uuid))"
    }
    public static func messageID(_ id: MessageID) -> String { "layer:///messages/\(Self.lowercase(id.uuid))" }
    public static func announcementID(_ id: MessageID) -> String {
        "layer:///announcements/\(Self.lowercase(id.uuid))"
    }
    public static func identityID(_ user: UserID) -> String { "layer:///identities/\(user.rawValue)" }

    /// A UUID's lowercase text, as `uuidString.lowercased()` writes it (without its two
    /// intermediate strings: ids and URLs of every packet carry several).
    public static func lowercase(_ uuid: UUID) -> String {
        withUnsafeBytes(of: uuid.uuid) { raw in
            String(unsafeUninitializedCapacity: 36) { out in
                var index = 0
                for (offset, byte) in raw.enumerated() {
                    if offset == 4 || offset == 6 || offset == 8 || offset == 10 {
                        out[index] = UInt8(ascii: "-")
                        index += 1
                    }
                    out[index] = hexDigits[Int(byte >> 4)]
                    out[index + 1] = hexDigits[Int(byte & 0x0F)]
                    index += 2
                }
                return index
            }
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// A conversation id from its Layer id or bare UUID (nil when it is neither).
    public static func conversation(_ text: String) -> ConversationID? {
        UUID(uuidString: Self.strip(text, "layer:///conversations/")).map(ConversationID.init(uuid:))
    }
    /// A message id from its Layer id or bare UUID.
    public static func message(_ text: String) -> MessageID? {
        UUID(uuidString: Self.strip(text, "layer:///messages/")).map(MessageID.init(uuid:))
    }
    /// An announcement's message id from its Layer id or bare UUID.
    public static func announcement(_ text: String) -> MessageID? {
        UUID(uuidString: Self.strip(text, "layer:///announcements/")).map(MessageID.init(uuid:))
    }

    private static func strip(_ text: String, _ prefix: String) -> String {
        text.hasPrefix(prefix) ? String(text.dropFirst(prefix.count)) : text
    }

    // MARK: Positions

    /// A message position as a Client API `position`: the HLC's milliseconds times 1,024 plus
    /// its counter (capped at 1,023), below 2^53 until the year 2248, so a JavaScript number
    /// holds it exactly. Ordered as the positions are (messages whose counters pass 1,023 in
    /// one millisecond share a number).
    public static func position(_ p: MessagePosition) -> Int64 {
        Int64(truncatingIfNeeded: (p.physical << 10) | UInt64(min(p.logical, 1_023)))
    }

    /// The highest message position a Client API `position` stands for (every message shown
    /// with that number or a lower one is at or below it).
    public static func position(_ number: Int64) -> MessagePosition? {
        guard number >= 0 else { return nil }
        let counter = UInt32(number & 1_023)
        return MessagePosition(
            physical: UInt64(number >> 10), logical: counter == 1_023 ? .max : counter, node: NodeID(UInt64.max))
    }

    static func date(_ t: Timestamp) -> String { ClientAPIDate.string(millisecondsSince1970: t.millisecondsSince1970) }

    // MARK: Objects

    public func identity(_ user: UserID) -> ClientIdentityObject {
        if let name = user.systemSenderName {
            return ClientIdentityObject(display_name: name, name: name)
        }
        var object = ClientIdentityObject(
            id: Self.identityID(user), url: "\(base)/identities/\(Self.pathSegment(user.rawValue))",
            user_id: user.rawValue, display_name: user.rawValue, identity_type: "user")
        if let stored = identities[user] {
            let v = stored.values
            object.display_name = v["display_name"] ?? object.display_name
            object.avatar_url = v["avatar_url"]
            object.first_name = v["first_name"]
            object.last_name = v["last_name"]
            object.phone_number = v["phone_number"]
            object.email_address = v["email_address"]
            object.public_key = v["public_key"]
            object.metadata = stored.metadata
        }
        object.presence = presences[user].map(PresenceObject.init)
        return object
    }

    /// A conversation with the viewer's unread count, its message count and its last message.
    public func conversation(
        _ c: Conversation, unread: Int = 0, total: Int = 0, lastMessage: Message? = nil
    ) -> ClientConversationObject {
        let uuid = Self.lowercase(c.id.uuid)
        return ClientConversationObject(
            id: Self.conversationID(c.id), url: "\(base)/conversations/\(uuid)",
            messages_url: "\(base)/conversations/\(uuid)/messages", created_at: Self.date(c.createdAt),
            participants: c.participants.sorted().map(identity), distinct: c.isDistinct,
            metadata: ServerAPIRepresentation.json(c.metadata), unread_message_count: unread,
            total_message_count: total, last_message: lastMessage.map { message($0) })
    }

    public func message(_ m: Message) -> ClientMessageObject {
        let conversation = Self.lowercase(m.conversationID.uuid)
        return ClientMessageObject(
            id: Self.messageID(m.id), url: "\(base)/messages/\(Self.lowercase(m.id.uuid))",
            conversation: ClientReference(
                id: Self.conversationID(m.conversationID), url: "\(base)/conversations/\(conversation)"),
            parts: parts(m), sent_at: m.sentAt.map(Self.date), received_at: nil, sender: identity(m.sender),
            is_unread: isUnread(m), recipient_status: statuses(m), position: m.position.map { Self.position($0) } ?? 0,
            reply_to: m.replyTo.map(Self.messageID),
            thread: m.thread.map {
                ClientThreadObject(reply_count: $0.replyCount, last_reply: Self.messageID($0.lastReply))
            },
            edited_at: editTimes[m.id].map {
                Self.date(Timestamp(millisecondsSince1970: Int64(clamping: $0.physical)))
            },
            mentions: MentionsJSON.representation(m.mentions, Self.identityID))
    }

    /// An announcement to the viewer (a message of their announcements conversation).
    public func announcement(_ m: Message) -> ClientAnnouncementObject {
        ClientAnnouncementObject(
            id: Self.announcementID(m.id), url: "\(base)/announcements/\(Self.lowercase(m.id.uuid))",
            parts: parts(m), sent_at: m.sentAt.map(Self.date), received_at: nil, sender: identity(m.sender),
            is_unread: isUnread(m), recipient_status: statuses(m), position: m.position.map { Self.position($0) } ?? 0)
    }

    func isUnread(_ m: Message) -> Bool { m.sender != viewer && (m.recipientStatus[viewer] ?? .sent) < .read }

    func statuses(_ m: Message) -> [String: String] {
        var out: [String: String] = [:]
        for (user, status) in m.recipientStatus {
            out[Self.identityID(user)] = ServerAPIRepresentation.status(status)
        }
        return out
    }

    /// Parts with ids `layer:///messages/<message>/parts/<part uuid>` (no `url`: parts are not
    /// addressed on their own here); text as it is, other
    /// bytes as base64; rich content with its download URL when ``content`` signs them.
    func parts(_ m: Message) -> [ClientPartObject] { parts(m.parts, of: m.id) }

    /// The parts of message `id` (a conversation's or a channel's), as ``parts(_:)`` shows them.
    func parts(_ parts: [MessagePart], of id: MessageID) -> [ClientPartObject] {
        let message = Self.lowercase(id.uuid)
        return parts.map { part in
            let uuid = Self.lowercase(part.id)
            var p = ClientPartObject(
                id: "layer:///messages/\(message)/parts/\(uuid)", mime_type: part.mimeType.description)
            switch part.content {
            case .inline(let bytes):
                if part.mimeType.description.hasPrefix("text/"), let text = String(validating: bytes, as: UTF8.self) {
                    p.body = text
                } else {
                    p.body = Data(bytes).base64EncodedString()
                    p.encoding = "base64"
                }
            case .external(let reference):
                p.content = ClientContentObject(
                    id: ServerAPIRepresentation.contentID(reference.id), size: reference.size,
                    download_url: content?.contentURL(.download, reference.id),
                    expiration: content?.contentURLExpiration,
                    refresh_url: content.map { _ in "\(base)/content/\(Self.lowercase(reference.id.uuid))" })
            }
            return p
        }
    }

    /// A user id as one URL path segment (percent-encoded where it must be).
    static func pathSegment(_ text: String) -> String {
        // Most user ids are letters, digits and `-._~`: nothing to encode.
        if text.utf8.allSatisfy({ byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                true
            default: false
            }
        }) {
            return text
        }
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/?#")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
