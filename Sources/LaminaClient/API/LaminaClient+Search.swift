import LaminaModel

extension LaminaClient {
    /// Searches the messages on this device by their text (see ``MessageSearch``): e.g.
    /// `try client.searchMessages(MessageSearch("lunch fri"))`. Runs on the local store only,
    /// online or not; what the device holds is what the user may see.
    public func searchMessages(_ search: MessageSearch) throws(ClientError) -> [StoredMessage] {
        try store.searchMessages(search)
    }
}
