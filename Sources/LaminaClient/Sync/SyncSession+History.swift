import Foundation
import LaminaModel
import LaminaWire

/// One FETCH_HISTORY waiting for its answer (SPEC §6.3): the messages that arrived for it,
/// and the caller once it waits.
struct HistoryRequest {
    var conversation: ConversationID
    var received: [MessageID] = []
    /// `received` as a set: a message counted once however often it arrives.
    var receivedSet: Set<MessageID> = []
    /// The newest position among `received` (where the next page starts).
    var newest: MessagePosition?
    var result: Result<Void, ClientError>?
    var caller: CheckedContinuation<Result<HistoryAnswer, ClientError>, Never>?
    /// Sent by the session itself (history on join, a snapshot's fill): nobody waits for the answer.
    var isBackground = false
    /// A SEARCH_MESSAGES (`conversation` unused): its answer holds messages of any conversation,
    /// best match first.
    var isSearch = false
    /// For a page-after request: its count and start. A background request whose answer is a
    /// full page is followed by the next page.
    var pageCount: UInt32?
    var pageStart: MessagePosition?
}

/// What one FETCH_HISTORY returned.
struct HistoryAnswer {
    var ids: [MessageID]
    var newest: MessagePosition?
}

extension SyncSession {
    /// The most history requests one session has outstanding at once.
    public static let maxHistoryRequests = 16
    /// Messages per page when complete history is fetched forwards, unless configured.
    public static let defaultHistoryPageSize = 5_000

    static func validateHistoryPageSize(_ size: Int) throws(ClientError) {
        guard (1...Int(FetchHistory.maxPageCount)).contains(size) else {
            throw ClientError(
                .invalidSetting, "a history page is 1...\(FetchHistory.maxPageCount) messages, not \(size)")
        }
    }

    /// Asks the node for messages of a conversation (SPEC §6.3 FETCH_HISTORY): all of them,
    /// from the first unread, or the last `n`; with `before`, only older than that position
    /// (paging backwards: the newest of those, so pass the oldest position held to get the
    /// page before it). `.complete` without `before` is every message of the conversation,
    /// fetched forwards a page at a time when the node offers history paging. The messages
    /// are stored as they arrive, before this returns their identifiers in ascending
    /// position order. Only while live and when the node offers history fetch.
    public func fetchHistory(of conversation: ConversationID, policy: HistoryPolicy, before: MessagePosition?)
        async throws(ClientError) -> [MessageID]
    {
        if case .lastN(let n) = policy, n == 0 {
            throw ClientError(.invalidArgument, "a last-n history request asks for at least one message")
        }
        guard state == .live else { throw ClientError(.notConnected, "the session is not live") }
        guard features.contains(.historyFetch) else {
            throw ClientError(.notAllowed, "the node does not offer history fetch")
        }
        let target = try await store.currentIdentifierAsync(of: conversation)
        guard case .complete = policy, before == nil, features.contains(.historyPaging) else {
            return try await fetchOne(target, policy: policy, before: before).ids
        }
        var ids: [MessageID] = []
        var after: MessagePosition? = nil
        while true {
            let page = try await fetchOne(target, policy: .pageAfter(after, count: historyPageSize), before: nil)
            ids += page.ids
            guard page.ids.count >= Int(historyPageSize), let newest = page.newest else { return ids }
            after = newest
        }
    }

    /// One FETCH_HISTORY, waited for.
    private func fetchOne(_ target: ConversationID, policy: HistoryPolicy, before: MessagePosition?)
        async throws(ClientError) -> HistoryAnswer
    {
        guard state == .live else { throw ClientError(.notConnected, "the session is not live") }
        guard pending.historyCount < Self.maxHistoryRequests else {
            throw ClientError(
                .invalidArgument, "at most \(Self.maxHistoryRequests) history requests are outstanding at once")
        }
        if case .pageAfter = policy, !features.contains(.historyPaging) {
            throw ClientError(.notAllowed, "the node does not offer history paging")
        }
        if case .thread = policy, !features.contains(.replies) {
            throw ClientError(.notAllowed, "the node does not offer replies")
        }
        let id = UUID()
        return try await sendAndWait(
            id, HistoryRequest(conversation: target),
            .fetchHistory(FetchHistory(requestID: id, conversationID: target, policy: policy, before: before)))
    }

    /// Asks the node for the user's messages matching a search (SPEC §6.3 SEARCH_MESSAGES, the
    /// search feature): best match first, as the user sees history. The messages are stored as
    /// they arrive (those of conversations this device does not hold are not), before this
    /// returns their identifiers in the node's order. Only while live and when the node offers
    /// search (`.notAllowed`).
    public func searchMessages(
        _ text: String, in conversation: ConversationID?, limit: Int, offset: Int
    ) async throws(ClientError) -> [MessageID] {
        guard state == .live else { throw ClientError(.notConnected, "the session is not live") }
        guard features.contains(.messageSearch) else {
            throw ClientError(.notAllowed, "the node does not offer message search")
        }
        do {
            _ = try MessageSearchTerms(text)
            try MessageSearchTerms.validatePage(limit: limit, offset: offset)
        } catch {
            throw ClientError(.invalidArgument, error.reason)
        }
        guard pending.historyCount < Self.maxHistoryRequests else {
            throw ClientError(
                .invalidArgument, "at most \(Self.maxHistoryRequests) history requests are outstanding at once")
        }
        var target = conversation
        if let conversation { target = try await store.currentIdentifierAsync(of: conversation) }
        let id = UUID()
        let frame = SearchMessages(
            requestID: id, text: text, conversationID: target, limit: UInt32(limit), offset: UInt32(offset))
        return try await sendAndWait(
            id, HistoryRequest(conversation: target ?? ConversationID(uuid: id), isSearch: true), .searchMessages(frame)
        ).ids
    }

    /// Registers a request, sends it (in registration order) and waits for its answer.
    private func sendAndWait(_ id: UUID, _ request: HistoryRequest, _ frame: Frame) async throws(ClientError)
        -> HistoryAnswer
    {
        register(id, request, frame)
        do {
            try await sendRegisteredHistory()
        } catch {
            unregister(id)
            throw ClientError.wrap(error)
        }
        let outcome = await withCheckedContinuation {
            (caller: CheckedContinuation<Result<HistoryAnswer, ClientError>, Never>) in
            if let request = pending[history: id], let result = request.result {
                unregister(id)
                caller.resume(returning: result.map { HistoryAnswer(ids: request.received, newest: request.newest) })
            } else {
                pending[history: id]?.caller = caller
            }
        }
        return try outcome.get()
    }

    /// Registers a request and queues its frame: frames go out in the order registered (an
    /// answer's messages are counted as the first open request's, so the wire order must be
    /// `pending.historyOrder`'s even when the app's `fetchHistory` and the session's own fetches race).
    func register(_ id: UUID, _ request: HistoryRequest, _ frame: FetchHistory) {
        register(id, request, .fetchHistory(frame))
    }

    func register(_ id: UUID, _ request: HistoryRequest, _ frame: Frame) {
        pending[history: id] = request
        historyUnsent.append(frame)
    }

    func unregister(_ id: UUID) {
        pending[history: id] = nil
        historyUnsent.removeAll { $0.commandID == id }
    }

    /// Writes the queued FETCH_HISTORY frames in order. When another call is writing, it
    /// writes these too (in order) and this returns at once.
    func sendRegisteredHistory() async throws {
        guard !sendingHistory else { return }
        sendingHistory = true
        defer { sendingHistory = false }
        while !historyUnsent.isEmpty {
            let frame = historyUnsent.removeFirst()
            try await channel.send(frame)
        }
    }

    /// The conversations among `decoded` that this device does not hold yet, when history
    /// on join is on (their earlier messages are fetched once they are stored).
    func newConversations(in decoded: DecodedChanges) async throws -> [ConversationID] {
        guard historyOnJoin != nil, features.contains(.historyFetch) else { return [] }
        var out: [ConversationID] = []
        for case .conversation(let c) in decoded.changes where !out.contains(c.id) {
            if try await store.conversationAsync(c.id) == nil { out.append(c.id) }
        }
        return out
    }

    /// Sends FETCH_HISTORY for a conversation that just appeared (history on join); the
    /// answer is stored like any other change. Skipped when too many requests are out.
    /// Complete history goes forwards a page at a time when the node offers paging.
    func requestHistory(of conversation: ConversationID) async throws {
        guard var policy = historyOnJoin, pending.historyCount < Self.maxHistoryRequests else { return }
        if case .complete = policy, features.contains(.historyPaging) {
            policy = .pageAfter(nil, count: historyPageSize)
        }
        try await sendBackgroundFetch(conversation, policy)
    }

    /// Sends a FETCH_HISTORY nobody waits for; returns its id.
    @discardableResult
    func sendBackgroundFetch(_ conversation: ConversationID, _ policy: HistoryPolicy, id: UUID = UUID()) async throws
        -> UUID
    {
        var request = HistoryRequest(conversation: conversation, isBackground: true)
        if case .pageAfter(let start, let count) = policy {
            request.pageCount = count
            request.pageStart = start
        }
        register(id, request, FetchHistory(requestID: id, conversationID: conversation, policy: policy))
        try await sendRegisteredHistory()
        return id
    }

    /// Records the history answers among `entries` (seq 0 message-created changes) for the
    /// request they answer: the first one not answered yet (the node answers in the order
    /// sent), or, should that be of another conversation, the first open one of the message's
    /// (never several: one message answers one request).
    func noteHistory(_ entries: [Change]) {
        guard !pending.historyOrder.isEmpty else { return }
        for entry in entries where entry.seq == 0 {
            guard case .messageCreated(let m) = entry.event else { continue }
            let open = pending.historyOrder.lazy.filter { self.pending[history: $0]?.result == nil }
            if let first = open.first,
                pending[history: first]?.isSearch == true || pending[history: first]?.conversation == m.conversationID
            {
                note(m, for: first)
            } else if let same = open.first(where: {
                self.pending[history: $0].map { !$0.isSearch && $0.conversation == m.conversationID } ?? false
            }) {
                note(m, for: same)
            }
        }
    }

    private func note(_ m: Message, for id: UUID) {
        guard pending[history: id]?.receivedSet.insert(m.id).inserted == true else { return }
        pending[history: id]?.received.append(m.id)
        if let p = m.position, pending[history: id]?.newest.map({ p > $0 }) ?? true { pending[history: id]?.newest = p }
    }

    /// The node answered request `id` (ACK or ERROR). Returns the next page, for a background
    /// page-after request whose answer was a full page (registered and queued already: the
    /// caller sends it with `sendRegisteredHistory`).
    func finishHistory(_ id: UUID, _ result: Result<Void, ClientError>) async throws -> FetchHistory? {
        guard var request = pending[history: id], request.result == nil else { return nil }
        if request.isBackground {
            unregister(id)
            var next: FetchHistory?
            if case .success = result, let count = request.pageCount, request.received.count >= Int(count),
                let newest = request.newest
            {
                let nextID = UUID()
                let frame = FetchHistory(
                    requestID: nextID, conversationID: request.conversation, policy: .pageAfter(newest, count: count))
                register(
                    nextID,
                    HistoryRequest(
                        conversation: request.conversation, isBackground: true, pageCount: count, pageStart: newest),
                    frame)
                next = frame
            }
            try await finishSnapshotFetch(id, result, received: request.received, after: request.pageStart, next: next)
            return next
        } else if let caller = request.caller {
            unregister(id)
            caller.resume(returning: result.map { HistoryAnswer(ids: request.received, newest: request.newest) })
        } else {
            request.result = result
            pending[history: id] = request
            pending.answered(history: id)
        }
        return nil
    }
}
