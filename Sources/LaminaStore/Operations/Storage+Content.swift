import Foundation
import LaminaModel

/// The state of a rich content upload.
package enum UploadState: UInt8, Hashable, Sendable, CaseIterable {
    case awaitingUpload = 0
    case uploading = 1
    case complete = 2
    case failed = 3
}

/// A rich content upload as stored; the bytes live in a file under the data directory.
package struct ContentUpload: Hashable, Sendable {
    package var id: ContentID
    package var owner: UserID
    package var declaredSize: UInt64
    package var sha256: [UInt8]
    package var receivedBytes: UInt64
    package var state: UploadState
    package var createdAt: Timestamp

    package init(
        id: ContentID, owner: UserID, declaredSize: UInt64, sha256: [UInt8], receivedBytes: UInt64 = 0,
        state: UploadState = .awaitingUpload, createdAt: Timestamp
    ) {
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
    package func createUpload(_ upload: ContentUpload) throws(StorageError) {
        guard upload.declaredSize <= Limits.maxPartBytes else {
            throw StorageError(
                .invalidArgument, "content is at most \(Limits.maxPartBytes) bytes, declared \(upload.declaredSize)")
        }
        guard upload.sha256.count == 32 else {
            throw StorageError(.invalidArgument, "a content digest is 32 bytes, got \(upload.sha256.count)")
        }
        guard upload.receivedBytes <= upload.declaredSize else {
            throw StorageError(.invalidArgument, "received more than declared")
        }
        try db.run(
            """
            INSERT OR IGNORE INTO content_uploads (content_id, owner, declared_size, sha256, received_bytes, state, created_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                Columns.blob(upload.id.uuid), upload.owner.rawValue, Int64(upload.declaredSize), Data(upload.sha256),
                Int64(upload.receivedBytes), Int64(upload.state.rawValue), upload.createdAt.millisecondsSince1970,
                upload.createdAt.millisecondsSince1970,
            ]
        )
        guard db.changesCount == 1 else { throw StorageError(.alreadyExists, "content \(upload.id) exists") }
    }

    /// Records an upload's progress and state. `receivedBytes` may not exceed the declared size.
    package func updateUpload(_ id: ContentID, receivedBytes: UInt64, state: UploadState, at time: Timestamp)
        throws(StorageError)
    {
        guard let upload = try read.upload(id) else { throw StorageError(.notFound, "no upload \(id)") }
        guard receivedBytes <= upload.declaredSize else {
            throw StorageError(
                .invalidArgument, "upload \(id) declared \(upload.declaredSize) bytes, \(receivedBytes) received")
        }
        try db.run(
            "UPDATE content_uploads SET received_bytes = ?, state = ?, updated_at = ? WHERE content_id = ?",
            [Int64(receivedBytes), Int64(state.rawValue), time.millisecondsSince1970, Columns.blob(id.uuid)]
        )
    }
}

extension StorageTransaction {
    /// Records an upload complete with the digest of its bytes (content uploaded through the
    /// Server API, whose digest is known only once every byte is there).
    package func completeUpload(_ id: ContentID, sha256: [UInt8], at time: Timestamp) throws(StorageError) {
        guard let upload = try read.upload(id) else { throw StorageError(.notFound, "no upload \(id)") }
        guard sha256.count == 32 else {
            throw StorageError(.invalidArgument, "a content digest is 32 bytes, got \(sha256.count)")
        }
        try db.run(
            "UPDATE content_uploads SET received_bytes = ?, state = ?, sha256 = ?, updated_at = ? WHERE content_id = ?",
            [
                Int64(upload.declaredSize), Int64(UploadState.complete.rawValue), Data(sha256),
                time.millisecondsSince1970,
                Columns.blob(id.uuid),
            ]
        )
    }
}

extension StorageReader {
    /// An upload by content id.
    package func upload(_ id: ContentID) throws(StorageError) -> ContentUpload? {
        guard let row = try db.row("SELECT * FROM content_uploads WHERE content_id = ?", [Columns.blob(id.uuid)]) else {
            return nil
        }
        let size: Int64 = row["declared_size"]
        let received: Int64 = row["received_bytes"]
        let stateRaw: Int64 = row["state"]
        guard let state = UploadState(rawValue: UInt8(truncatingIfNeeded: stateRaw)), size >= 0, received >= 0 else {
            throw StorageError(.corrupt, "upload \(id) has a bad state or size")
        }
        return ContentUpload(
            id: id, owner: try Columns.user(row, "owner"), declaredSize: UInt64(size),
            sha256: try Columns.bytes(row, "sha256"),
            receivedBytes: UInt64(received), state: state, createdAt: try Columns.timestamp(row, "created_at")
        )
    }
}

/// A message that references a content, with what download authorization needs.
package struct ContentReferenceRecord: Hashable, Sendable {
    package var message: MessageID
    package var conversation: ConversationID
    package var position: MessagePosition
    /// The message, or its conversation, was deleted for all participants.
    package var isDeleted: Bool
}

extension StorageTransaction {
    /// Deletes an upload's record (its files are the caller's), and the links of channel
    /// messages to it (a channel message's content is gone with it). True if there was one.
    @discardableResult
    package func deleteUpload(_ id: ContentID) throws(StorageError) -> Bool {
        try db.run("DELETE FROM content_uploads WHERE content_id = ?", [Columns.blob(id.uuid)])
        let deleted = db.changesCount == 1
        try unlinkChannelContent(id)
        return deleted
    }
}

extension StorageReader {
    /// The bytes the user's uploads hold, `excluding` some: complete ones by their size,
    /// incomplete ones by the bytes received (the stored part of the quota's measure).
    package func contentBytes(of owner: UserID, excluding: Set<ContentID> = []) throws(StorageError) -> UInt64 {
        let skip =
            excluding.isEmpty
            ? "" : " AND content_id NOT IN (\(Array(repeating: "?", count: excluding.count).joined(separator: ", ")))"
        var arguments: [any DatabaseValueConvertible] = [Int64(UploadState.complete.rawValue), owner.rawValue]
        arguments += excluding.map { Columns.blob($0.uuid) }
        let row = try db.row(
            "SELECT COALESCE(SUM(CASE WHEN state = ? THEN declared_size ELSE received_bytes END), 0) AS total FROM content_uploads WHERE owner = ?\(skip)",
            StatementArguments(arguments.map { $0.databaseValue }))
        let total: Int64 = row?["total"] ?? 0
        return UInt64(max(0, total))
    }

    /// Every message that references the content, deleted or not.
    package func contentReferences(_ id: ContentID) throws(StorageError) -> [ContentReferenceRecord] {
        let rows = try db.rows(
            """
            SELECT m.id, m.conversation_id, m.pos_physical, m.pos_logical, m.pos_node, m.deleted, c.deleted AS conversation_deleted
            FROM message_parts p JOIN messages m ON m.id = p.message_id JOIN conversations c ON c.id = m.conversation_id
            WHERE p.content_id = ?
            """,
            [Columns.blob(id.uuid)])
        var out: [ContentReferenceRecord] = []
        for row in rows {
            let messageDeleted: Bool = row["deleted"]
            let conversationDeleted: Bool = row["conversation_deleted"]
            out.append(
                ContentReferenceRecord(
                    message: MessageID(uuid: try Columns.uuid(row["id"], column: "id")),
                    conversation: ConversationID(
                        uuid: try Columns.uuid(row["conversation_id"], column: "conversation_id")),
                    position: try Columns.hlc(row, "pos"), isDeleted: messageDeleted || conversationDeleted))
        }
        return out
    }

    /// Whether `user` may see a message that references the content (SPEC §6.1 visibility: a
    /// member sees all of the conversation, a removed participant what was positioned before the
    /// removal; messages deleted for all participants do not count), or is a member of a live
    /// channel whose message references it (SPEC §6.8: members only).
    package func maySeeContent(_ id: ContentID, user: UserID) throws(StorageError) -> Bool {
        for reference in try contentReferences(id) where !reference.isDeleted {
            guard let state = try participantState(of: user, in: reference.conversation) else { continue }
            if state.isMember || reference.position < state.since { return true }
        }
        return try maySeeChannelContent(id, user: user)
    }

    /// Incomplete uploads not written since `cutoff`. Content a message references is never
    /// abandoned: it is content a peer holds and this node fetches (``contentToFetch(limit:)``).
    package func abandonedUploads(notWrittenSince cutoff: Timestamp, limit: Int) throws(StorageError) -> [ContentID] {
        try contentIDs(
            """
            SELECT u.content_id FROM content_uploads u WHERE u.state <> ? AND u.updated_at < ?
            AND NOT EXISTS (SELECT 1 FROM message_parts p WHERE p.content_id = u.content_id)
            AND NOT EXISTS (SELECT 1 FROM channel_content cc WHERE cc.content_id = u.content_id) LIMIT ?
            """,
            [Int64(UploadState.complete.rawValue), cutoff.millisecondsSince1970, limit])
    }

    /// Complete content that no message references, completed before `cutoff`.
    package func unreferencedContent(completedBefore cutoff: Timestamp, limit: Int) throws(StorageError) -> [ContentID]
    {
        try contentIDs(
            """
            SELECT u.content_id FROM content_uploads u WHERE u.state = ? AND u.updated_at < ?
            AND NOT EXISTS (SELECT 1 FROM message_parts p WHERE p.content_id = u.content_id)
            AND NOT EXISTS (SELECT 1 FROM channel_content cc WHERE cc.content_id = u.content_id) LIMIT ?
            """,
            [Int64(UploadState.complete.rawValue), cutoff.millisecondsSince1970, limit])
    }

    /// Content referenced only by messages deleted for all participants (or in deleted
    /// conversations) and by messages of deleted channels.
    package func contentOfDeletedMessages(limit: Int) throws(StorageError) -> [ContentID] {
        try contentIDs(
            """
            SELECT u.content_id FROM content_uploads u
            WHERE (EXISTS (SELECT 1 FROM message_parts p WHERE p.content_id = u.content_id)
                OR EXISTS (SELECT 1 FROM channel_content cc WHERE cc.content_id = u.content_id))
            AND NOT EXISTS (
                SELECT 1 FROM message_parts p JOIN messages m ON m.id = p.message_id JOIN conversations c ON c.id = m.conversation_id
                WHERE p.content_id = u.content_id AND m.deleted = 0 AND c.deleted = 0)
            AND NOT EXISTS (
                SELECT 1 FROM channel_content cc JOIN channels ch ON ch.id = cc.channel_id
                WHERE cc.content_id = u.content_id AND ch.deleted = 0)
            LIMIT ?
            """,
            [limit])
    }

    /// Every upload record (start-up recovery of the content files).
    package func allUploads() throws(StorageError) -> [ContentUpload] {
        var out: [ContentUpload] = []
        for id in try contentIDs("SELECT content_id FROM content_uploads", []) {
            if let upload = try upload(id) { out.append(upload) }
        }
        return out
    }

    private func contentIDs(_ sql: String, _ arguments: StatementArguments) throws(StorageError) -> [ContentID] {
        var out: [ContentID] = []
        for row in try db.rows(sql, arguments) {
            out.append(ContentID(uuid: try Columns.uuid(row["content_id"], column: "content_id")))
        }
        return out
    }
}
