/// Limits and tuning of a `NodeStore`. Every limit is checked when the store opens.
public struct StorageConfiguration: Sendable, Hashable {
    /// Commands waiting for the writer at most; beyond that `write` fails at once with
    /// `.writeQueueFull` (back-pressure) rather than letting memory grow.
    public var writeQueueCapacity: Int
    /// Commands per transaction (group commit) at most.
    public var maxBatchSize: Int
    /// Concurrent read connections (WAL readers).
    public var readerCount: Int

    public init(writeQueueCapacity: Int = 10_000, maxBatchSize: Int = 512, readerCount: Int = 4) {
        self.writeQueueCapacity = writeQueueCapacity
        self.maxBatchSize = maxBatchSize
        self.readerCount = readerCount
    }

    func validate() throws(StorageError) {
        guard (1...1_000_000).contains(writeQueueCapacity) else {
            throw StorageError(.invalidArgument, "writeQueueCapacity must be 1...1,000,000, got \(writeQueueCapacity)")
        }
        guard (1...100_000).contains(maxBatchSize) else {
            throw StorageError(.invalidArgument, "maxBatchSize must be 1...100,000, got \(maxBatchSize)")
        }
        guard (1...64).contains(readerCount) else {
            throw StorageError(.invalidArgument, "readerCount must be 1...64, got \(readerCount)")
        }
    }
}

/// Limits on values the storage accepts, beyond the model's own `Limits`.
public enum StorageLimits {
    /// The longest device id, in UTF-8 bytes.
    public static let maxDeviceIDBytes = 256
    /// The longest nonce, in UTF-8 bytes.
    public static let maxNonceBytes = 256
    /// The largest caller-encoded blob (feed payload, idempotency result, replication op).
    public static let maxBlobBytes = 4 * 1_024 * 1_024
    /// The most entries one feed read or history query returns.
    public static let maxPageSize = 10_000
}
