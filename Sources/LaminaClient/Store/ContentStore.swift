import Foundation
import GRDB
import LaminaModel

/// A rich-content part waiting to be downloaded.
public struct PendingDownload: Hashable, Sendable {
    public var part: MessagePartID
    public var mimeType: MIMEType
    public var reference: ContentReference
}

/// The store's bookkeeping of rich content: transfer status, files under the content
/// directory, last access times, purges.
extension LocalStore {
    /// The file that holds (or will hold) a part's content, under the content directory.
    public func contentFileURL(for part: MessagePartID) -> URL {
        location.contentDirectory.appendingPathComponent(Self.contentFileName(part))
    }

    static func contentFileName(_ part: MessagePartID) -> String {
        "\(part.message.uuid.uuidString.lowercased())-\(part.part.uuidString.lowercased())"
    }

    private static func partKey(_ part: MessagePartID) -> StatementArguments {
        [StoreCoding.blob(part.message), StoreCoding.blob(part.part)]
    }

    private static func partRow(_ db: Database, _ part: MessagePartID) throws -> Row {
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT * FROM part WHERE message_id = ? AND part_id = ?", arguments: Self.partKey(part))
        else {
            throw ClientError(.notFound, "part \(part) is not in the local store")
        }
        return row
    }

    /// Rich-content parts ready for download that the settings say download by themselves
    /// (purged content never does), oldest message first (conversations' messages, then
    /// channels'), at most `limit`.
    public func pendingAutoDownloads(settings: ContentSettings, limit: Int = 1_000) throws(ClientError)
        -> [PendingDownload]
    {
        try read(Self.pendingAutoDownloadsBody(settings: settings, limit: try Self.checkedPendingLimit(limit)))
    }

    /// As `pendingAutoDownloads`, through GRDB's async API (the content manager's tasks).
    func pendingAutoDownloadsAsync(settings: ContentSettings, limit: Int = 1_000) async throws(ClientError)
        -> [PendingDownload]
    {
        try await readAsync(
            Self.pendingAutoDownloadsBody(settings: settings, limit: try Self.checkedPendingLimit(limit)))
    }

    private static func checkedPendingLimit(_ limit: Int) throws(ClientError) -> Int {
        guard (1...10_000).contains(limit) else {
            throw ClientError(.invalidSetting, "limit is 1...10,000, not \(limit)")
        }
        return limit
    }

    private static func pendingAutoDownloadsBody(settings: ContentSettings, limit: Int)
        -> @Sendable (Database) throws -> [PendingDownload]
    {
        { db in
            var out: [PendingDownload] = []
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT part.* FROM part LEFT JOIN message ON message.id = part.message_id
                    LEFT JOIN channel_message ON channel_message.id = part.message_id
                    WHERE part.transfer_status = ? AND part.purged = 0 AND part.content_id IS NOT NULL
                    ORDER BY message.rowid IS NULL, message.rowid, channel_message.rowid, part.idx
                    """, arguments: [TransferStatus.readyForDownload.rawValue])
            for row in rows {
                let mime = try StoreCoding.mime(row["mime_type"])
                let size = UInt64(row["content_size"] as Int64)
                guard ContentPolicy.shouldAutoDownload(mimeType: mime, size: size, wasPurged: false, settings: settings)
                else { continue }
                out.append(try Self.pending(row, mime: mime))
                if out.count == limit { break }
            }
            return out
        }
    }

    private static func pending(_ row: Row, mime: MIMEType) throws -> PendingDownload {
        guard let contentID = try StoreCoding.optionalUUID(row, "content_id"), let sha = row["content_sha256"] as Data?
        else {
            throw ClientError(.contentUnavailable, "the part has no content reference")
        }
        let part = MessagePartID(
            message: MessageID(uuid: try StoreCoding.uuid(row, "message_id")),
            part: try StoreCoding.uuid(row, "part_id"))
        return PendingDownload(
            part: part, mimeType: mime,
            reference: ContentReference(
                id: ContentID(uuid: contentID), size: UInt64(row["content_size"] as Int64), sha256: [UInt8](sha)))
    }

    /// Marks a rich part as downloading and returns what to fetch. Fails unless it is ready
    /// for download (inline, local, already downloading or complete parts are not).
    public func beginDownload(of part: MessagePartID) throws(ClientError) -> PendingDownload {
        try write(Self.beginDownloadBody(part))
    }

    /// As `beginDownload`, through GRDB's async API.
    func beginDownloadAsync(of part: MessagePartID) async throws(ClientError) -> PendingDownload {
        try await writeAsync(Self.beginDownloadBody(part))
    }

    private static func beginDownloadBody(_ part: MessagePartID) -> @Sendable (WriteContext) throws -> PendingDownload {
        { ctx in
            let row = try Self.partRow(ctx.db, part)
            guard row["transfer_status"] as Int == TransferStatus.readyForDownload.rawValue else {
                let status = TransferStatus(rawValue: row["transfer_status"]) ?? .complete
                throw ClientError(.contentUnavailable, "part \(part) is \(status), not ready for download")
            }
            try ctx.db.execute(
                sql: "UPDATE part SET transfer_status = ? WHERE message_id = ? AND part_id = ?",
                arguments: [TransferStatus.downloading.rawValue] + partKey(part))
            return try pending(row, mime: StoreCoding.mime(row["mime_type"]))
        }
    }

    /// Puts a failed download back to ready for download.
    public func failDownload(of part: MessagePartID) throws(ClientError) {
        try write(Self.failDownloadBody(part))
    }

    /// As `failDownload`, through GRDB's async API.
    func failDownloadAsync(of part: MessagePartID) async throws(ClientError) {
        try await writeAsync(Self.failDownloadBody(part))
    }

    private static func failDownloadBody(_ part: MessagePartID) -> @Sendable (WriteContext) throws -> Void {
        { ctx in
            try ctx.db.execute(
                sql: "UPDATE part SET transfer_status = ? WHERE message_id = ? AND part_id = ? AND transfer_status = ?",
                arguments: [TransferStatus.readyForDownload.rawValue] + partKey(part) + [
                    TransferStatus.downloading.rawValue
                ])
        }
    }

    /// Records a finished download: the file at `contentFileURL(for:)` must hold exactly the
    /// referenced size. Then purges least-recently-accessed content if over `diskCapacity`.
    /// Returns the parts purged.
    @discardableResult
    public func finishDownload(
        of part: MessagePartID, autoDownloaded: Bool, diskCapacity: UInt64, now: Timestamp = .now()
    ) throws(ClientError) -> [MessagePartID] {
        try write(
            Self.finishDownloadBody(
                part, fileSize: contentFileSize(part), autoDownloaded: autoDownloaded, diskCapacity: diskCapacity,
                now: now)
        ).get()
    }

    /// As `finishDownload`, through GRDB's async API (the record and the purge in one transaction).
    @discardableResult
    func finishDownloadAsync(
        of part: MessagePartID, autoDownloaded: Bool, diskCapacity: UInt64, now: Timestamp = .now()
    ) async throws(ClientError) -> [MessagePartID] {
        try await writeAsync(
            Self.finishDownloadBody(
                part, fileSize: contentFileSize(part), autoDownloaded: autoDownloaded, diskCapacity: diskCapacity,
                now: now)
        ).get()
    }

    private func contentFileSize(_ part: MessagePartID) -> UInt64? {
        (try? FileManager.default.attributesOfItem(atPath: contentFileURL(for: part).path)[.size] as? NSNumber)?
            .uint64Value
    }

    private static func finishDownloadBody(
        _ part: MessagePartID, fileSize: UInt64?, autoDownloaded: Bool, diskCapacity: UInt64,
        now: Timestamp
    ) -> @Sendable (WriteContext) throws -> Result<[MessagePartID], ClientError> {
        { ctx in
            let row = try Self.partRow(ctx.db, part)
            guard row["transfer_status"] as Int == TransferStatus.downloading.rawValue else {
                throw ClientError(.contentUnavailable, "part \(part) is not downloading")
            }
            let expected = UInt64(row["content_size"] as Int64? ?? 0)
            guard fileSize == expected else {
                // Put back for a later try: committed, and the error reported after the commit.
                try ctx.db.execute(
                    sql: "UPDATE part SET transfer_status = ? WHERE message_id = ? AND part_id = ?",
                    arguments: [TransferStatus.readyForDownload.rawValue] + partKey(part))
                return .failure(
                    ClientError(
                        .contentUnavailable,
                        "the downloaded file of \(part) has \(fileSize.map(String.init) ?? "no") bytes, expected \(expected)"
                    ))
            }
            try ctx.db.execute(
                sql: """
                    UPDATE part SET transfer_status = ?, local_path = ?, local_size = ?, last_access = ?, auto_downloaded = ?, purged = 0
                    WHERE message_id = ? AND part_id = ?
                    """,
                arguments: [
                    TransferStatus.complete.rawValue, contentFileName(part), Int64(clamping: expected),
                    now.millisecondsSince1970, autoDownloaded,
                ] + partKey(part))
            return .success(try purgeOver(ctx, capacity: diskCapacity))
        }
    }

    /// A part's content where it is now, recording the access for the LRU purge order.
    public func accessContent(of part: MessagePartID, now: Timestamp = .now()) throws(ClientError) -> LocalContent {
        try write { ctx in
            let row = try Self.partRow(ctx.db, part)
            if let bytes = row["inline_bytes"] as Data? { return .inline([UInt8](bytes)) }
            guard let path = row["local_path"] as String? else {
                return .unavailable(TransferStatus(rawValue: row["transfer_status"]) ?? .readyForDownload)
            }
            try ctx.db.execute(
                sql: "UPDATE part SET last_access = ? WHERE message_id = ? AND part_id = ?",
                arguments: [now.millisecondsSince1970] + Self.partKey(part))
            return .file(location.contentDirectory.appendingPathComponent(path))
        }
    }

    /// Deletes a part's downloaded content from this device (the node keeps it). It will not
    /// download again by itself. Returns false when there was nothing to purge.
    @discardableResult
    public func purgeContent(of part: MessagePartID) throws(ClientError) -> Bool {
        try write { ctx in try Self.purge(ctx, part) }
    }

    private static func purge(_ ctx: WriteContext, _ part: MessagePartID) throws -> Bool {
        let row = try Self.partRow(ctx.db, part)
        guard row["inline_bytes"] as Data? == nil, let path = row["local_path"] as String?,
            row["transfer_status"] as Int == TransferStatus.complete.rawValue
        else { return false }
        try ctx.db.execute(
            sql: """
                UPDATE part SET local_path = NULL, local_size = 0, transfer_status = ?, purged = 1
                WHERE message_id = ? AND part_id = ?
                """, arguments: [TransferStatus.readyForDownload.rawValue] + Self.partKey(part))
        ctx.retire(localPath: path)
        return true
    }

    /// Cached content that may be purged (complete, with a file), for the LRU policy.
    public func cachedContent() throws(ClientError) -> [CachedContent] {
        try read { db in try Self.cachedContent(db) }
    }

    private static func cachedContent(_ db: Database) throws -> [CachedContent] {
        try Row.fetchAll(
            db,
            sql: """
                SELECT message_id, part_id, local_size, last_access FROM part
                WHERE local_path IS NOT NULL AND transfer_status = ?
                """, arguments: [TransferStatus.complete.rawValue]
        ).map { row in
            CachedContent(
                part: MessagePartID(
                    message: MessageID(uuid: try StoreCoding.uuid(row, "message_id")),
                    part: try StoreCoding.uuid(row, "part_id")),
                size: UInt64(row["local_size"] as Int64),
                lastAccess: Timestamp(millisecondsSince1970: row["last_access"] as Int64? ?? 0))
        }
    }

    /// Purges least-recently-accessed content until usage is at most 80% of `capacity`, when
    /// it is over it (0 = unlimited). Returns the parts purged, in purge order.
    @discardableResult
    public func enforceDiskCapacity(_ capacity: UInt64) throws(ClientError) -> [MessagePartID] {
        guard capacity > 0 else { return [] }
        return try write { ctx in try Self.purgeOver(ctx, capacity: capacity) }
    }

    /// The LRU purge of `enforceDiskCapacity`, inside a write.
    private static func purgeOver(_ ctx: WriteContext, capacity: UInt64) throws -> [MessagePartID] {
        guard capacity > 0 else { return [] }
        var purged: [MessagePartID] = []
        for item in ContentPolicy.purgePlan(try cachedContent(ctx.db), capacity: capacity)
        where try purge(ctx, item.part) {
            purged.append(item.part)
        }
        return purged
    }

    /// Bytes used on disk: content files (as recorded) and the database files.
    public func currentDiskUtilization() throws(ClientError) -> DiskUtilization {
        let content = try read { db in
            try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(local_size), 0) FROM part WHERE local_path IS NOT NULL")
                ?? 0
        }
        var database: UInt64 = 0
        for suffix in ["", "-wal", "-shm"] {
            let path = location.databaseURL.path + suffix
            if let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.uint64Value {
                database += size
            }
        }
        return DiskUtilization(contentBytes: UInt64(max(0, content)), databaseBytes: database)
    }
}
