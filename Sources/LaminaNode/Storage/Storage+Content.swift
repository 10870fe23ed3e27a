import Foundation
import GRDB
import LaminaModel

/// The state of a rich content upload.
public enum UploadState: UInt8, Hashable, Sendable, CaseIterable {
    case awaitingUpload = 0
    case uploading = 1
    case complete = 2
    case failed = 3
}

/// A rich content upload as stored; the bytes live in a file under the data directory.
public struct ContentUpload: Hashable, Sendable {
    public var id: ContentID
    public var owner: UserID
    public var declaredSize: UInt64
    public var sha256: [UInt8]
    public var receivedBytes: UInt64
    public var state: UploadState
    public var createdAt: Timestamp

    public init(id: ContentID, owner: UserID, declaredSize: UInt64, sha256: [UInt8], receivedBytes: UInt64 = 0, state: UploadState = .awaitingUpload, createdAt: Timestamp) {
        self.id = id
        self.owner = owner
        self.declaredSize = declaredSize
        self.sha256 = sha256
        self.receivedBytes = receivedBytes
        self.state = state
        self.createdAt = createdAt
    }
}

extension StorageTransaction {
    /// Records a new upload. Refuses an existing content id, a size over `Limits.maxPartBytes`
    /// and a digest that is not 32 bytes.
    public func createUpload(_ upload: ContentUpload) throws(StorageError) {
        guard upload.declaredSize <= Limits.maxPartBytes else {
            throw StorageError(.invalidArgument, "content is at most \(Limits.maxPartBytes) bytes, declared \(upload.declaredSize)")
        }
        guard upload.sha256.count == 32 else { throw StorageError(.invalidArgument, "a content digest is 32 bytes, got \(upload.sha256.count)") }
        guard upload.receivedBytes <= upload.declaredSize else { throw StorageError(.invalidArgument, "received more than declared") }
        try db.run(
            """
            INSERT OR IGNORE INTO content_uploads (content_id, owner, declared_size, sha256, received_bytes, state, created_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [Columns.blob(upload.id.uuid), upload.owner.rawValue, Int64(upload.declaredSize), Data(upload.sha256),
             Int64(upload.receivedBytes), Int64(upload.state.rawValue), upload.createdAt.millisecondsSince1970, upload.createdAt.millisecondsSince1970]
        )
        guard db.changesCount == 1 else { throw StorageError(.alreadyExists, "content \(upload.id) exists") }
    }

    /// Records an upload's progress and state. `receivedBytes` may not exceed the declared size.
    public func updateUpload(_ id: ContentID, receivedBytes: UInt64, state: UploadState, at time: Timestamp) throws(StorageError) {
        guard let upload = try read.upload(id) else { throw StorageError(.notFound, "no upload \(id)") }
        guard receivedBytes <= upload.declaredSize else {
            throw StorageError(.invalidArgument, "upload \(id) declared \(upload.declaredSize) bytes, \(receivedBytes) received")
        }
        try db.run(
            "UPDATE content_uploads SET received_bytes = ?, state = ?, updated_at = ? WHERE content_id = ?",
            [Int64(receivedBytes), Int64(state.rawValue), time.millisecondsSince1970, Columns.blob(id.uuid)]
        )
    }
}

extension StorageReader {
    /// An upload by content id.
    public func upload(_ id: ContentID) throws(StorageError) -> ContentUpload? {
        guard let row = try db.row("SELECT * FROM content_uploads WHERE content_id = ?", [Columns.blob(id.uuid)]) else { return nil }
        let size: Int64 = row["declared_size"]
        let received: Int64 = row["received_bytes"]
        let stateRaw: Int64 = row["state"]
        guard let state = UploadState(rawValue: UInt8(truncatingIfNeeded: stateRaw)), size >= 0, received >= 0 else {
            throw StorageError(.corrupt, "upload \(id) has a bad state or size")
        }
        return ContentUpload(
            id: id, owner: try Columns.user(row, "owner"), declaredSize: UInt64(size), sha256: try Columns.bytes(row, "sha256"),
            receivedBytes: UInt64(received), state: state, createdAt: try Columns.timestamp(row, "created_at")
        )
    }
}
