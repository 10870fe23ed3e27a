import Foundation
import LaminaModel
import LaminaTransport

extension ClientAPI {
    /// GET /messages?search=…: a full-text search of the messages the session's user sees, best
    /// match first (a Lamina extension; the Server API's `GET /users/:id/messages?search=` as the
    /// user: the same parameters `conversation_id`, `page_size` 1 to 200 and `offset`, and limits).
    func searchMessages(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        guard let text = r.query["search"] else { throw ServerAPIError.missingProperty("search") }
        let (conversation, limit, offset) = try ServerAPI.searchPage(r.query)
        let messages = try await engine.searchMessages(
            text, in: conversation, limit: limit, offset: offset, for: user)
        let shown = try await representation(r, users: Set(messages.map(\.sender)))
        return ServerAPIJSON.response(200, messages.map { shown.message($0) })
    }
}
