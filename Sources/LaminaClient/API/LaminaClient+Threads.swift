import LaminaModel
import LaminaWire

extension LaminaClient {
    /// Checks a reply's root before it is queued: a message of `conversation` held here that
    /// is no reply itself (threads are one level deep; the node checks again: SPEC §6.2).
    func checkReplyTarget(_ root: MessageID, in conversation: ConversationID) throws(ClientError) {
        guard let stored = try store.message(root), stored.message.conversationID == conversation else {
            throw ClientError(.notFound, "message \(root) is not a message of conversation \(conversation) held here")
        }
        guard stored.message.replyTo == nil else {
            throw ClientError(.invalidArgument, "message \(root) is a reply itself: threads are one level deep")
        }
    }

    /// Fetches replies of the thread `root` (a message held here) from the node into the local
    /// store: the first `count` after `after` (from the first reply when nil; pass the newest
    /// position held to page on). Returns their identifiers in ascending position order; fewer
    /// than `count` means the thread's end. Needs a live connection to a node with replies.
    public func fetchThread(of root: MessageID, after: MessagePosition? = nil, count: UInt32 = 500)
        async throws(ClientError) -> [MessageID]
    {
        guard let stored = try store.message(root) else {
            throw ClientError(.notFound, "message \(root) is not in the local store")
        }
        guard (1...FetchHistory.maxPageCount).contains(count) else {
            throw ClientError(
                .invalidArgument, "a thread page is 1...\(FetchHistory.maxPageCount) replies, not \(count)")
        }
        guard let engine = currentEngine else { throw ClientError(.notConnected, "the client is not connected") }
        return try await engine.fetchHistory(
            of: stored.message.conversationID, policy: .thread(root: root, after: after, count: count), before: nil)
    }
}

extension StoredMessage {
    /// The thread root this message replies to; nil for a message that is no reply.
    public var replyTo: MessageID? { message.replyTo }
    /// How many replies this message's thread has (0 for a message that is no root).
    public var threadReplyCount: Int { Int(clamping: message.thread?.replyCount ?? 0) }
    /// The latest reply of this message's thread; nil without replies.
    public var lastThreadReply: MessageID? { message.thread?.lastReply }
}

extension Query where Object == StoredMessage {
    /// The replies of thread `root` held on this device, oldest first (`replyTo == root`): a
    /// query a ``QueryController`` can observe as replies arrive.
    public static func thread(of root: MessageID) -> Query<StoredMessage> {
        Query(
            predicate: .property(MessageProperty.replyTo, .equalTo, .message(root)),
            sortDescriptors: [QuerySortDescriptor(MessageProperty.position)])
    }
}
