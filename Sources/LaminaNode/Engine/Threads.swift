import LaminaModel
import LaminaStore
import LaminaWire

/// The node's rules for replies and threads (SPEC §6.2, replies feature §5.1 bit 15).
enum Threads {
    /// A reply's root must be a message of the same conversation, not deleted for everyone
    /// (`reply-target-not-found`), and not itself a reply: threads are one level deep, as in
    /// Slack and Matrix (`nested-reply`).
    static func checkReplyTarget(_ root: MessageID, in conversation: ConversationID, _ read: StorageReader) throws {
        guard let stored = try read.message(root), stored.message.conversationID == conversation, !stored.isDeleted
        else {
            throw WireError(.replyTargetNotFound, "message \(root) is not a message of conversation \(conversation)")
        }
        guard stored.message.replyTo == nil else {
            throw WireError(.nestedReply, "message \(root) is a reply itself: threads are one level deep")
        }
    }

    /// `messages` as a session with `features` is sent them: with their roots' thread summaries
    /// when it takes replies (without, `FeedCoding` leaves reply fields out anyway).
    static func summarized(_ messages: [Message], for features: FeatureSet, _ read: StorageReader) throws -> [Message] {
        guard features.contains(.replies) else { return messages }
        return try read.withThreadSummaries(messages)
    }
}

extension FeedSnapshot {
    /// The latest messages as a session with `features` is sent them: with their roots' thread
    /// summaries when it takes replies, as history sends them (SPEC §6.2, §6.3).
    mutating func summarizeThreads(for features: FeatureSet, _ read: StorageReader) throws {
        let held = conversations.indices.compactMap { i in conversations[i].lastMessage.map { (i, $0) } }
        let summarized = try Threads.summarized(held.map(\.1), for: features, read)
        for ((index, _), message) in zip(held, summarized) { conversations[index].lastMessage = message }
    }
}

extension NodeEngine {
    /// FETCH_HISTORY policy 4 (SPEC §6.3): the first `count` replies to `root` after `after`
    /// as the user may see them, as `thread-message` changes with seq 0 in ascending position
    /// order, then ACK. Read in pages of ``historyPageSize`` from the thread's index, each under
    /// a lease of the answer budget, sent as the client reads.
    func fetchThread(
        _ root: MessageID, after: MessagePosition?, count: UInt32, _ request: FetchHistory, in session: NodeSession,
        as auth: NodeSession.Auth
    ) async throws {
        let user = auth.user
        let named = request.conversationID
        let features = session.state.withLockedValue { $0.features }
        guard var lease = await session.answerLease(Self.historyPageBytes) else { return }
        defer { lease.release() }
        var start = after
        var left = Int(count)
        var id: ConversationID?
        while left > 0 {
            let limit = Swift.min(left, Self.historyPageSize)
            let from = start
            let (page, conversation) = try await store.read { r -> ([Message], ConversationID) in
                var found = try r.conversation(named)
                if found?.isLive != true, let target = try r.resolvedConversation(named) {
                    found = try r.conversation(target)
                }
                guard let conversation = found, conversation.isLive else {
                    throw WireError(.notFound, "no conversation \(named)")
                }
                let id = conversation.conversation.id
                guard try r.participantState(of: user, in: id) != nil else {
                    throw WireError(.notAParticipant, "\(user) is not a participant of \(id)")
                }
                if from == nil { try Threads.checkReplyTarget(root, in: id, r) }
                return (try r.threadHistory(root: root, in: id, for: user, after: from, limit: limit), id)
            }
            id = conversation
            var messages = page
            var ended = messages.count < limit
            if let before = request.before,
                let cut = messages.firstIndex(where: { ($0.position.map { $0 >= before }) ?? true })
            {
                messages.removeSubrange(cut...)
                ended = true
            }
            lease.resize(to: Self.estimatedBytes(messages))
            let last = messages.last?.position
            guard
                await session.sendPaced(
                    FeedCoding.frames(messages.map { Change(seq: 0, event: .messageCreated($0)) }, for: features))
            else { return }
            left -= messages.count
            guard !ended, let last else { break }
            start = last
            await session.settle(lease)
            guard let next = await session.answerLease(Self.historyPageBytes) else { return }
            lease = next
        }
        await session.settle(lease)
        session.send(.ack(Ack(requestID: request.requestID, conversationID: id ?? named)))
    }
}
