import Foundation
import LaminaModel
import LaminaWire

/// A request a session sent and the node has not answered yet (ACK or ERROR, SPEC §5.7).
enum PendingRequest {
    /// The session's SYNC.
    case sync
    /// An outbox entry sent as its command (SPEC §7).
    case command(OutboxEntry)
    /// A FETCH_HISTORY, with what arrived for it so far.
    case history(HistoryRequest)
    /// A session request a caller awaits (END_SESSION, REGISTER_PUSH_TOKEN, BLOCK_USER).
    case awaited(AwaitedRequest)
}

/// A session request whose caller waits for the node's answer; what it was is kept for the
/// error it fails with when the stream ends first.
struct AwaitedRequest {
    var frame: FrameType
    var result: Result<Void, ClientError>?
    var caller: CheckedContinuation<Result<Void, ClientError>, Never>?
    /// For a push registration nobody awaits: the stored token it sent as the session went
    /// live (forgotten if the node refuses it and it is still the one stored).
    var stored: DevicePushToken?
    /// Sent as the session went live with nobody awaiting it: forgotten when answered.
    var unawaited = false
}

/// The one table of a session's requests awaiting an answer, keyed by request id: an ACK or
/// ERROR finds what it answers here, and when the stream ends every entry is failed at once.
/// Typed subscripts read and write the entries of one kind.
struct PendingRequests {
    private var table: [UUID: PendingRequest] = [:]
    /// History requests not answered yet, in the order sent: the node answers them in that
    /// order (SPEC §6), so an answer's messages belong to the first of them.
    private(set) var historyOrder: [UUID] = []
    /// How many history requests are open (bounded by `SyncSession.maxHistoryRequests`).
    private(set) var historyCount = 0

    subscript(id: UUID) -> PendingRequest? { table[id] }

    var ids: [UUID] { Array(table.keys) }

    mutating func register(sync id: UUID) { table[id] = .sync }

    mutating func remove(_ id: UUID) {
        if case .history = table.removeValue(forKey: id) {
            historyCount -= 1
            historyOrder.removeAll { $0 == id }
        }
    }

    subscript(command id: UUID) -> OutboxEntry? {
        get { if case .command(let entry)? = table[id] { entry } else { nil } }
        set {
            if let newValue { table[id] = .command(newValue) } else if self[command: id] != nil { table[id] = nil }
        }
    }

    subscript(history id: UUID) -> HistoryRequest? {
        get { if case .history(let request)? = table[id] { request } else { nil } }
        set {
            switch (self[history: id], newValue) {
            case (nil, let new?):
                table[id] = .history(new)
                historyCount += 1
                historyOrder.append(id)
            case (_?, let new?): table[id] = .history(new)
            case (_?, nil): remove(id)
            case (nil, nil): break
            }
        }
    }

    /// A history request answered with nobody waiting yet: it keeps its result for the caller
    /// and no longer counts as the first open one for arriving messages.
    mutating func answered(history id: UUID) { historyOrder.removeAll { $0 == id } }

    subscript(awaited id: UUID) -> AwaitedRequest? {
        get { if case .awaited(let request)? = table[id] { request } else { nil } }
        set {
            if let newValue { table[id] = .awaited(newValue) } else if self[awaited: id] != nil { table[id] = nil }
        }
    }

    /// The awaited request of this kind, if one is open (at most one END_SESSION at a time).
    func awaitedID(of frame: FrameType) -> UUID? {
        table.first { if case .awaited(let r) = $0.value { r.frame == frame } else { false } }?.key
    }
}
