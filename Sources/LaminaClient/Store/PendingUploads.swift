import Foundation
import GRDB
import LaminaModel

/// A rich-content part of a message the local user is sending, whose bytes are not (all)
/// on the node yet.
public struct PendingUpload: Hashable, Sendable {
    public var part: MessagePartID
    public var mimeType: MIMEType
    public var reference: ContentReference
    /// The staged file under the content directory; nil when the part was stored without one.
    public var file: URL?
    /// Its send command's place in the outbox (uploads go in outbox order).
    public var sequence: Int64
}

extension OutboxCommandKind {
    /// Commands that may go out while an earlier message waits for its uploads: receipts
    /// about others' messages, which never depend on the local user's own messages.
    public static let overtakingUploads: Set<String> = [
        markRead.rawValue, deliveryReceipt.rawValue, markAllRead.rawValue,
    ]
}

/// The store's side of uploads: which parts wait, and their status as they go up.
extension LocalStore {
    private static func partKey(_ part: MessagePartID) -> StatementArguments {
        [StoreCoding.blob(part.message), StoreCoding.blob(part.part)]
    }

    /// Parts waiting for upload (awaiting or uploading) whose message's send is still in the
    /// outbox, in outbox order then part order, at most `limit`.
    public func pendingUploads(limit: Int = 1_000) throws(ClientError) -> [PendingUpload] {
        guard (1...10_000).contains(limit) else {
            throw ClientError(.invalidSetting, "limit is 1...10,000, not \(limit)")
        }
        return try read(pendingUploadsBody(limit: limit))
    }

    /// As ``pendingUploads(limit:)``, through GRDB's async API (the upload worker's).
    func pendingUploadsAsync(limit: Int) async throws(ClientError) -> [PendingUpload] {
        guard (1...10_000).contains(limit) else {
            throw ClientError(.invalidSetting, "limit is 1...10,000, not \(limit)")
        }
        return try await readAsync(pendingUploadsBody(limit: limit))
    }

    private func pendingUploadsBody(limit: Int) -> @Sendable (Database) throws -> [PendingUpload] {
        { [self] db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT part.*, outbox.seq AS outbox_seq FROM outbox JOIN part ON part.message_id = outbox.object_id
                    WHERE outbox.kind = ? AND part.transfer_status IN (?, ?) AND part.content_id IS NOT NULL
                    ORDER BY outbox.seq, part.idx LIMIT ?
                    """,
                arguments: [
                    OutboxCommandKind.sendMessage.rawValue, TransferStatus.awaitingUpload.rawValue,
                    TransferStatus.uploading.rawValue, limit,
                ]
            ).map { row in
                try pendingUpload(row)
            }
        }
    }

    /// The pending upload of one part, if it is waiting for upload.
    public func pendingUpload(of part: MessagePartID) throws(ClientError) -> PendingUpload? {
        try read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT part.*, outbox.seq AS outbox_seq FROM outbox JOIN part ON part.message_id = outbox.object_id
                    WHERE outbox.kind = ? AND part.message_id = ? AND part.part_id = ? AND part.transfer_status IN (?, ?) AND part.content_id IS NOT NULL
                    """,
                arguments: [OutboxCommandKind.sendMessage.rawValue] + Self.partKey(part)
                    + [TransferStatus.awaitingUpload.rawValue, TransferStatus.uploading.rawValue]
            ).map { try pendingUpload($0) }
        }
    }

    private func pendingUpload(_ row: Row) throws -> PendingUpload {
        guard let contentID = try StoreCoding.optionalUUID(row, "content_id"), let sha = row["content_sha256"] as Data?
        else {
            throw ClientError(.corruptRecord, "a rich part has no content reference")
        }
        let part = MessagePartID(
            message: MessageID(uuid: try StoreCoding.uuid(row, "message_id")),
            part: try StoreCoding.uuid(row, "part_id"))
        return PendingUpload(
            part: part, mimeType: try StoreCoding.mime(row["mime_type"]),
            reference: ContentReference(
                id: ContentID(uuid: contentID), size: UInt64(row["content_size"] as Int64), sha256: [UInt8](sha)),
            file: (row["local_path"] as String?).map { location.contentDirectory.appendingPathComponent($0) },
            sequence: row["outbox_seq"])
    }

    /// Marks a part as uploading (from awaiting upload).
    public func beginUpload(of part: MessagePartID) throws(ClientError) {
        try write(Self.beginUploadBody(part))
    }

    /// As ``beginUpload(of:)``, through GRDB's async API (the upload worker's).
    func beginUploadAsync(of part: MessagePartID) async throws(ClientError) {
        try await writeAsync(Self.beginUploadBody(part))
    }

    private static func beginUploadBody(_ part: MessagePartID) -> @Sendable (WriteContext) throws -> Void {
        { ctx in
            try ctx.db.execute(
                sql: "UPDATE part SET transfer_status = ? WHERE message_id = ? AND part_id = ? AND transfer_status = ?",
                arguments: [TransferStatus.uploading.rawValue] + Self.partKey(part) + [
                    TransferStatus.awaitingUpload.rawValue
                ])
        }
    }

    /// Records a part's content as completely on the node: its message may now be sent.
    /// Returns false when the part was not waiting for upload.
    @discardableResult
    public func finishUpload(of part: MessagePartID) throws(ClientError) -> Bool {
        try write(Self.finishUploadBody(part))
    }

    /// As ``finishUpload(of:)``, through GRDB's async API (the upload worker's).
    @discardableResult
    func finishUploadAsync(of part: MessagePartID) async throws(ClientError) -> Bool {
        try await writeAsync(Self.finishUploadBody(part))
    }

    private static func finishUploadBody(_ part: MessagePartID) -> @Sendable (WriteContext) throws -> Bool {
        { ctx in
            try ctx.db.execute(
                sql:
                    "UPDATE part SET transfer_status = ? WHERE message_id = ? AND part_id = ? AND transfer_status IN (?, ?)",
                arguments: [TransferStatus.complete.rawValue] + Self.partKey(part)
                    + [TransferStatus.awaitingUpload.rawValue, TransferStatus.uploading.rawValue])
            return ctx.db.changesCount > 0
        }
    }

    /// A part's transfer status, nil when the part is not in the store.
    public func transferStatus(of part: MessagePartID) throws(ClientError) -> TransferStatus? {
        try read { db in
            try Int.fetchOne(
                db, sql: "SELECT transfer_status FROM part WHERE message_id = ? AND part_id = ?",
                arguments: Self.partKey(part)
            )
            .flatMap(TransferStatus.init(rawValue:))
        }
    }
}
