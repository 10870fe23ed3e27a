import Foundation
import LaminaModel
import LaminaWire

extension StorageReader {
    /// Each conversation's replicated state in one canonical text: flags (or, for one merged away, only where to;
    /// for one deleted for everyone, only that it is),
    /// every participant's standing, the metadata, every message (id, position, deleted, body, its
    /// reactions' tags), the delivered and read markers and per-message statuses. Nodes that hold the same
    /// operations produce the same texts (the node's `NodeEngine.convergenceDigest()` hashes them).
    /// Reads the whole store: for the admin port and tests, not the hot path.
    package func replicatedStates() throws(StorageError) -> [(ConversationID, String)] {
        var out: [(ConversationID, String)] = []
        for row in try db.rows(
            "SELECT id, is_distinct, delivery_receipts_enabled, read_receipts_enabled, merged_into, deleted, creator, hlc_physical, hlc_logical, hlc_node FROM conversations ORDER BY id"
        ) {
            let idBlob: Data = row["id"]
            let id = ConversationID(uuid: try Columns.uuid(idBlob, column: "id"))
            var text =
                "c \(idBlob.hex) d\(row["is_distinct"] as Int64) r\(row["delivery_receipts_enabled"] as Int64)\(row["read_receipts_enabled"] as Int64) x\(row["deleted"] as Int64)"
            text +=
                " by \(row["creator"] as String) at \(row["hlc_physical"] as Int64).\(row["hlc_logical"] as Int64).\(row["hlc_node"] as Int64)"
            if row["merged_into"] as Data? != nil {
                // A merged-away conversation is only a redirect to where its state lives now (the
                // end of the chain: merges may chain in another order on another node).
                let target = try resolvedConversation(id) ?? id
                out.append((id, text + " merged \(Columns.blob(target.uuid).hex)\n"))
                continue
            }
            if row["deleted"] as Int64 != 0 {
                // Deleted for everyone: nothing of it is visible any more, and what a node still
                // stores depends on what reached it before the deletion (an operation arriving
                // after it changes nothing, the distinct flag included), so only that it is gone counts.
                out.append(
                    (
                        id,
                        "c \(idBlob.hex) deleted by \(row["creator"] as String) at \(row["hlc_physical"] as Int64).\(row["hlc_logical"] as Int64).\(row["hlc_node"] as Int64)\n"
                    ))
                continue
            }
            text += "\n"
            let key = Columns.blob(id.uuid)
            for p in try db.rows(
                "SELECT user_id, is_member, hlc_physical, hlc_logical, hlc_node FROM participants WHERE conversation_id = ? ORDER BY user_id",
                [key])
            {
                text +=
                    "p \(p["user_id"] as String) \(p["is_member"] as Int64) \(p["hlc_physical"] as Int64).\(p["hlc_logical"] as Int64).\(p["hlc_node"] as Int64)\n"
            }
            let readUpTo = try markers(StatusMarker.read.rawValue, of: id)
            let deliveredUpTo = try markers(StatusMarker.delivered.rawValue, of: id)
            let metadata = try metadata(of: id)
            for (k, v) in metadata.values.sorted(by: { $0.key < $1.key }) { text += "m \(k)=\(v)\n" }
            for m in try db.rows(
                "SELECT id, pos_physical, pos_logical, pos_node, deleted, body FROM messages WHERE conversation_id = ? ORDER BY pos_physical, pos_logical, pos_node",
                [key]
            ) {
                let mid: Data = m["id"]
                let position = try Columns.hlc(m, "pos")
                let body: Data = m["body"]
                // The body: parts replaced by part updates converge too.
                text +=
                    "g \(mid.hex) \(m["pos_physical"] as Int64).\(m["pos_logical"] as Int64).\(m["pos_node"] as Int64) x\(m["deleted"] as Int64) \(body.hex)\n"
                // A status row counts only above what the markers give (a row written before a
                // marker covered the message, or not, is the same status).
                for s in try db.rows(
                    "SELECT user_id, status FROM recipient_status WHERE message_id = ? ORDER BY user_id", [mid])
                {
                    let user = try Columns.user(s, "user_id")
                    let derived: Int64 =
                        (readUpTo[user].map { position <= $0 } ?? false)
                        ? Int64(RecipientStatus.read.rawValue)
                        : (deliveredUpTo[user].map { position <= $0 } ?? false)
                            ? Int64(RecipientStatus.delivered.rawValue) : Int64(RecipientStatus.sent.rawValue)
                    let status: Int64 = s["status"]
                    if status > derived { text += "s \(user) \(status)\n" }
                }
                // Reactions (SPEC §6.9): every add's tag and whether it is removed.
                for r in try db.rows(
                    "SELECT user_id, reaction_key, tag_physical, tag_logical, tag_node, removed FROM message_reactions WHERE message_id = ? ORDER BY user_id, reaction_key, tag_physical, tag_logical, tag_node",
                    [mid])
                {
                    let reactionKey = Data((r["reaction_key"] as String).utf8)
                    text +=
                        "r \(r["user_id"] as String) \(reactionKey.hex) \(r["tag_physical"] as Int64).\(r["tag_logical"] as Int64).\(r["tag_node"] as Int64) x\(r["removed"] as Int64)\n"
                }
            }
            for (marker, positions) in [(StatusMarker.delivered, deliveredUpTo), (.read, readUpTo)] {
                for (user, position) in positions.sorted(by: { $0.key < $1.key }) {
                    text += "k \(marker.status) \(user) \(position)\n"
                }
            }
            out.append((id, text))
        }
        return out
    }
}

extension Data {
    fileprivate var hex: String { Hex.encode(self) }
}
