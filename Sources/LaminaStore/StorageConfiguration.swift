/// Limits and tuning of a `NodeStore`. Every limit is checked when the store opens.
package struct StorageConfiguration: Sendable, Hashable {
    /// Commands waiting for the writer at most; beyond that `write` fails at once with
    /// `.writeQueueFull` (back-pressure) rather than letting memory grow.
    package var writeQueueCapacity: Int
    /// Commands per transaction (group commit) at most.
    package var maxBatchSize: Int
    /// Concurrent read connections (WAL readers).
    package var readerCount: Int
    /// SQLite's page cache of the writer connection, in KiB. The writer's working set (the B-tree
    /// pages the latest messages, feeds and indexes touch) should fit, so a commit reads no
    /// page back from the operating system.
    package var pageCacheKiB: Int
    /// Bytes of the database file the writer connection maps into memory (0: none). Reads of
    /// mapped pages are not copied out of the kernel's page cache.
    package var mmapBytes: Int
    /// SQLite's page cache of each reader connection, in KiB (at most `pageCacheKiB`).
    package var readerPageCacheKiB: Int = Self.defaultReaderPageCacheKiB
    /// Bytes of the database file each reader connection maps (0: none, the default). A mapped
    /// page read once stays in the node's resident set until the map goes, so readers that walk
    /// a long history would grow the node by the size of what they read; unmapped, a read copies
    /// the page (4 KiB, from the kernel's page cache) into the reader's bounded cache instead.
    package var readerMmapBytes: Int = 0
    /// The default of `readerPageCacheKiB`: 2 MiB per reader.
    package static let defaultReaderPageCacheKiB = 2_048
    /// Whether a commit is synced to stable storage before it completes (`synchronous=FULL`).
    /// Always true for a node: it acknowledges only what survives a crash. False only for
    /// tests of decisions, not durability, that would otherwise wait on fsync.
    package var syncsCommits: Bool = true
    /// PostgreSQL: the client library (nil: `LAMINA_POSTGRES_DRIVER` in the environment, else
    /// `PostgresDriver.standard`).
    package var postgresDriver: PostgresDriver?
    /// Group commit: a group that would start within this many microseconds of the previous
    /// commit's start waits for more commands, unless `groupCommitTarget` wait (0: commit
    /// whenever a command waits). One synced
    /// commit costs the machine far more than one command (on a virtual disk an fsync is
    /// ~100 µs of CPU), so under a steady stream of commands fewer, larger groups cost less
    /// per command. A group waits only while the next command is expected before the spacing
    /// ends (it stops one mean gap between arriving commands early, `ArrivalGaps`), so commands
    /// that arrive further apart than the spacing, or after a quiet spell, commit at once.
    package var groupCommitDelayMicroseconds: Int = 3_000
    /// SQLite: an event loop that read a command commits it itself, as a group of one, when
    /// the writer is idle, recent commits took at most this many microseconds on average and
    /// commands arrive at least twice that far apart (`StorageWriter.enqueue(_:mayCommitInline:)`):
    /// at a low rate, a wake-up of the writer and one of the event loop fewer per command.
    /// It bounds how long a loop is kept from its other connections. 0: never. Needs the
    /// group-commit spacing (gaps between commands are measured up to it).
    package var inlineCommitMicroseconds: Int = 2_000
    /// How many waiting commands make a group worth committing at once (at most `maxBatchSize` count).
    package var groupCommitTarget: Int = 64
    /// Feed entries the writer gathers in `feed_tail` before it moves them into the feeds in
    /// one statement (SQLite): larger spreads the cost of touching each feed's page over
    /// more messages, and makes every feed read scan a longer tail (it has no index).
    package var feedTailRows: Int = Self.defaultFeedTailRows
    /// The default of `feedTailRows`.
    package static let defaultFeedTailRows = 1_024
    /// SQLite: a group of at least this many commands appends its feed entries to the feeds
    /// directly instead of the tail (its entries already share each feed's page).
    package var feedDirectGroupCommands: Int = Self.defaultFeedDirectGroupCommands
    /// The default of `feedDirectGroupCommands`.
    package static let defaultFeedDirectGroupCommands = 64

    /// SQLite: messages waiting for the full-text index that make the writer index them at
    /// the end of a group (`SearchBacklog`); searches index what waits first, whatever this is.
    package var searchBacklogMessages: Int = 256
    /// SQLite: the longest a message waits for the full-text index when the writer commits
    /// anything (`SearchBacklog`).
    package var searchBacklogMilliseconds: Int = 1_000

    package init(
        writeQueueCapacity: Int = 10_000, maxBatchSize: Int = 512, readerCount: Int = 4,
        pageCacheKiB: Int = 64 * 1_024, mmapBytes: Int = 1 << 30
    ) {
        self.writeQueueCapacity = writeQueueCapacity
        self.maxBatchSize = maxBatchSize
        self.readerCount = readerCount
        self.pageCacheKiB = pageCacheKiB
        self.mmapBytes = mmapBytes
    }

    package func validate() throws(StorageError) {
        guard (1...1_000_000).contains(writeQueueCapacity) else {
            throw StorageError(.invalidArgument, "writeQueueCapacity must be 1...1,000,000, got \(writeQueueCapacity)")
        }
        guard (1...100_000).contains(maxBatchSize) else {
            throw StorageError(.invalidArgument, "maxBatchSize must be 1...100,000, got \(maxBatchSize)")
        }
        guard (1...64).contains(readerCount) else {
            throw StorageError(.invalidArgument, "readerCount must be 1...64, got \(readerCount)")
        }
        guard (256...(16 * 1_024 * 1_024)).contains(pageCacheKiB) else {
            throw StorageError(.invalidArgument, "pageCacheKiB must be 256...16,777,216 (16 GiB), got \(pageCacheKiB)")
        }
        guard (0...(1 << 40)).contains(mmapBytes) else {
            throw StorageError(.invalidArgument, "mmapBytes must be 0...2^40, got \(mmapBytes)")
        }
        guard (256...pageCacheKiB).contains(readerPageCacheKiB) else {
            throw StorageError(
                .invalidArgument,
                "readerPageCacheKiB must be 256...pageCacheKiB (\(pageCacheKiB)), got \(readerPageCacheKiB)")
        }
        guard (0...(1 << 40)).contains(readerMmapBytes) else {
            throw StorageError(.invalidArgument, "readerMmapBytes must be 0...2^40, got \(readerMmapBytes)")
        }
        guard (0...1_000_000).contains(groupCommitDelayMicroseconds) else {
            throw StorageError(
                .invalidArgument,
                "groupCommitDelayMicroseconds must be 0...1,000,000, got \(groupCommitDelayMicroseconds)")
        }
        guard (0...100_000).contains(inlineCommitMicroseconds) else {
            throw StorageError(
                .invalidArgument, "inlineCommitMicroseconds must be 0...100,000, got \(inlineCommitMicroseconds)")
        }
        guard (1...100_000).contains(groupCommitTarget) else {
            throw StorageError(.invalidArgument, "groupCommitTarget must be 1...100,000, got \(groupCommitTarget)")
        }
        guard (1...100_000).contains(feedDirectGroupCommands) else {
            throw StorageError(
                .invalidArgument, "feedDirectGroupCommands must be 1...100,000, got \(feedDirectGroupCommands)")
        }
        guard (1...100_000).contains(feedTailRows) else {
            throw StorageError(.invalidArgument, "feedTailRows must be 1...100,000, got \(feedTailRows)")
        }
        guard (1...1_000_000).contains(searchBacklogMessages) else {
            throw StorageError(
                .invalidArgument, "searchBacklogMessages must be 1...1,000,000, got \(searchBacklogMessages)")
        }
        guard (0...86_400_000).contains(searchBacklogMilliseconds) else {
            throw StorageError(
                .invalidArgument, "searchBacklogMilliseconds must be 0...86,400,000, got \(searchBacklogMilliseconds)")
        }
    }
}

/// Limits on values the storage accepts, beyond the model's own `Limits`.
package enum StorageLimits {
    /// The longest device id, in UTF-8 bytes.
    package static let maxDeviceIDBytes = 256
    /// The longest nonce, in UTF-8 bytes.
    package static let maxNonceBytes = 256
    /// The largest caller-encoded blob (feed payload, idempotency result, replication op).
    package static let maxBlobBytes = 4 * 1_024 * 1_024
    /// The most entries one feed read or history query returns.
    package static let maxPageSize = 10_000
}
