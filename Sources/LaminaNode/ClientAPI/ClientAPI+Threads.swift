import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire

// Replies, threads and edits in the Client API (Lamina extensions, Protocol/CLIENT-API.md):
// messages show `reply_to`, `thread` and `edited_at`; `POST …/messages` takes `reply_to`;
// `PATCH /messages/:id {"parts"}` is an edit by the sender.
extension ClientAPI {
    /// The representation for `messages`, with their edit times (one read).
    func threaded(_ r: ClientAPIRequest, _ messages: [Message]) async throws -> ClientAPIRepresentation {
        var shown = try await representation(r, users: Set(messages.map(\.sender)))
        let ids = messages.map(\.id)
        shown.editTimes = try await engine.store.read { reader in try reader.editTimes(of: ids) }
        return shown
    }

    /// PATCH /messages/:id `{"parts": [...]}`: the sender's edit (SPEC §6.2 UPDATE_MESSAGE_PARTS:
    /// the whole new list, a part that stays keeps its `id`; inline parts only): 200 with the
    /// message as it is now. 403 for another participant, 410 once deleted.
    func editMessage(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let message = try await visibleMessage(try r.messageID(), for: user)
        guard message.sender == user else {
            throw ServerAPIError.accessDenied("only the sender of a message may edit it")
        }
        let (parts, _) = try ServerAPI.content(try r.object(), of: message.id)
        let frame = Frame.updateMessageParts(
            UpdateMessageParts(
                requestID: UUID(), conversationID: message.conversationID, messageID: message.id, parts: parts))
        _ = try await engine.runServerAPICommand(frame, as: user)
        let edited = try await visibleMessage(message.id, for: user)
        let summarized = try await engine.store.read { reader in try reader.withThreadSummaries([edited]) }
        return ServerAPIJSON.response(200, try await threaded(r, summarized).message(summarized[0]))
    }
}
