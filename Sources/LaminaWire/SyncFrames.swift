import Foundation
import LaminaModel
import NIOCore

// Sync (SPEC §6.3): the per-user change feed, catch-up from a cursor, history on demand.

/// SYNC (0x0301), client -> node: send every change after `cursor`, then live changes.
/// ```
/// +-----------------+-----------------+
/// | request id (16) | cursor (varint) |
/// +-----------------+-----------------+
/// ```
public struct SyncRequest: Hashable, Sendable {
    public var requestID: UUID
    /// The last feed sequence number this device has applied; 0 for none.
    public var cursor: UInt64

    public init(requestID: UUID, cursor: UInt64) {
        self.requestID = requestID
        self.cursor = cursor
    }
}

/// Which messages of a conversation a history fetch returns (SPEC §6.3).
public enum HistoryPolicy: Hashable, Sendable {
    /// Every message.
    case complete
    /// From the first unread message on.
    case unreadOnly
    /// The last `n` messages, 1 <= n.
    case lastN(UInt32)
    /// Complete history a page at a time, forward: the first `count` messages after `after`
    /// (from the first message when nil), 1 <= count <= `FetchHistory.maxPageCount`. An
    /// answer of fewer than `count` messages is the end (SPEC §6.3, history paging feature).
    case pageAfter(MessagePosition?, count: UInt32)
}

/// FETCH_HISTORY (0x0302), client -> node: messages of one conversation, answered with
/// message-created changes (seq 0, outside the feed) and then an ACK.
/// ```
/// +-----------------+----------------------+-------------+-------------------+------------------+
/// | request id (16) | conversation id (16) | policy (u8) | n (varint, only   | before (opt HLC) |
/// |                 |                      |             |  for policy 2)    |                  |
/// +-----------------+----------------------+-------------+-------------------+------------------+
/// ```
public struct FetchHistory: Hashable, Sendable {
    /// The most messages one `pageAfter` request asks for (SPEC §6.3).
    public static let maxPageCount: UInt32 = 10_000

    public var requestID: UUID
    public var conversationID: ConversationID
    public var policy: HistoryPolicy
    /// Only messages before this position (paging backwards); nil for the newest.
    public var before: MessagePosition?

    public init(requestID: UUID, conversationID: ConversationID, policy: HistoryPolicy, before: MessagePosition? = nil)
    {
        self.requestID = requestID
        self.conversationID = conversationID
        self.policy = policy
        self.before = before
    }
}

/// CHANGE (0x0303), node -> client: one entry of the user's change feed.
/// ```
/// +--------------+------------+-------------------+
/// | seq (varint) | kind (u8)  | event fields ...  |
/// +--------------+------------+-------------------+
/// ```
public struct Change: Hashable, Sendable {
    /// The entry's sequence number in the user's feed (1, 2, ...); 0 for history answers.
    public var seq: UInt64
    public var event: ChangeEvent {
        didSet { shared = nil }
    }
    /// The encoding of `event`, when it was made once for many feeds (cleared when `event`
    /// changes); encoding the change then copies it instead of encoding the event again.
    private var shared: SharedChangeEvent?

    public init(seq: UInt64, event: ChangeEvent) {
        self.seq = seq
        self.event = event
    }

    /// The change with seq `seq` of an event encoded once for every feed it goes to.
    public init(seq: UInt64, shared: SharedChangeEvent) {
        self.seq = seq
        self.event = shared.event
        self.shared = shared
    }

    public static func == (a: Change, b: Change) -> Bool { a.seq == b.seq && a.event == b.event }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(seq)
        hasher.combine(event)
    }
}

/// A change event (kind and fields, SPEC §6.2) encoded once, for the CHANGE frames of every
/// feed it is appended to, which differ only in their seq: a message to 25 participants is
/// encoded once, not 25 times.
public struct SharedChangeEvent: Sendable {
    public let event: ChangeEvent
    let bytes: ByteBuffer

    public init(_ event: ChangeEvent) throws(WireError) {
        var bytes = ByteBufferAllocator().buffer(capacity: 256)
        try event.encode(into: &bytes)
        self.event = event
        self.bytes = bytes
    }
}

/// CHANGE_BATCH (0x0304), node -> client: 1 to 256 changes in ascending seq order.
/// ```
/// +----------------+--------------------------------+
/// | count (varint) | change (seq + kind + fields) * |
/// +----------------+--------------------------------+
/// ```
public struct ChangeBatch: Hashable, Sendable {
    public var changes: [Change]
    public init(changes: [Change]) { self.changes = changes }
}

// MARK: - Codec

extension SyncRequest {
    func encode(into b: inout ByteBuffer) {
        b.writeUUID(requestID)
        b.writeVarint(cursor)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> SyncRequest {
        let id = try b.readUUID("the request id")
        return SyncRequest(requestID: id, cursor: try b.readVarint("the cursor"))
    }
}

extension FetchHistory {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeUUID(requestID)
        b.writeID(conversationID)
        switch policy {
        case .complete: b.writeInteger(0, as: UInt8.self)
        case .unreadOnly: b.writeInteger(1, as: UInt8.self)
        case .lastN(let n):
            guard n > 0 else { throw WireError(.invalidArgument, "a last-N history fetch needs N >= 1") }
            b.writeInteger(2, as: UInt8.self)
            b.writeVarint(UInt64(n))
        case .pageAfter(let after, let count):
            guard (1...Self.maxPageCount).contains(count) else {
                throw WireError(
                    .invalidArgument, "a history page asks for 1...\(Self.maxPageCount) messages, not \(count)")
            }
            b.writeInteger(3, as: UInt8.self)
            b.writeVarint(UInt64(count))
            if let after {
                b.writeInteger(1, as: UInt8.self)
                b.writeHLC(after)
            } else {
                b.writeInteger(0, as: UInt8.self)
            }
        }
        if let before {
            b.writeInteger(1, as: UInt8.self)
            b.writeHLC(before)
        } else {
            b.writeInteger(0, as: UInt8.self)
        }
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> FetchHistory {
        let id = try b.readUUID("the request id")
        let conversation = try b.readID(ConversationID.self, "the conversation id")
        let raw = try b.readU8("the history policy")
        let policy: HistoryPolicy
        switch raw {
        case 0: policy = .complete
        case 1: policy = .unreadOnly
        case 2:
            let n = try b.readVarint32("the message count")
            // SPEC §6.3: "`count` >= 1; 0 is `invalid-argument`".
            guard n > 0 else { throw WireError(.invalidArgument, "a last-N history fetch needs N >= 1") }
            policy = .lastN(n)
        case 3:
            let count = try b.readVarint32("the page's message count")
            // SPEC §6.3: "`count` is 1 to 10,000, anything else `invalid-argument`".
            guard (1...maxPageCount).contains(count) else {
                throw WireError(.invalidArgument, "a history page asks for 1...\(maxPageCount) messages, not \(count)")
            }
            let after = try b.readPresence("the page's start") ? try b.readHLC("the page's start") : nil
            policy = .pageAfter(after, count: count)
        default:
            throw WireError(.malformed, "history policy \(raw) is not 0, 1, 2 or 3")
        }
        let before = try b.readPresence("the position bound") ? try b.readHLC("the position bound") : nil
        return FetchHistory(requestID: id, conversationID: conversation, policy: policy, before: before)
    }
}

extension Change {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeVarint(seq)
        if let shared {
            b.writeImmutableBuffer(shared.bytes)
        } else {
            try event.encode(into: &b)
        }
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> Change {
        let seq = try b.readVarint("the sequence number")
        return Change(seq: seq, event: try ChangeEvent.decode(from: &b, limits))
    }
}

extension ChangeBatch {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        guard !changes.isEmpty else { throw WireError(.invalidArgument, "a change batch holds at least one change") }
        guard changes.count <= WireLimits.default.maxBatchSize else {
            throw WireError(
                .limitExceeded,
                "a change batch holds at most \(WireLimits.default.maxBatchSize) changes, this one has \(changes.count)"
            )
        }
        b.writeVarint(UInt64(changes.count))
        for change in changes { try change.encode(into: &b) }
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> ChangeBatch {
        let count = try b.readCount(max: limits.maxBatchSize, minElementSize: 2, "the change count")
        // SPEC §6.3: "a batch holds 1 to 256 changes in ascending seq order".
        guard count > 0 else { throw WireError(.malformed, "a change batch holds at least one change") }
        var changes = [Change]()
        changes.reserveCapacity(count)
        for _ in 0..<count { changes.append(try Change.decode(from: &b, limits)) }
        return ChangeBatch(changes: changes)
    }
}
