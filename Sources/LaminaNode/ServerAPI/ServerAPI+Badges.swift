import Foundation
import LaminaMerge
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire

/// Badges (`/users/:user_id/badge`), as Layer had them: the unread count the app backend keeps
/// outside the node (`external_unread_count`, set with PUT) beside the node's own unread
/// messages and conversations of the user.
extension ServerAPI {
    /// GET: `{"external_unread_count", "unread_conversation_count", "unread_message_count"}`
    /// over the user's live conversations.
    func getBadge(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let user = try r.userID()
        let now = UInt64(clamping: Timestamp.now().millisecondsSince1970)
        let (external, counts) = try await engine.store.read { reader -> (Int, [Int]) in
            // A conversation whose notification level is `none` now does not count (SPEC §6.10).
            let levels = try reader.notificationSettings(of: user)
            let counts = try reader.conversations(of: user).filter(\.isLive).filter {
                levels[$0.conversation.id]?.level(now: now) != NotificationLevel.none
            }.map { c throws(StorageError) in
                try reader.unreadCount(of: c.conversation.id, for: user)
            }
            return (try reader.externalUnreadCount(of: user), counts)
        }
        return ServerAPIJSON.response(
            200,
            [
                "external_unread_count": external,
                "unread_conversation_count": counts.filter { $0 > 0 }.count,
                "unread_message_count": counts.reduce(0, +),
            ])
    }

    /// PUT `{"external_unread_count": n}` (0…``ServerAPILimits/maxExternalUnreadCount``): 204.
    func putBadge(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let user = try r.userID()
        let body = try ServerAPIJSON.object(r.http.body)
        guard let raw = body["external_unread_count"] else {
            throw ServerAPIError.missingProperty("external_unread_count")
        }
        // true and false are not numbers; 5.0 counts as 5, 5.5 is refused.
        guard let number = raw.exactInteger, let count = Int(exactly: number),
            (0...ServerAPILimits.maxExternalUnreadCount).contains(count)
        else {
            throw ServerAPIError.invalidProperty(
                "external_unread_count",
                "external_unread_count must be an integer 0...\(ServerAPILimits.maxExternalUnreadCount)")
        }
        try await engine.setExternalUnreadCount(count, of: user)
        return HTTPResponse(status: 204)
    }
}
