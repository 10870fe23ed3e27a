import Foundation
import LaminaModel

/// What one push says, whatever the provider: built from the message's push configuration when
/// its commit queues it, kept as JSON in the push outbox, rendered per provider when sent.
struct PushNotification: Codable, Sendable, Hashable {
    var alert: String?
    var title: String?
    var sound: String?
    var category: String?
    /// The configuration's custom data.
    var data: [String: String]
    /// The recipient's unread count (unread messages over the user's conversations, plus the
    /// app backend's external count), counted when the push is sent (0 in the queue).
    var badge: Int
    /// `layer:///messages/<uuid>` and `layer:///conversations/<uuid>`; for a push-only
    /// notification (`POST /notifications`) `layer:///notifications/<uuid>` and no conversation.
    var messageID: String
    var conversationID: String?
    /// The message's sender (none for a push-only notification).
    var sender: String?

    /// A message without alert, title and sound is pushed silently (a background wake-up so
    /// the app can sync): APNs `content-available`, FCM data only.
    var isSilent: Bool { alert == nil && title == nil && sound == nil }

    init(message: Message, badge: Int) {
        let push = message.push
        alert = push?.alert
        title = push?.title
        sound = push?.sound
        category = push?.category
        data = push?.data ?? [:]
        self.badge = badge
        messageID = "layer:///messages/\(message.id.uuid.uuidString.lowercased())"
        conversationID = "layer:///conversations/\(message.conversationID.uuid.uuidString.lowercased())"
        sender = message.sender.rawValue
    }

    /// A push-only notification (the Server API's `POST /notifications`): no message, no
    /// conversation, no sender.
    init(notification id: UUID, push: PushConfiguration, badge: Int) {
        alert = push.alert
        title = push.title
        sound = push.sound
        category = push.category
        data = push.data
        self.badge = badge
        messageID = "layer:///notifications/\(id.uuidString.lowercased())"
        conversationID = nil
        sender = nil
    }

    /// A per-recipient override: its fields replace these, its data entries are added.
    mutating func apply(_ override: PushConfiguration) {
        if let v = override.alert { alert = v }
        if let v = override.title { title = v }
        if let v = override.sound { sound = v }
        if let v = override.category { category = v }
        data.merge(override.data) { $1 }
    }

    func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    static func decode(_ data: Data) throws -> PushNotification {
        try JSONDecoder().decode(PushNotification.self, from: data)
    }
}
