import LaminaModel
import LaminaWire

extension LaminaClient {
    /// Searches the user's messages on the node (SPEC §6.3 SEARCH_MESSAGES), where history this
    /// device never fetched is found too: the same words and limits as ``LocalStore/searchMessages(_:)``,
    /// best match first, exactly the messages the node's history would show the user. Results
    /// the device did not have are stored; those of conversations it does not hold are left
    /// out. Needs a live connection (`.notConnected`) to a node offering search (`.notAllowed`).
    public func searchMessagesOnNode(_ search: MessageSearch) async throws(ClientError) -> [StoredMessage] {
        _ = try search.matchExpression()
        guard let engine = currentEngine else { throw ClientError(.notConnected, "the client is not connected") }
        let ids = try await engine.searchMessages(
            search.text, in: search.conversation, limit: search.limit, offset: search.offset)
        var found: [StoredMessage] = []
        for id in ids {
            if let message = try store.message(id) { found.append(message) }
        }
        return found
    }
}
