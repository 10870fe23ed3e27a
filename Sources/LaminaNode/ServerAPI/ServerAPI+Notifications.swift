import Foundation
import LaminaModel
import LaminaTransport

/// Push-only notifications (`POST /notifications`, Layer's Platform API): a push to each
/// device of the recipients that has no live session, without a message or a conversation.
extension ServerAPI {
    /// POST /notifications: `recipients` (user ids, or identity ids; 1 to
    /// ``ServerAPILimits/maxAnnouncementRecipients``) and `notification` (`text`, `title`,
    /// `sound`, `category`, `data`, per-recipient overrides in `recipients`); 202 with the
    /// notification. Checked whole before anything is queued; `If-None-Match` names it (a
    /// repeat within the pushes' lifetime queues nothing). The pushes are queued in one commit
    /// and delivered like a message's (retried, expiring after `push.expirationSeconds`).
    func sendNotification(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let id = try r.requestID() ?? UUID()
        let body = try ServerAPIJSON.object(r.http.body)
        let recipients = try Self.recipients(body)
        guard !recipients.contains(where: \.isSystemSender) else {
            throw ServerAPIError.invalidProperty("recipients", "recipients are users, not a system sender")
        }
        guard let raw = body["notification"] else { throw ServerAPIError.missingProperty("notification") }
        guard let object = raw.object else {
            throw ServerAPIError.invalidProperty("notification", "notification must be an object")
        }
        let push = try Self.pushConfiguration(object, property: "notification")
        do { try push.validate() } catch { throw ServerAPIError.invalidProperty("notification", error.reason) }
        guard push.alert != nil || push.title != nil else {
            throw ServerAPIError.invalidProperty(
                "notification.text", "a notification shows something: notification.text or notification.title")
        }
        let overrides = try Self.pushOverrides(body)
        let pushes = engine.pushes
        let users = Set(recipients)
        let keep = engine.pushes.lifetimeMilliseconds
        try await engine.store.write { tx in
            let now = Timestamp.now()
            // Named once: a repeat within the pushes' lifetime queues nothing (delivered pushes
            // leave the queue, so the queue alone would not know).
            guard
                try tx.recordNotificationID(
                    id, at: now, forgettingBefore: Timestamp(millisecondsSince1970: now.millisecondsSince1970 - keep))
            else {
                return
            }
            try pushes.record(notification: id, push, to: users, overrides: overrides, in: tx, at: now)
        }
        let representation = r.representation
        let uuid = id.uuidString.lowercased()
        return ServerAPIJSON.response(
            202,
            NotificationObject(
                id: "layer:///notifications/\(uuid)", url: "\(representation.base)/notifications/\(uuid)",
                recipients: recipients.map {
                    representation.version.usesIdentities ? ServerAPIRepresentation.identityID($0) : $0.rawValue
                },
                notification: .init(
                    text: push.alert, title: push.title, sound: push.sound, category: push.category,
                    data: push.data.isEmpty ? nil : push.data)))
    }
}

/// The answer of `POST /notifications`.
struct NotificationObject: Encodable, Sendable {
    struct Content: Encodable, Sendable {
        var text: String?
        var title: String?
        var sound: String?
        var category: String?
        var data: [String: String]?
    }

    var id: String
    var url: String
    var recipients: [String]
    var notification: Content
}
