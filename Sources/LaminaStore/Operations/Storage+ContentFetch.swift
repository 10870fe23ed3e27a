import Foundation
import LaminaModel

/// Rich content a replicated message references and this node does not hold yet: the node
/// fetches it from a peer (SPEC §6.5, CONTENT.md §9). Such content has an upload record like any
/// other (owner: the message's sender), incomplete while it is fetched; a client's own upload
/// is never referenced while incomplete, so "incomplete and referenced" names exactly the
/// content to fetch.
package struct ContentFetch: Hashable, Sendable {
    package var upload: ContentUpload
    /// The node that accepted a message referencing it (where the sender uploaded it), when known.
    package var origin: NodeID?
}

extension StorageTransaction {
    /// Records content that a replicated message references, when this node has no record of it
    /// (to be fetched from a peer). Returns true when it made one. An existing record stays as
    /// it is (content of the same id uploaded here, or an earlier reference).
    @discardableResult
    package func expectReplicatedContent(_ reference: ContentReference, owner: UserID, at time: Timestamp)
        throws(StorageError) -> Bool
    {
        guard try read.upload(reference.id) == nil else { return false }
        try createUpload(
            ContentUpload(
                id: reference.id, owner: owner, declaredSize: reference.size, sha256: reference.sha256,
                receivedBytes: 0,
                state: .awaitingUpload, createdAt: time))
        return true
    }
}

extension StorageReader {
    /// Content to fetch from peers: incomplete uploads a message references, at most `limit`
    /// (an index range on the uploads' state; incomplete uploads are few).
    package func contentToFetch(limit: Int) throws(StorageError) -> [ContentFetch] {
        try checkLimit(limit)
        let rows = try db.rows(
            """
            SELECT u.content_id,
                COALESCE(
                    (SELECT m.pos_node FROM message_parts p JOIN messages m ON m.id = p.message_id WHERE p.content_id = u.content_id LIMIT 1),
                    (SELECT m.pos_node FROM channel_content cc JOIN channel_messages m ON m.id = cc.message_id WHERE cc.content_id = u.content_id LIMIT 1)
                ) AS origin
            FROM content_uploads u
            WHERE u.state IN (?, ?) AND (EXISTS (SELECT 1 FROM message_parts p WHERE p.content_id = u.content_id)
                OR EXISTS (SELECT 1 FROM channel_content cc WHERE cc.content_id = u.content_id))
            LIMIT ?
            """,
            [Int64(UploadState.awaitingUpload.rawValue), Int64(UploadState.uploading.rawValue), limit])
        var out: [ContentFetch] = []
        for row in rows {
            let id = ContentID(uuid: try Columns.uuid(row["content_id"], column: "content_id"))
            guard let upload = try upload(id) else { continue }
            let origin: Int64? = row["origin"]
            out.append(ContentFetch(upload: upload, origin: origin.map { Columns.node($0) }))
        }
        return out
    }

    /// Whether a message this node holds, not deleted for all participants, or a message of a
    /// live channel references the content (a peer may fetch only such content).
    package func isContentReferenced(_ id: ContentID) throws(StorageError) -> Bool {
        if try contentReferences(id).contains(where: { !$0.isDeleted }) { return true }
        return try channelContentReferences(id).contains { !$0.isDeleted }
    }

}
