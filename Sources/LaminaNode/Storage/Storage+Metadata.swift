import Foundation
import GRDB
import LaminaModel

/// One metadata key path's last write, as stored (for replication and inspection).
public struct MetadataEntry: Hashable, Sendable {
    public var path: MetadataKeyPath
    /// The value set, or nil for a deletion (a tombstone, kept so that older writes lose).
    public var value: MetadataValue?
    public var hlc: HLCTimestamp
    public var origin: NodeID
}

extension StorageTransaction {
    /// Sets (`value` non-nil) or deletes (`value` nil) the metadata at `path`. Last writer wins
    /// per key path by HLC: a write older than the stored one is ignored, whatever the order of
    /// arrival. Returns whether the write took effect. The resulting metadata is checked
    /// against the model's limits.
    @discardableResult
    public func setMetadata(_ value: MetadataValue?, at path: MetadataKeyPath, in conversation: ConversationID, hlc: HLCTimestamp, origin: NodeID) throws(StorageError) -> Bool {
        _ = try requireLive(conversation)
        let encoded = try value.map { (v) throws(StorageError) in try MetadataCoding.encode(v) }
        let applied = try upsertMetadata(Columns.blob(conversation.uuid), path.description, encoded, hlc: hlc, origin: origin)
        if applied, value != nil {
            let merged = try read.metadata(of: conversation)
            do { try merged.validate() } catch { throw error.storageError }
        }
        return applied
    }

    /// Merges one stored metadata row of another conversation into `conversation` (distinct merge).
    func mergeMetadataRow(_ row: Row, into conversation: Data) throws(StorageError) {
        let value: Data? = row["value"]
        _ = try upsertMetadata(conversation, row["key_path"], value, hlc: Columns.hlc(row, "hlc"), origin: Columns.node(row["origin_node"] as Int64))
    }

    private func upsertMetadata(_ conversation: Data, _ path: String, _ value: Data?, hlc: HLCTimestamp, origin: NodeID) throws(StorageError) -> Bool {
        let (p, l, n) = try Columns.hlc(hlc)
        try db.run(
            """
            INSERT INTO metadata_entries (conversation_id, key_path, value, origin_node, hlc_physical, hlc_logical, hlc_node)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (conversation_id, key_path) DO UPDATE SET
                value = excluded.value, origin_node = excluded.origin_node,
                hlc_physical = excluded.hlc_physical, hlc_logical = excluded.hlc_logical, hlc_node = excluded.hlc_node
            WHERE (excluded.hlc_physical, excluded.hlc_logical, excluded.hlc_node)
                > (metadata_entries.hlc_physical, metadata_entries.hlc_logical, metadata_entries.hlc_node)
            """,
            [conversation, path, value, Columns.node(origin), p, l, n]
        )
        return db.changesCount == 1
    }
}

extension StorageReader {
    /// A conversation's metadata: every key path's last write replayed in HLC order.
    public func metadata(of conversation: ConversationID) throws(StorageError) -> Metadata {
        var metadata = Metadata()
        for entry in try metadataEntries(of: conversation) {
            if let value = entry.value {
                metadata.set(value, at: entry.path)
            } else {
                metadata.remove(at: entry.path)
            }
        }
        return metadata
    }

    /// Every key path's last write (tombstones included), in HLC order.
    public func metadataEntries(of conversation: ConversationID) throws(StorageError) -> [MetadataEntry] {
        try db.rows(
            "SELECT * FROM metadata_entries WHERE conversation_id = ? ORDER BY hlc_physical, hlc_logical, hlc_node, key_path",
            [Columns.blob(conversation.uuid)]
        ).map { (row) throws(StorageError) -> MetadataEntry in
            let pathString: String = row["key_path"]
            let path: MetadataKeyPath
            do { path = try MetadataKeyPath(parsing: pathString) } catch { throw StorageError(.corrupt, "bad metadata key path '\(pathString)'") }
            let data: Data? = row["value"]
            return MetadataEntry(
                path: path,
                value: try data.map { (d) throws(StorageError) in try MetadataCoding.decode(d) },
                hlc: try Columns.hlc(row, "hlc"),
                origin: Columns.node(row["origin_node"] as Int64)
            )
        }
    }
}

/// Metadata values as JSON in a BLOB: a string, or an object of values.
enum MetadataCoding {
    static func encode(_ value: MetadataValue) throws(StorageError) -> Data {
        do {
            return try JSONSerialization.data(withJSONObject: plain(value), options: [.fragmentsAllowed, .sortedKeys])
        } catch {
            throw StorageError(.invalidArgument, "metadata value cannot be encoded: \(error)")
        }
    }

    static func decode(_ data: Data) throws(StorageError) -> MetadataValue {
        guard let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]),
              let value = value(object) else {
            throw StorageError(.corrupt, "a stored metadata value is not a string or an object of strings")
        }
        return value
    }

    private static func plain(_ value: MetadataValue) -> Any {
        switch value {
        case .string(let s): return s
        case .dictionary(let d): return d.mapValues { plain($0) }
        }
    }

    private static func value(_ object: Any) -> MetadataValue? {
        if let s = object as? String { return .string(s) }
        guard let d = object as? [String: Any] else { return nil }
        var out: [String: MetadataValue] = [:]
        for (k, v) in d {
            guard let mv = value(v) else { return nil }
            out[k] = mv
        }
        return .dictionary(out)
    }
}
