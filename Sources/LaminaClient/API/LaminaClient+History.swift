import LaminaModel
import LaminaWire

extension LaminaClient {
    /// Fetches older messages of a conversation from the node into the local store (the
    /// docs' history sync: all messages, from the first unread, or the last `n`). With
    /// `before` (a message's position), only messages older than it: pass the oldest
    /// position held to page backwards. Returns the fetched messages' identifiers in
    /// ascending position order (empty when there are no more). The conversation must be in
    /// the local store (`.notFound`); needs a live connection (`.notConnected`).
    public func fetchHistory(
        of conversation: ConversationID, policy: HistoryPolicy = .complete,
        before: MessagePosition? = nil
    ) async throws(ClientError) -> [MessageID] {
        guard try store.conversation(conversation) != nil else {
            throw ClientError(.notFound, "conversation \(conversation) is not in the local store")
        }
        guard let engine = currentEngine else { throw ClientError(.notConnected, "the client is not connected") }
        return try await engine.fetchHistory(of: conversation, policy: policy, before: before)
    }
}
