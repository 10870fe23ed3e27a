import Foundation
import LaminaMerge
import LaminaModel
import LaminaWire

/// What applying an edit of a message's parts did (``StorageTransaction/applyPartsEdit``).
package struct PartsEditOutcome: Hashable, Sendable {
    /// The parts before and after (equal when the edit lost every register it wrote).
    package var before: [MessagePart]
    package var after: [MessagePart]
    /// The message's edit time after it: the latest reading its registers hold.
    package var editedAt: HLCTimestamp

    /// Whether the list the devices see changed.
    package var changedParts: Bool { before != after }
}

extension StorageTransaction {
    /// Applies an edit of a stored, undeleted message's parts (or a deleted one's,
    /// `evenIfDeleted`: a replicated edit, so that the registers converge whatever the order of
    /// the edit and the deletion) by LaminaMerge's per-part rule (`MessagePartsMap`): each part
    /// keeps the latest write, the list the latest order. Writes the merged list into the body
    /// (its push configuration kept, content references indexed anew), the registers the edit
    /// won, and the edit time. Returns nil (nothing written) when the edit changes no register
    /// (a duplicate, or one every register of which holds a later write).
    package func applyPartsEdit(
        of id: MessageID, _ edit: MessagePartsEdit, origin: NodeID, by user: UserID, evenIfDeleted: Bool = false
    ) throws(StorageError) -> PartsEditOutcome? {
        guard let stored = try read.message(id) else { throw StorageError(.notFound, "no message \(id)") }
        guard evenIfDeleted || !stored.isDeleted else { throw StorageError(.notFound, "message \(id) was deleted") }
        let (current, rowsComplete) = try read.storedPartsMap(of: stored)
        var merged = current
        merged.apply(edit)
        guard merged != current else { return nil }
        let before = stored.message.parts
        let after = merged.parts
        let key = Columns.blob(id.uuid)
        if after != before {
            var updated = stored.message
            updated.parts = after
            do { try updated.validate() } catch { throw error.storageError }
            let body: [UInt8]
            do {
                body = try MessageBodyCoding.encode(
                    parts: after, push: updated.push, mentions: updated.mentions, replyTo: updated.replyTo)
            } catch {
                throw StorageError(.invalidArgument, "message \(id) cannot be encoded: \(error.reason)")
            }
            try checkBlob(body, "a message body")
            try db.run("UPDATE messages SET body = ? WHERE id = ?", [Data(body), key])
            try db.run("DELETE FROM message_parts WHERE message_id = ?", [key])
            try indexContentReferences(of: id, after)
            try reindexMessage(id, parts: after, deleted: stored.isDeleted)
        }
        // The registers this edit won, each at the edit's reading (every register not at the
        // send's reading when they were last written before v27).
        for (part, entry) in merged.entries
        where (entry != current.entries[part] && entry.at == edit.at)
            || (!rowsComplete && (entry.at != stored.hlc || entry.part == nil))
        {
            let (p, l, n) = try Columns.hlc(entry.at)
            try db.run(
                """
                INSERT INTO message_part_readings (message_id, part_id, hlc_physical, hlc_logical, hlc_node, removed)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (message_id, part_id) DO UPDATE SET hlc_physical = excluded.hlc_physical,
                    hlc_logical = excluded.hlc_logical, hlc_node = excluded.hlc_node, removed = excluded.removed
                """,
                [key, Columns.blob(part), p, l, n, entry.part == nil ? 1 : 0])
        }
        // The order register (its reading is the message's edit time); the editor and origin
        // name the write that holds it.
        let editedAt = merged.orderAt ?? edit.at
        let (p, l, n) = try Columns.hlc(editedAt)
        let order = Data(merged.orderIDs.flatMap { id in withUnsafeBytes(of: id.uuid) { Array($0) } })
        let moved = merged.orderAt == edit.at
        try db.run(
            """
            INSERT INTO message_part_updates (message_id, hlc_physical, hlc_logical, hlc_node, origin_node, updated_by, part_order)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (message_id) DO UPDATE SET hlc_physical = excluded.hlc_physical, hlc_logical = excluded.hlc_logical,
                hlc_node = excluded.hlc_node, part_order = excluded.part_order\(
                moved ? ", origin_node = excluded.origin_node, updated_by = excluded.updated_by" : "")
            """,
            [key, p, l, n, Columns.node(origin), user.rawValue, order])
        return PartsEditOutcome(before: before, after: after, editedAt: editedAt)
    }
}

extension StorageReader {
    /// A stored message's per-part registers (LaminaMerge's `MessagePartsMap`): the body's
    /// parts at their readings (the send's when no edit wrote them; before v27, the edit row's),
    /// the removed ones as tombstones, and the order register (the send's list at its reading
    /// when it was never edited).
    package func partsMap(of stored: MessageRecord) throws(StorageError) -> MessagePartsMap {
        try storedPartsMap(of: stored).map
    }

    /// ``partsMap(of:)``, and whether `message_part_readings` holds every register not at the
    /// send's reading (false for a message last edited before v27).
    func storedPartsMap(of stored: MessageRecord) throws(StorageError) -> (map: MessagePartsMap, rowsComplete: Bool) {
        let key = Columns.blob(stored.message.id.uuid)
        let parts = stored.message.parts
        guard
            let row = try db.row(
                "SELECT hlc_physical, hlc_logical, hlc_node, part_order FROM message_part_updates WHERE message_id = ?",
                [key])
        else {
            return (MessagePartsMap([.send(parts, at: stored.hlc)]), true)
        }
        let editedAt = try Columns.hlc(row, from: 0)
        guard let orderBytes = row.bytes(3) else {
            // Written before v27: the whole list dates from the edit that wrote it.
            return (MessagePartsMap([.send(parts, at: editedAt)]), false)
        }
        guard orderBytes.count % 16 == 0 else {
            throw StorageError(.corrupt, "the part order of \(stored.message.id) is not a list of ids")
        }
        let order = stride(from: 0, to: orderBytes.count, by: 16).map { i in
            orderBytes[i..<i + 16].withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
        }
        let body = Dictionary(parts.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        var entries: [UUID: MessagePartsMap.Entry] = [:]
        let readings = try db.rows(
            "SELECT part_id, hlc_physical, hlc_logical, hlc_node, removed FROM message_part_readings WHERE message_id = ?",
            [key])
        for reading in readings {
            guard let id = reading.uuid(0) else { throw StorageError(.corrupt, "a part reading without a part id") }
            let at = try Columns.hlc(reading, from: 1)
            let part = reading.int64(4) == 1 ? nil : body[id]
            guard reading.int64(4) == 1 || part != nil else {
                throw StorageError(.corrupt, "part \(id) of \(stored.message.id) is set but not in the body")
            }
            entries[id] = .init(at: at, part: part)
        }
        // The other parts of the body date from the send; the part shown when every part was
        // removed (`MessagePartsMap.emptied`) is no register.
        for part in parts where entries[part.id] == nil && parts != [MessagePartsMap.emptied] {
            entries[part.id] = .init(at: stored.hlc, part: part)
        }
        return (MessagePartsMap(entries: entries, orderAt: editedAt, orderIDs: order), true)
    }
}
