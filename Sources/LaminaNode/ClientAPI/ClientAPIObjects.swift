import Foundation

// Layer's Client API objects (REST bodies and WebSocket `change` objects), as Layer's Web SDK
// reads them (`_populateFromServer` of conversation, message, message part, identity,
// announcement). Properties are named as their JSON keys (snake_case); built by
// ``ClientAPIRepresentation`` from the model. Decodable too, so tests and the WebSocket half
// read them back with the same types.

/// An identity: the user's profile as set through the Server API, else its user id as
/// display name. A system sender (an announcement's, a Server API system message's) has no
/// `id` and no `user_id`, only `name` (and `display_name`).
public struct ClientIdentityObject: Codable, Sendable, Hashable {
    public var id: String?
    public var url: String?
    public var user_id: String?
    public var display_name: String
    public var avatar_url: String?
    public var first_name: String?
    public var last_name: String?
    public var phone_number: String?
    public var email_address: String?
    public var public_key: String?
    public var metadata: [String: String]?
    /// `user` for users; absent for a system sender.
    public var identity_type: String?
    /// A system sender's name.
    public var name: String?
    /// The user's presence and when they were last seen (the identity routes only; SPEC §6.6).
    public var presence: PresenceObject?
}

/// An object named by id and url (a message's conversation).
public struct ClientReference: Codable, Sendable, Hashable {
    public var id: String
    public var url: String
}

/// Rich content of a part: where to download it and until when.
public struct ClientContentObject: Codable, Sendable, Hashable {
    public var id: String
    public var size: UInt64
    public var download_url: String?
    public var expiration: String?
    public var refresh_url: String?
}

/// A message part: `body` (text, or base64 with `encoding: "base64"`) or `content`.
public struct ClientPartObject: Codable, Sendable, Hashable {
    /// `layer:///messages/<uuid>/parts/<uuid>`.
    public var id: String
    public var url: String?
    public var mime_type: String
    public var body: String?
    public var encoding: String?
    public var content: ClientContentObject?
}

/// A message as one participant (the session's user) sees it.
public struct ClientMessageObject: Codable, Sendable, Hashable {
    /// `layer:///messages/<uuid>`.
    public var id: String
    public var url: String
    public var conversation: ClientReference
    public var parts: [ClientPartObject]
    public var sent_at: String?
    /// When the viewer's first device received it (its delivery); nil for the sender's own.
    public var received_at: String?
    public var sender: ClientIdentityObject
    public var is_unread: Bool
    /// `"layer:///identities/<user>": "sent" | "delivered" | "read"`.
    public var recipient_status: [String: String]
    /// Orders the conversation's messages; a whole number below 2^53 (a JavaScript number).
    public var position: Int64
    /// Per key, the reactions on the message (a Lamina extension, SPEC §6.9): in REST answers
    /// about messages; absent in WebSocket packets, which tell reaction changes as patches.
    public var reactions: [String: ReactionSummaryObject]? = nil
    /// Lamina: the thread root this message replies to (`layer:///messages/<uuid>`); absent
    /// for a message that is no reply.
    public var reply_to: String? = nil
    /// Lamina: a thread root's summary; absent for a message without replies.
    public var thread: ClientThreadObject? = nil
    /// Lamina: when its sender last edited it; absent when never edited.
    public var edited_at: String? = nil
    /// The identity ids the message mentions (a Lamina extension, SPEC §3.17); absent when none.
    public var mentions: [String]? = nil
}

/// Lamina: a thread root's replies (SPEC §6.2).
public struct ClientThreadObject: Codable, Sendable, Hashable {
    /// Replies not deleted.
    public var reply_count: UInt64
    /// The latest of them, `layer:///messages/<uuid>`.
    public var last_reply: String
}

/// A conversation as one participant sees it.
public struct ClientConversationObject: Codable, Sendable, Hashable {
    /// `layer:///conversations/<uuid>`.
    public var id: String
    public var url: String
    public var messages_url: String
    public var created_at: String
    public var participants: [ClientIdentityObject]
    public var distinct: Bool
    /// Strings and objects of strings (Layer's rule), nested.
    public var metadata: [String: JSONValue]
    public var unread_message_count: Int
    public var total_message_count: Int
    public var last_message: ClientMessageObject?
}

/// An announcement: a message from a system sender in the user's announcements (Layer kept
/// them apart from conversations; so does the Client API here).
public struct ClientAnnouncementObject: Codable, Sendable, Hashable {
    /// `layer:///announcements/<uuid>` (the uuid is the message's).
    public var id: String
    public var url: String
    public var parts: [ClientPartObject]
    public var sent_at: String?
    public var received_at: String?
    public var sender: ClientIdentityObject
    public var is_unread: Bool
    public var recipient_status: [String: String]
    public var position: Int64
}

/// `POST /nonces`' answer.
public struct ClientNonceObject: Codable, Sendable, Hashable {
    public var nonce: String
}

/// `POST /sessions`' answer.
public struct ClientSessionObject: Codable, Sendable, Hashable {
    public var session_token: String
}

/// Layer's error object (`{id, code, message, url, data}`), as every failed request answers
/// and as a WebSocket `response` packet carries it.
public struct ClientErrorObject: Codable, Sendable, Hashable {
    public var id: String
    public var code: Int
    public var message: String
    public var url: String
    public var data: [String: JSONValue]?
}
