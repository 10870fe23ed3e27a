import Foundation
import LaminaModel

/// Which way content moves.
public enum TransferDirection: String, Hashable, Sendable {
    case upload
    case download
}

/// Something that happened to one rich-content transfer. Foundation `Progress` carries the
/// counts for the app's UI; these events are for code that awaits them (Linux has no KVO).
public enum ContentTransferEvent: Hashable, Sendable {
    /// `completed` of `total` bytes are sent (handed to HTTP/2) or received.
    case progressed(MessagePartID, TransferDirection, completed: UInt64, total: UInt64)
    /// The transfer stopped at `offset` (the bytes the node holds, for an upload) until resumed.
    case paused(MessagePartID, TransferDirection, offset: UInt64)
    /// The transfer starts (again) from `offset`: 0, or where the node's or the file's bytes end.
    case started(MessagePartID, TransferDirection, offset: UInt64)
    /// All bytes are on the node (upload) or in the verified file (download).
    case completed(MessagePartID, TransferDirection)
    /// The transfer ended without its content (cancelled, refused, digest mismatch).
    case failed(MessagePartID, TransferDirection, ClientError)
}

/// Hands every event to each current subscriber.
final class TransferEventHub: @unchecked Sendable {
    private let lock = NSLock()
    private var subscribers: [UUID: AsyncStream<ContentTransferEvent>.Continuation] = [:]
    /// The most events buffered for one slow subscriber (the newest are kept).
    static let bufferLimit = 10_000

    func subscribe() -> AsyncStream<ContentTransferEvent> {
        let (stream, continuation) = AsyncStream<ContentTransferEvent>.makeStream(
            bufferingPolicy: .bufferingNewest(Self.bufferLimit))
        let id = UUID()
        lock.withLock { subscribers[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            _ = self.lock.withLock { self.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    func emit(_ event: ContentTransferEvent) {
        for continuation in lock.withLock({ Array(subscribers.values) }) { continuation.yield(event) }
    }

    func finish() {
        for continuation in lock.withLock({ Array(subscribers.values) }) { continuation.finish() }
    }
}

extension OutboxFailure {
    /// The `code` of a message whose upload the app cancelled (a client value, below
    /// SPEC §9's range).
    public static let cancelledCode: UInt16 = 1
    /// The `code` of a message whose staged content is missing or unreadable on this device.
    public static let contentMissingCode: UInt16 = 2

    /// Whether the app cancelled the upload of this message's content.
    public var isCancelled: Bool { code == Self.cancelledCode }
}
