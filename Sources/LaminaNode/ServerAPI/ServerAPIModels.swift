import Foundation
import LaminaModel
import LaminaStore

/// The Platform API version a request asked for (`Accept: …; version=X`).
enum ServerAPIVersion: String, Sendable {
    /// Participants and senders as user ids.
    case v1 = "1.0"
    /// Participants and senders as identities (`layer:///identities/<user id>`).
    case v3 = "3.0"
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

    /// A JSON string, or null.
    static func orNull(_ s: String?) -> Any { s.map { $0 as Any } ?? NSNull() }

    /// When content URLs expire, as an ISO 8601 date (nil without URLs).
    var contentURLExpiration: String? {
        contentURLs == nil ? nil : ServerAPIJSON.date(millisecondsSince1970: contentURLExpires * 1000)
    }

    static func conversationID(_ id: ConversationID) -> String { "layer:///conversations/\(id.uuid.uuidString.lowercased())" }
    static func messageID(_ id: MessageID) -> String { "layer:///messages/\(id.uuid.uuidString.lowercased())" }
    static func identityID(_ user: UserID) -> String { "layer:///identities/\(user.rawValue)" }

    /// The identity object: what was set for the user, else its user id as display name.
    func identity(_ user: UserID) -> [String: Any] {
        var object: [String: Any] = [
            "id": Self.identityID(user), "url": "\(base)/users/\(user.rawValue)/identity", "user_id": user.rawValue,
            "display_name": user.rawValue, "avatar_url": NSNull(),
        ]
        if let stored = identities[user] {
            for (key, value) in stored.values { object[key] = value }
            object["metadata"] = stored.metadata
        }
        return object
    }

    /// A message's sender or an event's actor: a user (its id in 1.0, its identity in 3.0), or
    /// a named system sender (`name`, no user id).
    func sender(_ user: UserID) -> [String: Any] {
        if let name = user.systemSenderName {
            return version == .v1 ? ["user_id": NSNull(), "name": name] : ["id": NSNull(), "user_id": NSNull(), "name": name]
        }
        return version == .v1 ? ["user_id": user.rawValue, "name": NSNull()] : identity(user)
    }

    func participant(_ user: UserID) -> Any { version == .v1 ? user.rawValue as Any : identity(user) }

    func conversation(_ c: Conversation) -> [String: Any] {
        let uuid = c.id.uuid.uuidString.lowercased()
        return [
            "id": Self.conversationID(c.id),
            "url": "\(base)/conversations/\(uuid)",
            "messages_url": "\(base)/conversations/\(uuid)/messages",
            "created_at": ServerAPIJSON.date(millisecondsSince1970: c.createdAt.millisecondsSince1970),
            "participants": c.participants.sorted().map(participant),
            "distinct": c.isDistinct,
            "metadata": Self.json(c.metadata),
        ]
    }

    func message(_ m: Message, for user: UserID? = nil) -> [String: Any] {
        let uuid = m.id.uuid.uuidString.lowercased()
        let conversation = m.conversationID.uuid.uuidString.lowercased()
        let parts = self.parts(m.parts, of: m.id)
        var statuses: [String: String] = [:]
        for (u, s) in m.recipientStatus { statuses[version == .v1 ? u.rawValue : Self.identityID(u)] = Self.status(s) }
        var object: [String: Any] = [
            "id": Self.messageID(m.id),
            "url": "\(base)/conversations/\(conversation)/messages/\(uuid)",
            "conversation": ["id": "layer:///conversations/\(conversation)", "url": "\(base)/conversations/\(conversation)"],
            "parts": parts,
            "sent_at": m.sentAt.map { ServerAPIJSON.date(millisecondsSince1970: $0.millisecondsSince1970) } ?? NSNull(),
            "sender": sender(m.sender),
            "recipient_status": statuses,
            "position": m.position.map { Int64(bitPattern: ($0.physical << 16) | UInt64($0.logical & 0xffff)) } ?? 0,
        ]
        if let user {
            object["is_unread"] = m.sender != user && (m.recipientStatus[user] ?? .sent) < .read
        }
        return object
    }

    /// A message's parts: `body` (text, or base64 with `encoding`) or `content`; in 3.0 with
    /// ids (`layer:///messages/<message>/parts/<part uuid>`, addressable by the part routes).
    func parts(_ parts: [MessagePart], of message: MessageID) -> [[String: Any]] {
        let uuid = message.uuid.uuidString.lowercased()
        var out: [[String: Any]] = []
        for part in parts {
            var p: [String: Any] = ["mime_type": part.mimeType.description]
            if version == .v3 {
                p["id"] = "layer:///messages/\(uuid)/parts/\(part.id.uuidString.lowercased())"
            }
            switch part.content {
            case .inline(let bytes):
                if part.mimeType.description.hasPrefix("text/"), let text = String(validating: bytes, as: UTF8.self) {
                    p["body"] = text
                } else {
                    p["body"] = Data(bytes).base64EncodedString()
                    p["encoding"] = "base64"
                }
            case .external(let reference):
                // Layer's shape; the download URL expires (as a device's session does).
                p["content"] = [
                    "id": Self.contentID(reference.id), "size": reference.size,
                    "download_url": Self.orNull(contentURL(.download, reference.id)), "expiration": Self.orNull(contentURLExpiration),
                    "refresh_url": Self.orNull(contentURLs == nil ? nil : "\(base)/content/\(reference.id.uuid.uuidString.lowercased())"),
                ] as [String: Any]
            }
            out.append(p)
        }
        return out
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

    static func json(_ metadata: Metadata) -> [String: Any] { metadata.values.mapValues(json) }

    static func json(_ value: MetadataValue) -> Any {
        switch value {
        case .string(let s): s
        case .dictionary(let d): d.mapValues(json)
        }
    }

    /// Metadata from JSON: strings and objects of strings only (Layer's rule).
    static func metadataValue(_ any: Any, property: String) throws(ServerAPIError) -> MetadataValue {
        if let s = any as? String { return .string(s) }
        if let d = any as? [String: Any] {
            var out: [String: MetadataValue] = [:]
            for (k, v) in d { out[k] = try metadataValue(v, property: "\(property).\(k)") }
            return .dictionary(out)
        }
        throw .invalidProperty(property, "\(property) must be a string or an object of strings")
    }

    /// A user id from a participant or sender reference: a user id, or (3.0) an identity id.
    static func user(_ any: Any, property: String) throws(ServerAPIError) -> UserID {
        guard var s = any as? String else { throw .invalidProperty(property, "\(property) must hold user ids (strings)") }
        if s.hasPrefix("layer:///identities/") { s.removeFirst("layer:///identities/".count) }
        do {
            let user = try UserID(s)
            try user.checkIsUser()
            return user
        } catch { throw .invalidProperty(property, error.reason) }
    }
}
