import Foundation
import LaminaModel
import LaminaWire

/// A snapshot's first sync (SPEC §6.3): the conversations it named, then one FETCH_HISTORY
/// per conversation by the `SynchronizationPolicy`, at most `SyncSession.maxSnapshotFetches`
/// at once.
struct SnapshotSync {
    /// The device's cursor before this SYNC: above 0, the device held a feed it may have
    /// missed parts of (pruned), and what the snapshot no longer holds is dropped here.
    var cursorBefore: UInt64 = 0
    /// Conversations of the snapshot in the order received, and as a set.
    private(set) var conversations: [ConversationID] = []
    private var named: Set<ConversationID> = []
    /// Conversations waiting for their fetch (a complete history's with where it resumes).
    var queue: [PendingPolicyFill] = []
    /// Fetches sent and not answered yet (a complete history's: its current page).
    var outstanding: [UUID: ConversationID] = [:]
    var failed = 0
    var started = false
    /// Whether feed entries (seq > 0) came before the SYNC's ACK: then it was a backlog, not
    /// a snapshot (a snapshot of no conversation is told by the ACK's cursor moving without any).
    var sawFeedEntries = false

    init(cursorBefore: UInt64 = 0) { self.cursorBefore = cursorBefore }

    mutating func received(_ ids: [ConversationID]) {
        for id in ids where named.insert(id).inserted { conversations.append(id) }
    }

    func contains(_ id: ConversationID) -> Bool { named.contains(id) }
}

extension SyncSession {
    /// The most snapshot fetches outstanding at once (of `maxHistoryRequests`, leaving room for
    /// the app's own `fetchHistory`).
    static let maxSnapshotFetches = 8

    /// After the SYNC's ACK (its cursor `acked`): when a snapshot came, drops what it says is
    /// gone (a device whose cursor was pruned) and starts filling its conversations by the
    /// policy; else resumes a fill a previous session left unfinished (kept in the store).
    func startSnapshotFetches(acked: UInt64) async throws {
        guard !snapshot.started else { return }
        let empty = !snapshot.sawFeedEntries && acked > snapshot.cursorBefore
        let canFill = fillPolicy(after: nil) != nil && features.contains(.historyFetch)
        if !snapshot.conversations.isEmpty || empty {
            if snapshot.cursorBefore > 0 {
                try await store.dropConversationsAsync(notIn: Set(snapshot.conversations))
            }
            // The latest conversations first: the snapshot lists them oldest first.
            snapshot.queue =
                canFill ? snapshot.conversations.reversed().map { PendingPolicyFill(conversation: $0) } : []
            try await store.setPendingPolicyFillsAsync(snapshot.queue.map(\.conversation))
        } else {
            let pending = try await store.pendingPolicyFillsAsync()
            guard !pending.isEmpty, canFill else { return }
            snapshot.received(pending.map(\.conversation))
            snapshot.queue = pending
            snapshot.cursorBefore = 0  // what the cut-short session dropped stays dropped; nothing more to compare
        }
        snapshot.started = true
        try await continueSnapshot()
    }

    /// Sends the next fetches of the snapshot; reports `snapshotSynced` once all were answered.
    func continueSnapshot() async throws {
        guard snapshot.started else { return }
        while let fill = snapshot.queue.first, let policy = fillPolicy(after: fill.after),
            snapshot.outstanding.count < Self.maxSnapshotFetches,
            pending.historyCount < Self.maxHistoryRequests
        {
            snapshot.queue.removeFirst()
            let id = UUID()
            snapshot.outstanding[id] = fill.conversation
            try await sendBackgroundFetch(fill.conversation, policy, id: id)
        }
        if snapshot.queue.isEmpty, snapshot.outstanding.isEmpty {
            snapshot.started = false
            let total = snapshot.conversations.count
            let failed = snapshot.failed
            snapshot = SnapshotSync()
            onEvent(.snapshotSynced(conversations: total, failed: failed))
        }
    }

    /// The FETCH_HISTORY that fills a conversation by the synchronization policy; a complete
    /// history a page at a time when the node offers paging, from `after` on.
    func fillPolicy(after: MessagePosition?) -> HistoryPolicy? {
        let policy = synchronization.historyPolicy(paging: features.contains(.historyPaging), pageSize: historyPageSize)
        if case .pageAfter(_, let count) = policy { return .pageAfter(after, count: count) }
        return policy
    }

    /// A snapshot fetch was answered: the conversation no longer waits (unless the stream ended
    /// first: the next session fetches it). For a device that held the conversation before, the
    /// messages it holds between the oldest and newest the answer returned that the answer left
    /// out were deleted on the node meanwhile, and go here too.
    /// A full page of a complete history is followed by `next` (already registered): the fill
    /// waits for that, and resumes after this page should the stream end first.
    func finishSnapshotFetch(
        _ id: UUID, _ result: Result<Void, ClientError>, received: [MessageID], after start: MessagePosition?,
        next: FetchHistory?
    ) async throws {
        guard let conversation = snapshot.outstanding.removeValue(forKey: id) else { return }
        switch result {
        case .failure(let error) where error.code == .disconnected:
            return
        case .failure:
            snapshot.failed += 1
        case .success:
            if snapshot.cursorBefore > 0, !received.isEmpty {
                try await store.dropMessagesAsync(in: conversation, notIn: received, after: start)
            }
            if let next, case .pageAfter(let resume?, _) = next.policy {
                snapshot.outstanding[next.requestID] = conversation
                try await store.advancePolicyFillAsync(conversation, after: resume)
                return
            }
        }
        try await store.removePendingPolicyFillAsync(conversation)
    }
}
