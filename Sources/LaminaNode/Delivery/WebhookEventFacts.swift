import Foundation
import LaminaModel
import LaminaStore

/// One change a `Conversation.updated` event names (Layer's `changes`): the participants
/// before and after, or one metadata key path's value before and after (nil: absent).
enum WebhookConversationChange: Equatable, Sendable, Codable {
    case participants(before: [String], after: [String])
    case metadata(path: String, before: JSONValue?, after: JSONValue?)

    /// The participants change between two sets of users (nil when they are equal).
    static func participants(_ before: Set<UserID>, _ after: Set<UserID>) -> Self? {
        before == after
            ? nil : .participants(before: before.map(\.rawValue).sorted(), after: after.map(\.rawValue).sorted())
    }

    /// The change of the value at `path` (nil when it did not change).
    static func metadata(_ path: MetadataKeyPath, _ before: MetadataValue?, _ after: MetadataValue?) -> Self? {
        before == after
            ? nil
            : .metadata(
                path: "metadata.\(path)", before: before.map { ServerAPIRepresentation.json($0) },
                after: after.map { ServerAPIRepresentation.json($0) })
    }
}

/// A read or delivery receipt as `Receipt.created` tells it: who (the event's actor) marked
/// what in which conversation, up to which position (Layer's receipts since Webhooks 2.0 are
/// "based on a message position within a conversation").
struct WebhookReceipt: Equatable, Sendable, Codable {
    /// `read` or `delivery`.
    var type: String
    var conversation: UUID
    /// The position up to which the receipt counts (the Server API's `position` number).
    var position: Int64
    /// The message at that position, when the receipt named one message.
    var message: UUID?

    init(status: RecipientStatus, conversation: ConversationID, upTo position: MessagePosition, message: MessageID?) {
        type = status == .read ? "read" : "delivery"
        self.conversation = conversation.uuid
        self.position = ServerAPIRepresentation.position(position)
        self.message = message?.uuid
    }
}

/// An identity in a row: its user and what was set (the object as it was, for deletions).
struct WebhookIdentity: Equatable, Sendable, Codable {
    var user: String
    var identity: StoredIdentity
}
