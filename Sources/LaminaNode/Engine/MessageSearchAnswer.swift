import Foundation
import LaminaModel
import LaminaStore
import LaminaWire

extension NodeEngine {
    /// The messages of `user` matching `text` (SPEC §6.3, SEARCH_MESSAGES; the Server API's and
    /// Client API's `search`), best first, as the user sees history (`StorageReader.searchMessages`).
    /// Throws `invalid-argument` for a text without words or over the limits, or a page outside
    /// them; `not-a-participant` for a conversation the user never took part in.
    func searchMessages(
        _ text: String, in conversation: ConversationID?, limit: Int, offset: Int, for user: UserID
    ) async throws -> [Message] {
        let terms: MessageSearchTerms
        do {
            terms = try MessageSearchTerms(text)
            try MessageSearchTerms.validatePage(limit: limit, offset: offset)
        } catch {
            throw WireError(.invalidArgument, error.reason)
        }
        let search = NodeMessageSearch(terms, in: conversation, limit: limit, offset: offset)
        return try await store.searchRead { r in
            if let conversation, try r.participantState(of: user, in: conversation) == nil {
                throw WireError(.notAParticipant, "\(user) never took part in \(conversation)")
            }
            return try r.searchMessages(search, for: user)
        }
    }

    /// SEARCH_MESSAGES: the results as `message-created` changes with seq 0, best first, then
    /// ACK (with the conversation when the search named one). At most 200 messages, read in one
    /// store read and sent paced under one lease of the node's answer budget.
    func searchMessages(_ request: SearchMessages, in session: NodeSession, as auth: NodeSession.Auth) async throws {
        guard let lease = await session.answerLease(Self.historyPageBytes) else { return }
        defer { lease.release() }
        let messages = try await searchMessages(
            request.text, in: request.conversationID, limit: Int(request.limit), offset: Int(request.offset),
            for: auth.user)
        lease.resize(to: Self.estimatedBytes(messages))
        let features = session.state.withLockedValue { $0.features }
        let queued = await session.sendPaced(
            FeedCoding.frames(messages.map { Change(seq: 0, event: .messageCreated($0)) }, for: features))
        guard queued else { return }
        await session.settle(lease)
        session.send(.ack(Ack(requestID: request.requestID, conversationID: request.conversationID)))
    }
}
