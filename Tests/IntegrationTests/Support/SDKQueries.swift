import LaminaClient
import LaminaModel

/// SDK queries for test files that also import LaminaNode (whose `StoredConversation` has
/// the same name as the SDK's).
enum SDKQueries {
    /// Every conversation in the client's store.
    static func conversations(_ client: LaminaClient) throws -> [StoredConversation] {
        try client.execute(Query<StoredConversation>())
    }
}
