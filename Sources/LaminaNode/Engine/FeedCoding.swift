import LaminaModel
import LaminaStore
import LaminaWire
import NIOCore

/// Feed payloads are the event's CHANGE frame encoding with seq 0; reading one back
/// decodes it and puts in the entry's seq.
enum FeedCoding {
    static func encode(_ event: ChangeEvent) throws(WireError) -> [UInt8] {
        try encode(SharedChangeEvent(event))
    }

    static func encode(_ event: SharedChangeEvent) throws(WireError) -> [UInt8] {
        try encode(Change(seq: 0, shared: event))
    }

    /// The encoding of `change`'s event (its seq left out: 0).
    static func encode(_ change: Change) throws(WireError) -> [UInt8] {
        var change = change
        change.seq = 0
        let buffer = try Frame.change(change).encoded()
        return Array(buffer.readableBytesView)
    }

    /// `message-created` of `message`, encoded once for all its feeds: as it is when the
    /// conversation shares statuses (a receipt switch on), else with each viewer's own status
    /// only (`Message.reported(to:)`), put into each feed's CHANGE as it is encoded.
    static func messageCreated(_ message: Message, sharesStatuses: Bool) throws(WireError) -> SharedChangeEvent {
        sharesStatuses
            ? try SharedChangeEvent(.messageCreated(message)) : try SharedChangeEvent.reportedToEachViewer(message)
    }

    /// The event of an encoding made by `encode` (another node's notification).
    static func decodeEvent(_ bytes: [UInt8]) throws(WireError) -> ChangeEvent {
        guard case .change(let change) = try Frame.decode(exactly: ByteBuffer(bytes: bytes)) else {
            throw WireError(.invalidArgument, "an announced feed event that is not a change")
        }
        return change.event
    }

    static func decode(_ entry: FeedEntry) throws(WireError) -> Change {
        if let message = entry.createdMessage { return Change(seq: entry.seq, event: .messageCreated(message)) }
        if let encoding = entry.createdEncoding {
            return Change(seq: entry.seq, shared: SharedChangeEvent(encoding))
        }
        let frame = try Frame.decode(exactly: ByteBuffer(bytes: entry.payload))
        guard case .change(let change) = frame else {
            throw WireError(.internalError, "feed entry \(entry.seq) of \(entry.user) does not hold a change")
        }
        return Change(seq: entry.seq, event: change.event)
    }

    /// The frames for `changes` to a session with `features`: CHANGE_BATCH frames of at most
    /// 256 changes and about `maxBatchBytes` when it takes batches, else one CHANGE each.
    /// Kinds the session did not ask for are left out (their seqs are skipped: a device
    /// keeps the highest seq it got, SPEC §6.3).
    static func frames(_ all: [Change], for features: FeatureSet, maxBatchBytes: Int = 1 << 20) -> [Frame] {
        // Every filter below that looks into a message-created event is one `sendsStoredMessages`
        // leaves out: stored encodings (``StoredMessageEncoding``) pass through undecoded.
        var changes = features.contains(.partUpdates) ? all : all.filter { $0.kind != 11 }
        if !features.contains(.identities) { changes = changes.filter { $0.kind != 12 } }
        if !features.contains(.blockLists) { changes = changes.filter { $0.kind != 13 } }
        if !features.contains(.following) { changes = changes.filter { $0.kind != 15 } }
        if !features.contains(.notificationLevels) { changes = changes.filter { $0.kind != 22 } }
        if !features.contains(.mentions) { changes = changes.map { $0.withoutMentions } }
        if !features.contains(.receiptSwitches) {
            changes = changes.map { $0.withSingleReceiptsFlag }
        }
        if !features.contains(.channels) { changes = changes.filter { !(16...19).contains($0.kind) } }
        if !features.contains(.reactions) { changes = changes.filter { $0.kind != 20 } }
        if !features.contains(.replies) { changes = changes.map { $0.withoutThreadFields } }
        guard features.contains(.changeBatches), changes.count > 1 else { return changes.map { .change($0) } }
        var frames: [Frame] = []
        frames.reserveCapacity(changes.count / 256 + 1)
        // Each batch's array is sized once (a catch-up's batches of 256 otherwise grow by
        // copying their changes eight times).
        var current: [Change] = []
        current.reserveCapacity(min(changes.count, 256))
        var bytes = 0
        for (i, change) in changes.enumerated() {
            let size = estimatedSize(change)
            if !current.isEmpty, current.count == 256 || bytes + size > maxBatchBytes {
                frames.append(.changeBatch(ChangeBatch(changes: current)))
                current = []
                current.reserveCapacity(min(changes.count - i, 256))
                bytes = 0
            }
            current.append(change)
            bytes += size
        }
        if !current.isEmpty {
            frames.append(current.count == 1 ? .change(current[0]) : .changeBatch(ChangeBatch(changes: current)))
        }
        return frames
    }

    /// Whether a session with `features` is sent message-created events as the store encodes
    /// them (``StoredMessageEncoding``): it takes every field of a message the node stores
    /// (mentions, a reply's thread fields), so `frames` leaves those events as they are.
    static func sendsStoredMessages(_ features: FeatureSet) -> Bool {
        features.isSuperset(of: [.mentions, .replies, .receiptSwitches])
    }

    /// The size of `change` in a batch: its encoding's when it was made once, else an estimate.
    static func estimatedSize(_ change: Change) -> Int {
        if let size = change.encodedEventSize { return size + 16 }
        return estimatedSize(change.eventSharedByViewers)
    }

    static func estimatedSize(_ event: ChangeEvent) -> Int {
        switch event {
        case .messageCreated(let m):
            return 256
                + m.parts.reduce(0) { total, part in
                    if case .inline(let b) = part.content { return total + b.count + 128 }
                    return total + 192
                }
        case .conversationCreated(let c):
            return 512 + c.participants.count * 260 + 8192
        default:
            return 1024
        }
    }
}
