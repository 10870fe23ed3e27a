import Foundation
import LaminaModel
import LaminaWire

/// One FETCH_HISTORY waiting for its answer (SPEC §6.3): the messages that arrived for it,
/// and the caller once it waits.
struct HistoryRequest {
    var conversation: ConversationID
    var received: [MessageID] = []
    var result: Result<Void, ClientError>?
    var caller: CheckedContinuation<Result<[MessageID], ClientError>, Never>?
    /// Sent by the session itself (history on join): nobody waits for the answer.
    var isBackground = false
}

extension SyncSession {
    /// The most history requests one session has outstanding at once.
    public static let maxHistoryRequests = 16

    /// Asks the node for messages of a conversation (SPEC §6.3 FETCH_HISTORY): all of them,
    /// from the first unread, or the last `n`; with `before`, only older than that position
    /// (paging backwards). The messages are stored as they arrive, before this returns
    /// their identifiers in ascending position order. Only while live and when the node
    /// offers history fetch.
    public func fetchHistory(of conversation: ConversationID, policy: HistoryPolicy, before: MessagePosition?) async throws(ClientError) -> [MessageID] {
        if case .lastN(let n) = policy, n == 0 {
            throw ClientError(.invalidArgument, "a last-n history request asks for at least one message")
        }
        guard state == .live else { throw ClientError(.notConnected, "the session is not live") }
        guard features.contains(.historyFetch) else {
            throw ClientError(.notAllowed, "the node does not offer history fetch")
        }
        guard historyRequests.count < Self.maxHistoryRequests else {
            throw ClientError(.invalidArgument, "at most \(Self.maxHistoryRequests) history requests are outstanding at once")
        }
        let target = try store.currentIdentifier(of: conversation)
        let id = UUID()
        historyRequests[id] = HistoryRequest(conversation: target)
        do {
            try await channel.send(.fetchHistory(FetchHistory(requestID: id, conversationID: target, policy: policy, before: before)))
        } catch {
            historyRequests[id] = nil
            throw error
        }
        let outcome = await withCheckedContinuation { (caller: CheckedContinuation<Result<[MessageID], ClientError>, Never>) in
            if let request = historyRequests[id], let result = request.result {
                historyRequests[id] = nil
                caller.resume(returning: result.map { request.received })
            } else {
                historyRequests[id]?.caller = caller
            }
        }
        return try outcome.get()
    }

    /// The conversations among `decoded` that this device does not hold yet, when history
    /// on join is on (their earlier messages are fetched once they are stored).
    func newConversations(in decoded: DecodedChanges) throws -> [ConversationID] {
        guard historyOnJoin != nil, features.contains(.historyFetch) else { return [] }
        var out: [ConversationID] = []
        for case .conversation(let c) in decoded.changes where !out.contains(c.id) {
            if try store.conversation(c.id) == nil { out.append(c.id) }
        }
        return out
    }

    /// Sends FETCH_HISTORY for a conversation that just appeared (history on join); the
    /// answer is stored like any other change. Skipped when too many requests are out.
    func requestHistory(of conversation: ConversationID) async throws {
        guard let policy = historyOnJoin, historyRequests.count < Self.maxHistoryRequests else { return }
        let id = UUID()
        historyRequests[id] = HistoryRequest(conversation: conversation, isBackground: true)
        try await channel.send(.fetchHistory(FetchHistory(requestID: id, conversationID: conversation, policy: policy)))
    }

    /// Records the history answers among `entries` (seq 0 message-created changes) for the
    /// requests of their conversation.
    func noteHistory(_ entries: [Change]) {
        guard !historyRequests.isEmpty else { return }
        for entry in entries where entry.seq == 0 {
            guard case .messageCreated(let m) = entry.event else { continue }
            for (id, request) in historyRequests where request.result == nil && request.conversation == m.conversationID {
                historyRequests[id]?.received.append(m.id)
            }
        }
    }

    /// The node answered request `id` (ACK or ERROR).
    func finishHistory(_ id: UUID, _ result: Result<Void, ClientError>) throws {
        guard var request = historyRequests[id], request.result == nil else { return }
        if request.isBackground {
            historyRequests[id] = nil
            try finishSnapshotFetch(id, result, received: request.received)
        } else if let caller = request.caller {
            historyRequests[id] = nil
            caller.resume(returning: result.map { request.received })
        } else {
            request.result = result
            historyRequests[id] = request
        }
    }

    /// The stream ended: every outstanding request fails with `error`.
    func failHistoryRequests(_ error: ClientError) {
        for id in Array(historyRequests.keys) { try? finishHistory(id, .failure(error)) }
    }
}
