import LaminaWire

/// What a device holds of each conversation after a first sync (a new or wiped device, or
/// one whose cursor fell below what the node keeps): the docs' synchronization policies.
/// Every policy starts from the node's snapshot (SPEC §6.3: each conversation with its latest
/// message and the user's counts), so counts are right whatever the policy holds.
public enum SynchronizationPolicy: Hashable, Sendable {
    /// Every message of every conversation.
    case completeHistory
    /// The messages from the first one the user has not read (and each conversation's latest).
    case unreadOnly
    /// The last `n` messages of each conversation (n >= 1).
    case lastMessages(Int)
    /// No snapshot: the user's whole change feed from its first entry, as before snapshots
    /// existed (what `lamina-bench` compares the policies with).
    case feedReplay

    /// The most messages `lastMessages` asks for per conversation.
    public static let maxLastMessages = 100_000

    /// The FETCH_HISTORY policy that fills a conversation of the snapshot (nil: none). Complete
    /// history goes forwards a page of `pageSize` at a time when the node offers history paging
    /// (else one request, which the node caps at its page limit).
    func historyPolicy(paging: Bool, pageSize: UInt32) -> HistoryPolicy? {
        switch self {
        case .completeHistory: paging ? .pageAfter(nil, count: pageSize) : .complete
        case .unreadOnly: .unreadOnly
        case .lastMessages(let n): .lastN(UInt32(clamping: n))
        case .feedReplay: nil
        }
    }

    func validate() throws(ClientError) {
        if case .lastMessages(let n) = self, !(1...Self.maxLastMessages).contains(n) {
            throw ClientError(
                .invalidSetting, "a last-messages policy asks for 1...\(Self.maxLastMessages) messages, not \(n)")
        }
    }
}
