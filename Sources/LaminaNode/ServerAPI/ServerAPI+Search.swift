import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport

/// `GET /users/:user_id/messages?search=…` (a Lamina extension): a full-text search of the
/// messages a user sees, best match first (SPEC §6.3 SEARCH_MESSAGES, the same words and limits).
extension ServerAPI {
    /// 200 with the messages as the user sees them (with `is_unread`); `search` is required
    /// (1 to 16 words, at most 256 bytes), `conversation_id` narrows it to one conversation,
    /// `page_size` is 1 to 200 (default 50) and `offset` skips results (offset + page_size ≤
    /// 1,000). 400 for bad parameters, 403 for a conversation the user never took part in.
    func searchUserMessages(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let user = try r.userID()
        guard let text = r.query["search"] else { throw ServerAPIError.missingProperty("search") }
        let (conversation, limit, offset) = try Self.searchPage(r.query)
        let messages = try await engine.searchMessages(
            text, in: conversation, limit: limit, offset: offset, for: user)
        let shown = try await representation(r, users: Set(messages.map(\.sender)))
        return ServerAPIJSON.response(200, messages.map { shown.message($0, for: user) })
    }

    /// A search's `conversation_id` (a UUID or a `layer:///conversations/…` URL), `page_size`
    /// and `offset` query parameters.
    static func searchPage(_ query: [String: String]) throws(ServerAPIError) -> (ConversationID?, Int, Int) {
        var conversation: ConversationID?
        if let raw = query["conversation_id"] {
            let tail = raw.split(separator: "/").last.map(String.init) ?? raw
            guard let uuid = UUID(uuidString: tail) else {
                throw .invalidProperty("conversation_id", "conversation_id must be a conversation's id")
            }
            conversation = ConversationID(uuid: uuid)
        }
        var limit = 50
        if let raw = query["page_size"] {
            guard let n = Int(raw), (1...MessageSearchTerms.maxLimit).contains(n) else {
                throw .invalidProperty("page_size", "page_size must be 1...\(MessageSearchTerms.maxLimit)")
            }
            limit = n
        }
        var offset = 0
        if let raw = query["offset"] {
            guard let n = Int(raw), n >= 0, n + limit <= MessageSearchTerms.maxDepth else {
                throw .invalidProperty(
                    "offset", "offset must be 0 or more, and offset + page_size at most \(MessageSearchTerms.maxDepth)")
            }
            offset = n
        }
        return (conversation, limit, offset)
    }
}
