import Foundation
import LaminaModel

// Properties are named as their JSON keys (Layer's snake_case); `JSONEncoder`'s key
// strategy is not used because it would rewrite the keys of metadata maps too.

/// An optional written as `null` when absent (Layer shows these keys always); a plain
/// optional property is left out when absent.
@propertyWrapper
struct Nullable<Value: Encodable & Sendable>: Encodable, Sendable {
    var wrappedValue: Value?
    init(wrappedValue: Value?) { self.wrappedValue = wrappedValue }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        if let wrappedValue { try c.encode(wrappedValue) } else { try c.encodeNil() }
    }
}

/// Layer's identity object: what was set for the user (3.0), else its user id as display name.
struct IdentityObject: Encodable, Sendable {
    var id: String
    var url: String
    var user_id: String
    var display_name: String
    @Nullable var avatar_url: String?
    var first_name: String?
    var last_name: String?
    var phone_number: String?
    var email_address: String?
    var public_key: String?
    /// Present once an identity was set.
    var metadata: [String: String]?
    /// The user's presence and when they were last seen (GET identity only; SPEC §6.6).
    var presence: PresenceObject?
}

/// A message's sender or an event's actor: `{"user_id", "name"}` in 1.0, the identity in
/// 3.0, or a named system sender (no user id).
enum SenderObject: Encodable, Sendable {
    case v1(userID: String?, name: String?)
    case system(name: String)
    case identity(IdentityObject)

    private enum Keys: String, CodingKey { case id, user_id, name }

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .identity(let identity): try identity.encode(to: encoder)
        case .v1(let user, let name):
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(user, forKey: .user_id)
            try c.encode(name, forKey: .name)
        case .system(let name):
            var c = encoder.container(keyedBy: Keys.self)
            try c.encodeNil(forKey: .id)
            try c.encodeNil(forKey: .user_id)
            try c.encode(name, forKey: .name)
        }
    }
}

/// A participant: its user id (1.0) or identity (3.0); a blocked user: `{"user_id"}` (1.0).
enum ParticipantObject: Encodable, Sendable {
    case userID(String)
    case userIDObject(String)
    case identity(IdentityObject)

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .userID(let id):
            var c = encoder.singleValueContainer()
            try c.encode(id)
        case .userIDObject(let id): try ["user_id": id].encode(to: encoder)
        case .identity(let identity): try identity.encode(to: encoder)
        }
    }
}

struct ConversationObject: Encodable, Sendable {
    var id: String
    var url: String
    var messages_url: String
    var created_at: String
    var participants: [ParticipantObject]
    var distinct: Bool
    /// Strings and objects of strings (Layer's rule), nested.
    var metadata: [String: JSONValue]
}

/// A conversation named by id only (deletions, a message's conversation).
struct ConversationReference: Encodable, Sendable {
    var id: String
    var url: String?
}

struct MessageObject: Encodable, Sendable {
    var id: String
    var url: String
    var conversation: ConversationReference
    var parts: [PartObject]
    @Nullable var sent_at: String?
    var sender: SenderObject
    var recipient_status: [String: String]
    var position: Int64
    /// Only in a user's view of the messages.
    var is_unread: Bool?
    /// Per key, the reactions on the message (a Lamina extension, SPEC §6.9); left out where
    /// not shown (webhook events other than `Message.reactions_changed`).
    var reactions: [String: ReactionSummaryObject]?
    /// Lamina: the thread root this message replies to (`layer:///messages/<uuid>`); absent
    /// for a message that is no reply.
    var reply_to: String?
    /// Lamina: a thread root's summary; absent for a message without replies.
    var thread: ThreadObject?
    /// Lamina: when its sender last edited it; absent when never edited.
    var edited_at: String?
    /// The user ids the message mentions (a Lamina extension, SPEC §3.17); absent when none.
    var mentions: [String]? = nil
}

/// Lamina: a thread root's replies (SPEC §6.2, LaminaMerge's `ThreadSummary`).
struct ThreadObject: Codable, Sendable, Hashable {
    /// Replies not deleted.
    var reply_count: UInt64
    /// The latest of them, `layer:///messages/<uuid>`.
    var last_reply: String

    init(_ t: MessageThread) {
        reply_count = t.replyCount
        last_reply = ServerAPIRepresentation.messageID(t.lastReply)
    }
}

/// A message part: `body` (text, or base64 with `encoding`) or `content`; `id` in 3.0.
struct PartObject: Encodable, Sendable {
    var id: String?
    var mime_type: String
    var body: String?
    var encoding: String?
    var content: PartContentObject?
}

/// Rich content in a part; the URLs are null where they are not shown (webhook events).
struct PartContentObject: Encodable, Sendable {
    var id: String
    var size: UInt64
    @Nullable var download_url: String?
    @Nullable var expiration: String?
    @Nullable var refresh_url: String?
}

/// A message named by id only (`message.deleted`).
struct MessageReference: Encodable, Sendable {
    var id: String
    var url: String?
    var conversation: ConversationReference
}

/// `POST /announcements`' answer.
struct AnnouncementObject: Encodable, Sendable {
    var id: String
    var url: String
    var sent_at: String
    /// User ids (1.0) or identity ids (3.0).
    var recipients: [String]
    var sender: SenderObject
    var parts: [PartObject]
}

/// Layer's content object: `upload_url` until complete, `download_url` once complete, both
/// null when not shown.
struct ContentObject: Encodable, Sendable {
    var id: String
    var size: UInt64
    /// What the node holds.
    var uploaded: UInt64
    @Nullable var upload_url: String?
    @Nullable var download_url: String?
    @Nullable var expiration: String?
    var refresh_url: String
}

/// Layer's webhook object (the secret is never shown).
struct WebhookObject: Encodable, Sendable {
    var id: String
    var url: String
    var version = "3.0"
    var target_url: String
    var events: [String]
    var status: String
    @Nullable var status_reason: String?
    var created_at: String
    @Nullable var config: JSONValue?
}
