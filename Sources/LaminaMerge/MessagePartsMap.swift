import Foundation
import LaminaModel

/// One write of a message's parts (SPEC §6.2): the parts it set and the part ids it removed,
/// all at its HLC reading, and the order of the whole list it left at its origin. The send is
/// the first write (every part set, none removed); an edit sets the parts it changed.
public struct MessagePartsEdit: Hashable, Sendable {
    /// The reading the write was accepted at (the send's, or the edit's).
    public var at: HLCTimestamp
    /// The parts this write set (added or replaced), by their ids.
    public var set: [MessagePart]
    /// The ids of the parts this write removed.
    public var removed: [UUID]
    /// The ids of the whole list at the write's origin after it, in order.
    public var order: [UUID]

    public init(at: HLCTimestamp, set: [MessagePart], removed: [UUID], order: [UUID]) {
        self.at = at
        self.set = set
        self.removed = removed
        self.order = order
    }

    /// The send of `parts` at `at`: the first write of every part.
    public static func send(_ parts: [MessagePart], at: HLCTimestamp) -> MessagePartsEdit {
        MessagePartsEdit(at: at, set: parts, removed: [], order: parts.map(\.id))
    }

    /// The edit that turns `current` into `updated` at `at`, compared by part id: a part whose
    /// id is new or whose value differs is set, a part whose id is gone is removed; parts that
    /// stay unchanged keep the reading they have.
    public static func diff(from current: [MessagePart], to updated: [MessagePart], at: HLCTimestamp)
        -> MessagePartsEdit
    {
        // The part shown when every part was removed is no register: it is neither kept nor removed.
        let current = current == [MessagePartsMap.emptied] ? [] : current
        let held = Dictionary(current.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let kept = Set(updated.map(\.id))
        return MessagePartsEdit(
            at: at, set: updated.filter { held[$0.id] != $0 }, removed: current.map(\.id).filter { !kept.contains($0) },
            order: updated.map(\.id))
    }
}

/// A message's parts as a last-writer-wins register per part (SPEC §6.2): each part id holds
/// the reading of the write that last set or removed it, and its value or a tombstone; the
/// order of the list is its own register, the order of the latest write's list. The list is
/// that order's live parts, followed by the live parts it does not name (set by a write older
/// than the order's), by reading, then id. A later reading wins; readings are unique across
/// nodes, so ties only come from a faulty replica, and are broken so every replica picks alike.
public struct MessagePartsMap: ReplicatedState, Hashable {
    /// One part id's register: the winning write's reading and value (nil: removed).
    public struct Entry: Hashable, Sendable {
        public var at: HLCTimestamp
        public var part: MessagePart?

        public init(at: HLCTimestamp, part: MessagePart?) {
            self.at = at
            self.part = part
        }
    }

    public typealias Operation = MessagePartsEdit

    /// Each part id's register.
    public private(set) var entries: [UUID: Entry] = [:]
    /// The order register: the reading of the write whose list it holds (nil: no write yet).
    public private(set) var orderAt: HLCTimestamp?
    /// The order register: that write's list of part ids, in order.
    public private(set) var orderIDs: [UUID] = []

    public init() {}

    /// A state read back from storage: the registers as they were written.
    public init(entries: [UUID: Entry], orderAt: HLCTimestamp?, orderIDs: [UUID]) {
        self.entries = entries
        self.orderAt = orderAt
        self.orderIDs = orderIDs
    }

    public mutating func apply(_ edit: MessagePartsEdit) {
        for part in edit.set { put(part.id, Entry(at: edit.at, part: part)) }
        for id in edit.removed { put(id, Entry(at: edit.at, part: nil)) }
        putOrder(edit.at, edit.order)
    }

    public func merged(with other: MessagePartsMap) -> MessagePartsMap {
        var out = self
        for (id, entry) in other.entries { out.put(id, entry) }
        if let at = other.orderAt { out.putOrder(at, other.orderIDs) }
        return out
    }

    /// The latest reading any write holds (the message's edit time when it is not the send's).
    public var latest: HLCTimestamp? {
        ([orderAt].compactMap { $0 } + entries.values.map(\.at)).max()
    }

    /// The message's parts: the order register's live parts, then the live parts it does not
    /// name by reading, then id; ``emptied`` when writes removed every part.
    public var parts: [MessagePart] {
        var out: [MessagePart] = []
        var named = Set<UUID>()
        for id in orderIDs where named.insert(id).inserted {
            if let part = entries[id]?.part { out.append(part) }
        }
        let rest = entries.filter { !named.contains($0.key) && $0.value.part != nil }.sorted { a, b in
            a.value.at != b.value.at
                ? a.value.at < b.value.at : Self.bytes(a.key).lexicographicallyPrecedes(Self.bytes(b.key))
        }
        out.append(contentsOf: rest.compactMap(\.value.part))
        // Concurrent removals can leave no part; a message keeps one (SPEC §3.12).
        if out.isEmpty && !entries.isEmpty { return [Self.emptied] }
        return out
    }

    /// What a message whose every part was removed shows: one empty `text/plain` part whose
    /// id is the nil UUID (all zero bytes), the same on every replica.
    public static let emptied = MessagePart(
        id: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)), mimeType: .textPlain, content: .inline([]))

    private mutating func put(_ id: UUID, _ incoming: Entry) {
        guard let current = entries[id] else {
            entries[id] = incoming
            return
        }
        if Self.replaces(incoming, current) { entries[id] = incoming }
    }

    private mutating func putOrder(_ at: HLCTimestamp, _ ids: [UUID]) {
        // At one reading (a faulty replica only) the greater list of ids, as bytes.
        guard
            LastWriterWins.wins(at, over: orderAt)
                || (at == orderAt && Self.idBytes(orderIDs).lexicographicallyPrecedes(Self.idBytes(ids)))
        else { return }
        orderAt = at
        orderIDs = ids
    }

    /// Whether `incoming` replaces `current` in one part's register: a later reading; at the
    /// same reading a removal, then the greater value as bytes (MIME type, then content).
    static func replaces(_ incoming: Entry, _ current: Entry) -> Bool {
        if incoming.at != current.at { return LastWriterWins.wins(incoming.at, over: current.at) }
        switch (current.part, incoming.part) {
        case (nil, _): return false
        case (_, nil): return true
        case (let a?, let b?): return tieKey(a).lexicographicallyPrecedes(tieKey(b))
        }
    }

    private static func tieKey(_ part: MessagePart) -> [UInt8] {
        var key = Array(part.mimeType.rawValue.utf8) + [0]
        switch part.content {
        case .inline(let bytes): key += [0] + bytes
        case .external(let reference): key += [1] + bytes(reference.id.uuid) + reference.sha256
        }
        return key
    }

    private static func bytes(_ id: UUID) -> [UInt8] { withUnsafeBytes(of: id.uuid) { Array($0) } }
    private static func idBytes(_ ids: [UUID]) -> [UInt8] { ids.flatMap(bytes) }
}
