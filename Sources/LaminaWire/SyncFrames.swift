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
    /// One thread a page at a time (replies feature, SPEC §5.1 bit 15): the first `count`
    /// replies to `root` after `after` (from the first reply when nil), 1 <= count <=
    /// `FetchHistory.maxPageCount`; the root itself is not in the answer.
    case thread(root: MessageID, after: MessagePosition?, count: UInt32)
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
    /// The event as its feed's user is shown it.
    public var event: ChangeEvent {
        get {
            let common = eventSharedByViewers
            guard let viewer, let status = shared?.perViewer?.slots[viewer]?.status,
                case .messageCreated(var message) = common
            else { return common }
            message.recipientStatus[viewer] = status
            return .messageCreated(message)
        }
        set {
            common = newValue
            shared = nil
            viewer = nil
        }
    }
    /// `event`, or for a change made by ``SharedChangeEvent/change(seq:for:)`` the event every
    /// viewer shares (the viewer's own status not in it yet); nil when only `shared`'s bytes
    /// hold it (``StoredMessageEncoding``), decoded from them when asked for.
    private var common: ChangeEvent?
    /// The encoding of the event, when it was made once for many feeds (cleared when `event`
    /// changes); encoding the change then copies it instead of encoding the event again.
    private var shared: SharedChangeEvent?
    /// Whose own status is put into the shared encoding (``SharedChangeEvent/reportedToEachViewer(_:)``).
    private var viewer: UserID?

    public init(seq: UInt64, event: ChangeEvent) {
        self.seq = seq
        self.common = event
    }

    /// The change with seq `seq` of an event encoded once for every feed it goes to.
    public init(seq: UInt64, shared: SharedChangeEvent) {
        self.seq = seq
        self.common = shared.decoded
        self.shared = shared
    }

    fileprivate init(seq: UInt64, shared: SharedChangeEvent, viewer: UserID) {
        self.init(seq: seq, shared: shared)
        self.viewer = viewer
    }

    /// The event's kind (SPEC §6.2), without building a viewer's own view of it.
    public var kind: UInt8 { common?.kind ?? shared?.kind ?? 0 }

    /// The event, but for the statuses of a message whose viewers each see only their own
    /// (that status is `invalid` here): the same parts, ids and size as ``event``, made
    /// without a copy of the statuses.
    public var eventSharedByViewers: ChangeEvent {
        if let common { return common }
        guard let shared else { preconditionFailure("a change holds its event or its encoding") }
        return shared.event
    }

    /// The size of the event's encoding when it was made once (``SharedChangeEvent``; about
    /// the size for a stored message's); nil when the change has to be encoded.
    public var encodedEventSize: Int? { shared.map { $0.stored?.estimatedSize ?? $0.bytes.readableBytes } }

    public static func == (a: Change, b: Change) -> Bool { a.seq == b.seq && a.event == b.event }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(seq)
        hasher.combine(event)
    }
}

/// A change event (kind and fields, SPEC §6.2) encoded once, for the CHANGE frames of every
/// feed it is appended to, which differ only in their seq: a message to 25 participants is
/// encoded once, not 25 times. A message whose viewers each see only their own status (both
/// receipt switches off) is encoded once too, every status `invalid`: each viewer's CHANGE
/// gets the viewer's own status byte put in (``reportedToEachViewer(_:)``).
public struct SharedChangeEvent: Sendable {
    /// The event; for one made of a ``StoredMessageEncoding``, encoded and decoded again each
    /// time it is asked for (a catch-up only writes it into its frames).
    public var event: ChangeEvent {
        if let decoded { return decoded }
        var bytes = ByteBuffer()
        do throws(WireError) { try stored?.write(into: &bytes) } catch {
            preconditionFailure("a stored message was checked when it was read: \(error.reason)")
        }
        let result: Result<ChangeEvent, WireError> = bytes.withUnsafeReadableBytes { raw in
            var reader = PayloadReader(raw)
            do throws(WireError) {
                let event = try ChangeEvent.decode(from: &reader, .default)
                guard reader.readableBytes == 0 else {
                    return .failure(WireError(.malformed, "\(reader.readableBytes) bytes follow the event"))
                }
                return .success(event)
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case .success(let event): return event
        // `StoredMessageEncoding` checked the body and wrote the rest itself.
        case .failure(let error): preconditionFailure("a stored message's encoding does not decode: \(error.reason)")
        }
    }
    /// `event` when it was given (nil: only `stored` holds it).
    let decoded: ChangeEvent?
    /// The encoding (empty for `stored`).
    let bytes: ByteBuffer
    /// A stored message's event, written into each frame as it is encoded.
    let stored: StoredMessageEncoding?
    /// Each viewer's own status and where its byte sits in `bytes` (from the reader index).
    let perViewer: PerViewerStatuses?

    /// The event's kind (SPEC §6.2).
    public var kind: UInt8 { decoded?.kind ?? stored?.kind ?? 0 }

    final class PerViewerStatuses: Sendable {
        let slots: [UserID: (offset: Int, status: RecipientStatus)]
        init(slots: [UserID: (offset: Int, status: RecipientStatus)]) { self.slots = slots }
    }

    public init(_ event: ChangeEvent) throws(WireError) {
        var bytes = ByteBufferAllocator().buffer(capacity: 256)
        try event.encode(into: &bytes)
        self.decoded = event
        self.bytes = bytes
        self.stored = nil
        self.perViewer = nil
    }

    /// The `message-created` event of a stored message: a change made of it writes the stored
    /// bytes into its frame; its event is decoded only when asked for.
    public init(_ stored: StoredMessageEncoding) {
        self.decoded = nil
        self.bytes = ByteBuffer()
        self.stored = stored
        self.perViewer = nil
    }

    private init(event: ChangeEvent, bytes: ByteBuffer, perViewer: PerViewerStatuses) {
        self.decoded = event
        self.bytes = bytes
        self.stored = nil
        self.perViewer = perViewer
    }

    /// `message-created` of `message` for viewers who each see only their own status
    /// (`Message.recipientStatus` as it is: each viewer's own status is taken from it), and
    /// `invalid` for everyone else's: the message is encoded once, every status `invalid`,
    /// and ``change(seq:for:)`` puts a viewer's own status byte in.
    public static func reportedToEachViewer(_ message: Message) throws(WireError) -> SharedChangeEvent {
        var common = message
        for user in message.recipientStatus.keys { common.recipientStatus[user] = .invalid }
        var bytes = ByteBufferAllocator().buffer(capacity: 256)
        bytes.writeInteger(ChangeEvent.messageCreated(common).kind, as: UInt8.self)
        var offsets: [UserID: Int]? = [:]
        try bytes.writeMessage(common, statusOffsets: &offsets)
        if common.hasThreadFields { try bytes.writeThreadFields(common) }
        var slots: [UserID: (offset: Int, status: RecipientStatus)] = [:]
        slots.reserveCapacity(message.recipientStatus.count)
        for (user, status) in message.recipientStatus {
            guard let offset = offsets?[user] else { continue }
            slots[user] = (offset - bytes.readerIndex, status)
        }
        return SharedChangeEvent(
            event: .messageCreated(common), bytes: bytes, perViewer: PerViewerStatuses(slots: slots))
    }

    /// The change with seq `seq` in `viewer`'s feed: ``event``, and for an event made by
    /// ``reportedToEachViewer(_:)``, with the viewer's own status.
    public func change(seq: UInt64, for viewer: UserID) -> Change {
        perViewer == nil ? Change(seq: seq, shared: self) : Change(seq: seq, shared: self, viewer: viewer)
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
            b.writeInteger(3, as: UInt8.self)
            try Self.writePage(count: count, after: after, of: ("a history page", "messages"), into: &b)
        case .thread(let root, let after, let count):
            b.writeInteger(4, as: UInt8.self)
            try Self.writePage(count: count, after: after, of: ("a thread page", "replies"), into: &b)
            b.writeID(root)
        }
        if let before {
            b.writeInteger(1, as: UInt8.self)
            b.writeHLC(before)
        } else {
            b.writeInteger(0, as: UInt8.self)
        }
    }

    /// A page's `count` (1 to `maxPageCount`, else `invalid-argument`: SPEC §6.3) and optional
    /// start, as policies 3 (page-after) and 4 (thread) carry them; `what` names the page and its
    /// items for the error.
    private static func writePage(
        count: UInt32, after: MessagePosition?, of what: (page: String, items: String), into b: inout ByteBuffer
    ) throws(WireError) {
        guard (1...maxPageCount).contains(count) else {
            throw WireError(.invalidArgument, "\(what.page) asks for 1...\(maxPageCount) \(what.items), not \(count)")
        }
        b.writeVarint(UInt64(count))
        if let after {
            b.writeInteger(1, as: UInt8.self)
            b.writeHLC(after)
        } else {
            b.writeInteger(0, as: UInt8.self)
        }
    }

    private static func readPage(
        of what: (page: String, items: String), field: StaticString, from b: inout PayloadReader
    )
        throws(WireError) -> (count: UInt32, after: MessagePosition?)
    {
        let count = try b.readVarint32(field)
        // SPEC §6.3: "`count` is 1 to 10,000, anything else `invalid-argument`".
        guard (1...maxPageCount).contains(count) else {
            throw WireError(.invalidArgument, "\(what.page) asks for 1...\(maxPageCount) \(what.items), not \(count)")
        }
        let after = try b.readPresence("the page's start") ? try b.readHLC("the page's start") : nil
        return (count, after)
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
            let (count, after) = try readPage(
                of: ("a history page", "messages"), field: "the page's message count", from: &b)
            policy = .pageAfter(after, count: count)
        case 4:
            let (count, after) = try readPage(
                of: ("a thread page", "replies"), field: "the page's reply count", from: &b)
            let root = try b.readID(MessageID.self, "the thread's root")
            policy = .thread(root: root, after: after, count: count)
        default:
            throw WireError(.malformed, "history policy \(raw) is not 0 to 4")
        }
        let before = try b.readPresence("the position bound") ? try b.readHLC("the position bound") : nil
        return FetchHistory(requestID: id, conversationID: conversation, policy: policy, before: before)
    }
}

extension Change {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeVarint(seq)
        if let stored = shared?.stored {
            try stored.write(into: &b)
        } else if let shared {
            let start = b.writerIndex
            b.writeImmutableBuffer(shared.bytes)
            if let viewer, let slot = shared.perViewer?.slots[viewer] {
                b.setInteger(UInt8(bitPattern: slot.status.rawValue), at: start + slot.offset)
            }
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
