import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport

/// `GET /users/:user_id/messages/:message_id`: one message as a user sees it (Layer's
/// "retrieve a message from a user's perspective"), with `is_unread` for that user.
extension ServerAPI {
    /// 200 with the message; 404 when the user cannot see it (never took part, removed before
    /// it was sent, or it comes from a user they block), 410 when it was deleted.
    func getUserMessage(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let user = try r.userID()
        let id = try r.messageID()
        let notFound = ServerAPIError.notFound(
            "\(user.rawValue) has no message \(ServerAPIRepresentation.messageID(id))")
        let found = try await engine.store.read { reader -> MessageRecord? in
            guard let stored = try reader.message(id), let position = stored.message.position,
                let state = try reader.participantState(of: user, in: stored.message.conversationID),
                state.isMember || position < state.since
            else { return nil }
            guard !(try reader.blocks(of: user)).contains(stored.message.sender) else { return nil }
            return stored
        }
        guard let stored = found else { throw notFound }
        guard !stored.isDeleted else {
            throw ServerAPIError.objectDeleted("message \(ServerAPIRepresentation.messageID(id)) was deleted")
        }
        let summarized = try await engine.store.read { reader in try reader.withThreadSummaries([stored.message]) }
        let shown = try await threaded(r, summarized)
        let reactions = try await reactionSummaries(of: [id], seenBy: user)
        return ServerAPIJSON.response(200, shown.message(summarized[0], for: user, reactions: reactions[id] ?? [:]))
    }
}
