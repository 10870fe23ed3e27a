import Foundation
import LaminaModel
import LaminaStore
import LaminaWire

// Replies, threads and edits in the Server API (Lamina extensions, Protocol/SERVER-API.yaml):
// a message shows `reply_to`, a root its `thread`, an edited message `edited_at`; a message is
// sent as a reply with `reply_to` in its body.
extension ServerAPI {
    /// The representation for `messages`, with their edit times (one read).
    func threaded(_ r: ServerAPIRequest, _ messages: [Message]) async throws -> ServerAPIRepresentation {
        var shown = try await representation(r, users: Set(messages.map(\.sender)))
        let ids = messages.map(\.id)
        shown.editTimes = try await engine.store.read { reader in try reader.editTimes(of: ids) }
        return shown
    }

    /// A body's `reply_to` (`layer:///messages/<uuid>` or the bare UUID), nil when absent.
    static func replyTo(_ body: [String: JSONValue]) throws(ServerAPIError) -> MessageID? {
        guard let raw = body["reply_to"], !raw.isNull else { return nil }
        guard let text = raw.string, let id = ClientAPIRepresentation.message(text) else {
            throw .invalidProperty("reply_to", "reply_to must be layer:///messages/<uuid>")
        }
        return id
    }
}
