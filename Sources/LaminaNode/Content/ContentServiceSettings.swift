import Foundation
import LaminaModel

/// The node's rich content settings (Protocol/CONTENT.md §7); every one configurable by flag
/// and JSON config (`content` object).
public struct ContentServiceSettings: Sendable, Hashable, Codable {
    /// Where the content files live (`partial/` and `complete/` below it): nil for
    /// `<data-dir>/content` (the default). Several nodes on one PostgreSQL store must all point
    /// at one shared directory (`--content-dir`, config key `content.directory`), so content
    /// uploaded through one node downloads through any. Relative paths start at the working directory.
    public var directory: String?
    /// Per-user quota: the sum of the declared sizes of one user's uploads, complete or not.
    public var quotaBytes: UInt64 = 10 * 1024 * 1024 * 1024
    /// Uploads of one user in progress at once; more are `429 overloaded`.
    public var maxConcurrentUploadsPerUser = 8
    /// An incomplete upload not written for this long is collected.
    public var abandonedUploadAgeSeconds = 24 * 3600
    /// Complete content no message references, older than this, is collected.
    public var unreferencedContentAgeSeconds = 24 * 3600
    /// Interval of the periodic collection sweep (0 disables the timer; ``ContentService/collect(at:)`` still works).
    public var sweepIntervalSeconds = 600
    /// Bytes read from a file per download chunk.
    public var downloadChunkBytes = 128 * 1024
    /// Upload bytes buffered in memory (waiting for the disk) before the stream stops reading.
    public var uploadBufferBytes = 1024 * 1024
    /// During an upload, bytes written between two fsyncs that record progress (a crash loses at
    /// most this). Small on purpose: on ext4 (data=ordered) the store's own commit fsync waits for
    /// every dirty content byte, so unsynced content stalls message ACKs; measured with
    /// `lamina-bench content-transfer` (1 GiB upload): ACK p99 ~14 ms at 8 MiB, ~49 ms at
    /// 64 MiB, ~400 ms with no intermediate fsync, at the same or better upload MB/s.
    public var uploadSyncIntervalBytes = 8 * 1024 * 1024
    /// An upload stream that delivers no body byte for this long, while the node is ready to
    /// read, is answered `408 upload-stalled` (what it holds is kept; CONTENT.md §7).
    public var uploadStallTimeoutSeconds = 30
    /// Seconds a client is told to wait (`retry-after`) when over its concurrent uploads.
    public var retryAfterSeconds = 5

    public init() {}

    /// The content root: ``directory`` (absolute, or relative to the working directory) or
    /// `<dataDirectory>/content`.
    public func root(dataDirectory: URL) -> URL {
        guard let directory else { return dataDirectory.appendingPathComponent("content") }
        return URL(
            fileURLWithPath: directory, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
        )
        .standardizedFileURL
    }

    /// Refuses values outside their ranges, with a reason.
    public func validate() throws {
        func check(_ ok: Bool, _ reason: String) throws { if !ok { throw NodeServerError.configuration(reason) } }
        try check(
            directory.map { !$0.isEmpty && !$0.contains("\0") } ?? true, "content.directory must be a non-empty path")
        try check(maxConcurrentUploadsPerUser >= 1, "content.maxConcurrentUploadsPerUser must be at least 1")
        try check(abandonedUploadAgeSeconds >= 0, "content.abandonedUploadAgeSeconds must be at least 0")
        try check(unreferencedContentAgeSeconds >= 0, "content.unreferencedContentAgeSeconds must be at least 0")
        try check(sweepIntervalSeconds >= 0, "content.sweepIntervalSeconds must be at least 0")
        try check(
            (4096...4 * 1024 * 1024).contains(downloadChunkBytes), "content.downloadChunkBytes must be 4096...4194304")
        try check(
            (64 * 1024...64 * 1024 * 1024).contains(uploadBufferBytes),
            "content.uploadBufferBytes must be 65536...67108864")
        try check(uploadSyncIntervalBytes >= 1024 * 1024, "content.uploadSyncIntervalBytes must be at least 1048576")
        try check((1...3600).contains(uploadStallTimeoutSeconds), "content.uploadStallTimeoutSeconds must be 1...3600")
        try check(retryAfterSeconds >= 1, "content.retryAfterSeconds must be at least 1")
    }
}
