import Foundation
import LaminaModel
import LaminaStore

/// The Platform API version a request asked for (`Accept: …; version=X`). Layer's changelog:
/// 2.0 made identities the way users appear (Layer's Go and Web SDKs of 2016–2018 send it),
/// 3.0 made message parts objects of their own (ids, the parts routes); 1.1 kept 1.0's shapes.
enum ServerAPIVersion: String, Sendable, CaseIterable {
    /// Participants and senders as user ids.
    case v1 = "1.0"
    /// As 1.0.
    case v1_1 = "1.1"
    /// Participants and senders as identities (`layer:///identities/<user id>`); parts
    /// without ids.
    case v2 = "2.0"
    /// As 2.0, and parts with ids (`layer:///messages/<uuid>/parts/<uuid>`), addressable.
    case v3 = "3.0"

    /// Users appear as identities (2.0 on), not as bare user ids.
    var usesIdentities: Bool { self == .v2 || self == .v3 }
    /// Message parts are objects of their own: ids, and the parts routes (3.0).
    var hasAddressableParts: Bool { self == .v3 }
    /// The versions served, for error messages: "1.0, 1.1, 2.0 and 3.0".
    static var servedList: String {
        let all = allCases.map(\.rawValue)
        return all.dropLast().joined(separator: ", ") + " and " + all.last!
    }
}

/// The JSON representations of conversations and messages, per version.
struct ServerAPIRepresentation {
    /// `https://host:port/apps/<app id>`.
    let base: String
    let version: ServerAPIVersion
    /// Identities set through the Server API, for the users being represented (3.0).
    var identities: [UserID: StoredIdentity] = [:]
    /// Signs content URLs (nil: content is shown without them, as in webhook events).
    var contentURLs: ContentURLSigner?
    /// When the content URLs of this answer expire (unix seconds).
    var contentURLExpires: Int64 = 0
    /// When the messages represented were last edited (their `edited_at`; absent: never).
    var editTimes: [MessageID: HLCTimestamp] = [:]

    static func contentID(_ id: ContentID) -> String { "layer:///content/\(id.uuid.uuidString.lowercased())" }

    /// `https://host:port` (the base without `/apps/<app id>`).
    var origin: String { base.range(of: "/apps/").map { String(base[..<$0.lowerBound]) } ?? base }

    /// A signed URL to upload (`PUT <base>/content/<uuid>`) or download (`GET <base>/content/<uuid>/data`) content.
    func contentURL(_ purpose: ContentURLSigner.Purpose, _ id: ContentID) -> String? {
        guard let contentURLs else { return nil }
        let uuid = id.uuid.uuidString.lowercased()
        let path = purpose == .upload ? "\(base)/content/\(uuid)" : "\(base)/content/\(uuid)/data"
        return "\(path)?\(contentURLs.query(purpose, id, expires: contentURLExpires))"
    }

    /// When content URLs expire, as an ISO 8601 date (nil without URLs).
    var contentURLExpiration: String? {
        contentURLs == nil ? nil : ServerAPIJSON.date(millisecondsSince1970: contentURLExpires * 1000)
    }

    static func conversationID(_ id: ConversationID) -> String {
        "layer:///conversations/\(id.uuid.uuidString.lowercased())"
    }
    static func messageID(_ id: MessageID) -> String { "layer:///messages/\(id.uuid.uuidString.lowercased())" }
    static func identityID(_ user: UserID) -> String { "layer:///identities/\(user.rawValue)" }
    /// A message position as the Server API's `position` number.
    static func position(_ p: MessagePosition) -> Int64 {
        Int64(bitPattern: (p.physical << 16) | UInt64(p.logical & 0xffff))
    }

    /// The identity object: what was set for the user, else its user id as display name.
    func identity(_ user: UserID) -> IdentityObject {
        var object = IdentityObject(
            id: Self.identityID(user), url: "\(base)/users/\(user.rawValue)/identity", user_id: user.rawValue,
            display_name: user.rawValue, avatar_url: nil)
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
        return object
    }

    /// A message's sender or an event's actor: a user (its id in 1.0, its identity in 3.0), or
    /// a named system sender (`name`, no user id).
    func sender(_ user: UserID) -> SenderObject {
        if let name = user.systemSenderName {
            return version.usesIdentities ? .system(name: name) : .v1(userID: nil, name: name)
        }
        return version.usesIdentities ? .identity(identity(user)) : .v1(userID: user.rawValue, name: nil)
    }

    func participant(_ user: UserID) -> ParticipantObject {
        version.usesIdentities ? .identity(identity(user)) : .userID(user.rawValue)
    }

    func conversation(_ c: Conversation) -> ConversationObject {
        let uuid = c.id.uuid.uuidString.lowercased()
        return ConversationObject(
            id: Self.conversationID(c.id),
            url: "\(base)/conversations/\(uuid)",
            messages_url: "\(base)/conversations/\(uuid)/messages",
            created_at: ServerAPIJSON.date(millisecondsSince1970: c.createdAt.millisecondsSince1970),
            participants: c.participants.sorted().map(participant),
            distinct: c.isDistinct,
            metadata: Self.json(c.metadata))
    }

    func message(_ m: Message, for user: UserID? = nil, reactions: [String: ReactionSummaryObject]? = nil)
        -> MessageObject
    {
        let uuid = m.id.uuid.uuidString.lowercased()
        let conversation = m.conversationID.uuid.uuidString.lowercased()
        var statuses: [String: String] = [:]
        for (u, s) in m.recipientStatus {
            statuses[version.usesIdentities ? Self.identityID(u) : u.rawValue] = Self.status(s)
        }
        return MessageObject(
            id: Self.messageID(m.id),
            url: "\(base)/conversations/\(conversation)/messages/\(uuid)",
            conversation: ConversationReference(
                id: "layer:///conversations/\(conversation)", url: "\(base)/conversations/\(conversation)"),
            parts: parts(m.parts, of: m.id),
            sent_at: m.sentAt.map { ServerAPIJSON.date(millisecondsSince1970: $0.millisecondsSince1970) },
            sender: sender(m.sender),
            recipient_status: statuses,
            position: m.position.map(Self.position) ?? 0,
            is_unread: user.map { m.sender != $0 && (m.recipientStatus[$0] ?? .sent) < .read },
            reactions: reactions,
            reply_to: m.replyTo.map(Self.messageID), thread: m.thread.map(ThreadObject.init),
            edited_at: editTimes[m.id].map { ServerAPIJSON.date(millisecondsSince1970: Int64(clamping: $0.physical)) },
            mentions: MentionsJSON.representation(m.mentions, \.rawValue))
    }

    /// A message by id and url, with its conversation's (webhook events about its parts).
    func messageReference(_ m: MessageID, in c: ConversationID) -> MessageReference {
        let conversation = c.uuid.uuidString.lowercased()
        return MessageReference(
            id: Self.messageID(m),
            url: "\(base)/conversations/\(conversation)/messages/\(m.uuid.uuidString.lowercased())",
            conversation: ConversationReference(
                id: Self.conversationID(c), url: "\(base)/conversations/\(conversation)"))
    }

    /// A message's parts: `body` (text, or base64 with `encoding`) or `content`; in 3.0 with
    /// ids (`layer:///messages/<message>/parts/<part uuid>`, addressable by the part routes).
    func parts(_ parts: [MessagePart], of message: MessageID) -> [PartObject] {
        let uuid = message.uuid.uuidString.lowercased()
        return parts.map { part in
            var p = PartObject(mime_type: part.mimeType.description)
            if version.hasAddressableParts {
                p.id = "layer:///messages/\(uuid)/parts/\(part.id.uuidString.lowercased())"
            }
            switch part.content {
            case .inline(let bytes):
                if part.mimeType.description.hasPrefix("text/"), let text = String(validating: bytes, as: UTF8.self) {
                    p.body = text
                } else {
                    p.body = Data(bytes).base64EncodedString()
                    p.encoding = "base64"
                }
            case .external(let reference):
                // Layer's shape; the download URL expires (as a device's session does).
                p.content = PartContentObject(
                    id: Self.contentID(reference.id), size: reference.size,
                    download_url: contentURL(.download, reference.id), expiration: contentURLExpiration,
                    refresh_url: contentURLs == nil
                        ? nil : "\(base)/content/\(reference.id.uuid.uuidString.lowercased())")
            }
            return p
        }
    }

    static func status(_ s: RecipientStatus) -> String {
        switch s {
        case .invalid: "invalid"
        case .pending: "pending"
        case .sent: "sent"
        case .delivered: "delivered"
        case .read: "read"
        }
    }

    static func json(_ metadata: Metadata) -> [String: JSONValue] { metadata.values.mapValues(json) }

    static func json(_ value: MetadataValue) -> JSONValue {
        switch value {
        case .string(let s): .string(s)
        case .dictionary(let d): .object(d.mapValues(json))
        }
    }

    /// Metadata from JSON: strings and objects of strings only (Layer's rule).
    static func metadataValue(_ value: JSONValue, property: String) throws(ServerAPIError) -> MetadataValue {
        if let s = value.string { return .string(s) }
        if let d = value.object {
            var out: [String: MetadataValue] = [:]
            for (k, v) in d { out[k] = try metadataValue(v, property: "\(property).\(k)") }
            return .dictionary(out)
        }
        throw .invalidProperty(property, "\(property) must be a string or an object of strings")
    }

    /// A user id from a participant or sender reference: a user id, or (3.0) an identity id.
    static func user(_ value: JSONValue, property: String) throws(ServerAPIError) -> UserID {
        guard let s = value.string else { throw .invalidProperty(property, "\(property) must hold user ids (strings)") }
        return try user(s, property: property)
    }

    /// A user id, or (3.0) an identity id.
    static func user(_ text: String, property: String) throws(ServerAPIError) -> UserID {
        var s = text
        if s.hasPrefix("layer:///identities/") { s.removeFirst("layer:///identities/".count) }
        do {
            let user = try UserID(s)
            try user.checkIsUser()
            return user
        } catch { throw .invalidProperty(property, error.reason) }
    }
}
