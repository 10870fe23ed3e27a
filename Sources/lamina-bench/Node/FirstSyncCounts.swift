import LaminaClient
import LaminaModel

/// What a device holds and counts after its first sync (its own file: `LaminaNode`'s types of
/// the same names are not in scope here).
struct FirstSyncCounts {
    var conversations = 0
    var held = 0
    var total = 0
    var unread = 0

    static func of(_ client: LaminaClient) throws -> FirstSyncCounts {
        var out = FirstSyncCounts()
        for c in try client.execute(Query<StoredConversation>()) {
            out.conversations += 1
            out.held += c.totalMessageCount
            out.total += c.totalNumberOfMessages
        }
        out.unread = try client.totalNumberOfUnreadMessages()
        return out
    }
}
