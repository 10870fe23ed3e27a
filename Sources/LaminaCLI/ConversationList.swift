import LaminaClient
import LaminaModel

/// The local user's conversations as the CLI lists them: most recent activity first (the
/// last message's time, else the creation time), each with its last message.
public enum ConversationList {
    /// The most conversations one list shows.
    public static let maxListed = 200

    public struct Entry: Hashable, Sendable {
        public var conversation: StoredConversation
        public var lastMessage: Message?

        public init(conversation: StoredConversation, lastMessage: Message?) {
            self.conversation = conversation
            self.lastMessage = lastMessage
        }
    }

    /// Up to `limit` (1...`maxListed`) conversations from the local store.
    public static func load(_ client: LaminaClient, limit: Int = maxListed) throws(CLIError) -> [Entry] {
        guard (1...maxListed).contains(limit) else {
            throw CLIError(.invalidArgument, "a list shows 1...\(maxListed) conversations, not \(limit)")
        }
        do {
            // Newest first by creation in SQL; the final order (by last activity) below.
            let all = try client.execute(
                Query<StoredConversation>(
                    sortDescriptors: [QuerySortDescriptor("createdAt", ascending: false)],
                    limit: QueryLimits.maxListCount))
            var entries: [Entry] = []
            for conversation in all {
                let last = try conversation.lastMessageID.flatMap { id throws(ClientError) in
                    try client.message(id)?.message
                }
                entries.append(Entry(conversation: conversation, lastMessage: last))
            }
            entries.sort { activity($0) > activity($1) }
            return Array(entries.prefix(limit))
        } catch {
            throw CLIError(error)
        }
    }

    static func activity(_ entry: Entry) -> Timestamp {
        max(
            entry.lastMessage?.sentAt ?? entry.conversation.conversation.createdAt,
            entry.conversation.conversation.createdAt)
    }
}
