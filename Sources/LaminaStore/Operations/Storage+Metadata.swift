import Foundation
import LaminaMerge
import LaminaModel

/// One metadata key path's last write, as stored (for replication and inspection).
package struct MetadataEntry: Hashable, Sendable {
    package var path: MetadataKeyPath
    /// The value set, or nil for a deletion (a tombstone, kept so that older writes lose).
    package var value: MetadataValue?
    package var hlc: HLCTimestamp
    package var origin: NodeID
}

extension StorageTransaction {
    /// Sets (`value` non-nil) or deletes (`value` nil) the metadata at `path`. Last writer wins
    /// per key path, as LaminaMerge decides (`MetadataOperation.wins(_:over:)` against the
    /// path's stored write, tombstones included), whatever the order of arrival. Returns
    /// whether the write took effect. The resulting metadata is checked against the model's
    /// limits.
    @discardableResult
    package func setMetadata(
        _ value: MetadataValue?, at path: MetadataKeyPath, in conversation: ConversationID, hlc: HLCTimestamp,
        origin: NodeID
    ) throws(StorageError) -> Bool {
        _ = try requireLive(conversation)
        let encoded = try value.map { (v) throws(StorageError) in try MetadataCoding.encode(v) }
        let applied = try upsertMetadata(
            Columns.blob(conversation.uuid), path, value, encoded, hlc: hlc, origin: origin)
        if applied, value != nil {
            let merged = try read.metadata(of: conversation)
            do { try merged.validate() } catch { throw error.storageError }
        }
        return applied
    }

    /// Merges one stored metadata row of another conversation into `conversation` (distinct merge).
    func mergeMetadataRow(_ row: Row, into conversation: Data) throws(StorageError) {
        let entry = try read.metadataEntry(row)
        _ = try upsertMetadata(
            conversation, entry.path, entry.value, row["value"], hlc: entry.hlc, origin: entry.origin)
    }

    /// Stores the write when LaminaMerge says it wins over the path's stored one. A table holds
    /// one write per path, so a set also turns the strings it hides at ancestor paths
    /// (`MetadataOperation.hides`) into tombstones at their own time: what the dropped write
    /// hid stays hidden, and `StorageReader.metadata` (LaminaMerge's `MetadataLWW` over the
    /// rows) gives what the full history of writes gives.
    private func upsertMetadata(
        _ conversation: Data, _ path: MetadataKeyPath, _ value: MetadataValue?, _ encoded: Data?, hlc: HLCTimestamp,
        origin: NodeID
    ) throws(StorageError) -> Bool {
        let incoming = Self.operation(value, at: path, hlc: hlc)
        if let current = try storedWrite(conversation, path), !MetadataOperation.wins(incoming, over: current.operation)
        {
            return false
        }
        let leaves =
            value.map { if case .dictionary(let d) = $0 { !Metadata(d).leaves.isEmpty } else { true } } ?? false
        if leaves {
            // A set at `path` (or below it, for a dictionary) hides older strings at ancestors.
            let set = MetadataOperation(.set(""), at: path, timestamp: hlc)
            for cut in stride(from: 1, to: path.components.count, by: 1) {
                guard let ancestor = try? MetadataKeyPath(Array(path.components.prefix(cut))),
                    let stored = try storedWrite(conversation, ancestor), case .string = stored.entry.value,
                    MetadataOperation.hides(set, stored.operation)
                else { continue }
                try db.run(
                    "UPDATE metadata_entries SET value = NULL WHERE conversation_id = ? AND key_path = ?",
                    [conversation, ancestor.description])
            }
        }
        let (p, l, n) = try Columns.hlc(hlc)
        try db.run(
            """
            INSERT INTO metadata_entries (conversation_id, key_path, value, origin_node, hlc_physical, hlc_logical, hlc_node)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (conversation_id, key_path) DO UPDATE SET
                value = excluded.value, origin_node = excluded.origin_node,
                hlc_physical = excluded.hlc_physical, hlc_logical = excluded.hlc_logical, hlc_node = excluded.hlc_node
            """,
            [conversation, path.description, encoded, Columns.node(origin), p, l, n]
        )
        return true
    }

    /// The stored write at `path`, as a row and as LaminaMerge's operation at that path.
    private func storedWrite(_ conversation: Data, _ path: MetadataKeyPath) throws(StorageError) -> (
        entry: MetadataEntry, operation: MetadataOperation
    )? {
        guard
            let row = try db.row(
                "SELECT * FROM metadata_entries WHERE conversation_id = ? AND key_path = ?",
                [conversation, path.description])
        else {
            return nil
        }
        let entry = try read.metadataEntry(row)
        return (entry, Self.operation(entry.value, at: path, hlc: entry.hlc))
    }

    /// A stored write as LaminaMerge's operation at its own path: a string is a set; a
    /// deletion, and a dictionary (which replaces the subtree), a tombstone there.
    static func operation(_ value: MetadataValue?, at path: MetadataKeyPath, hlc: HLCTimestamp) -> MetadataOperation {
        if case .string(let s)? = value { return MetadataOperation(.set(s), at: path, timestamp: hlc) }
        return MetadataOperation(.delete, at: path, timestamp: hlc)
    }
}

extension StorageReader {
    /// A conversation's metadata: LaminaMerge's `MetadataLWW` over every key path's stored
    /// write (a dictionary value is a tombstone at its path and a set per leaf, all at its time).
    package func metadata(of conversation: ConversationID) throws(StorageError) -> Metadata {
        var lww = MetadataLWW()
        for entry in try metadataEntries(of: conversation) {
            switch entry.value {
            case nil:
                lww.apply(MetadataOperation(.delete, at: entry.path, timestamp: entry.hlc))
            case .string(let s)?:
                lww.apply(MetadataOperation(.set(s), at: entry.path, timestamp: entry.hlc))
            case .dictionary(let d)?:
                lww.apply(MetadataOperation(.delete, at: entry.path, timestamp: entry.hlc))
                for (sub, s) in Metadata(d).leaves {
                    guard let full = try? MetadataKeyPath(entry.path.components + sub.components) else { continue }
                    lww.apply(MetadataOperation(.set(s), at: full, timestamp: entry.hlc))
                }
            }
        }
        return lww.metadata
    }

    /// Every key path's last write (tombstones included), in HLC order.
    package func metadataEntries(of conversation: ConversationID) throws(StorageError) -> [MetadataEntry] {
        try db.rows(
            "SELECT * FROM metadata_entries WHERE conversation_id = ? ORDER BY hlc_physical, hlc_logical, hlc_node, key_path",
            [Columns.blob(conversation.uuid)]
        ).map { (row) throws(StorageError) -> MetadataEntry in try metadataEntry(row) }
    }

    func metadataEntry(_ row: Row) throws(StorageError) -> MetadataEntry {
        let pathString: String = row["key_path"]
        let path: MetadataKeyPath
        do { path = try MetadataKeyPath(parsing: pathString) } catch {
            throw StorageError(.corrupt, "bad metadata key path '\(pathString)'")
        }
        let data: Data? = row["value"]
        return MetadataEntry(
            path: path,
            value: try data.map { (d) throws(StorageError) in try MetadataCoding.decode(d) },
            hlc: try Columns.hlc(row, "hlc"),
            origin: Columns.node(row["origin_node"] as Int64)
        )
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
            let value = value(object)
        else {
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
