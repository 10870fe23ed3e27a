import Foundation
import LaminaMerge
import LaminaModel

// Births of conversations created distinct (SPEC §6.5): the operation that created each one
// (origin and counter) and the vector its origin held then, by the participant set it was
// created with. LaminaMerge's `DistinctResolution` decides from them which conversations
// were created concurrently and so merge.

extension StorageTransaction {
    /// Records the birth of a conversation created distinct (once; a replay changes nothing).
    package func recordDistinctBirth(_ birth: DistinctBirth) throws(StorageError) {
        let counter = try Columns.int64(birth.counter, "a creation's counter")
        try db.run(
            """
            INSERT OR IGNORE INTO distinct_births (conversation_id, participant_set_key, origin_node, origin_counter, seen)
            VALUES (?, ?, ?, ?, ?)
            """,
            [
                Columns.blob(birth.id.uuid), Self.participantSetKey(birth.candidate.participants),
                Columns.node(birth.origin),
                counter, DistinctBirthColumns.seenText(birth.seen),
            ]
        )
    }

    /// Merges the classes `join` names (LaminaMerge's `DistinctResolution.join`): each retired
    /// conversation's messages, membership, metadata and markers move to the survivor (as
    /// `retireConversation`), whatever their state. The survivor ends distinct only when every
    /// conversation merged was still distinct (`distinct`), and deleted when any was
    /// (`deleted`); a retired conversation keeps only its redirect (flags: born distinct, not
    /// deleted), and conversations retired into it earlier now name the survivor directly.
    package func mergeDistinct(_ join: DistinctJoin, distinct: Bool, deleted: Bool) throws(StorageError) {
        guard !join.retired.isEmpty else { return }
        let survivor = Columns.blob(join.survivor.uuid)
        // Live and non-distinct while merging (the unique distinct index holds throughout).
        for id in [join.survivor] + join.retired {
            try db.run("UPDATE conversations SET is_distinct = 0, deleted = 0 WHERE id = ?", [Columns.blob(id.uuid)])
        }
        for id in join.retired {
            try retireConversation(id, mergedInto: join.survivor)
            let retired = Columns.blob(id.uuid)
            try db.run("UPDATE conversations SET is_distinct = 1, deleted = 0 WHERE id = ?", [retired])
            try db.run("UPDATE conversations SET merged_into = ? WHERE merged_into = ?", [survivor, retired])
        }
        try db.run("UPDATE conversations SET is_distinct = ?, deleted = ? WHERE id = ?", [distinct, deleted, survivor])
        headersChanged()
    }

    /// Sets a conversation's distinct flag (a distinct creation inserted non-distinct while
    /// its merge is decided).
    package func setDistinct(_ conversation: ConversationID, _ distinct: Bool) throws(StorageError) {
        try db.run(
            "UPDATE conversations SET is_distinct = ? WHERE id = ?", [distinct, Columns.blob(conversation.uuid)])
        headersChanged()
    }

    /// Inserts a conversation another node created distinct, as non-distinct (the caller
    /// decides its merge, then sets its flag).
    package func insertReplicatedDistinct(_ conversation: Conversation, hlc: HLCTimestamp, origin: NodeID)
        throws(StorageError)
    {
        var plain = conversation
        plain.isDistinct = false
        // Non-distinct, its participant set is still recorded (`participant_set_key`).
        guard try createConversation(plain, hlc: hlc, origin: origin).created else {
            throw StorageError(.alreadyExists, "conversation \(conversation.id) exists")
        }
    }
}

extension StorageReader {
    /// The births recorded for conversations created distinct with exactly `participants`.
    package func distinctBirths(participants: Set<UserID>) throws(StorageError) -> [DistinctBirth] {
        try db.rows(
            """
            SELECT b.conversation_id, b.origin_node, b.origin_counter, b.seen, c.hlc_physical, c.hlc_logical, c.hlc_node
            FROM distinct_births b JOIN conversations c ON c.id = b.conversation_id
            WHERE b.participant_set_key = ? ORDER BY b.conversation_id
            """,
            [StorageTransaction.participantSetKey(participants)]
        ).map { (row) throws(StorageError) -> DistinctBirth in
            let idData: Data? = row["conversation_id"]
            let counter: Int64 = row["origin_counter"]
            return DistinctBirth(
                candidate: DistinctCandidate(
                    id: ConversationID(uuid: try Columns.uuid(idData, column: "conversation_id")),
                    participants: participants,
                    createdAt: try Columns.hlc(row, "hlc")),
                origin: Columns.node(row["origin_node"] as Int64), counter: UInt64(max(0, counter)),
                seen: try DistinctBirthColumns.seen(row["seen"] as String))
        }
    }

    /// A conversation's distinct and deleted flags, whatever its state.
    package func distinctFlags(of conversation: ConversationID) throws(StorageError) -> (distinct: Bool, deleted: Bool)?
    {
        guard
            let row = try db.row(
                "SELECT is_distinct, deleted FROM conversations WHERE id = ?", [Columns.blob(conversation.uuid)])
        else { return nil }
        let distinct: Bool = row[0]
        let deleted: Bool = row[1]
        return (distinct, deleted)
    }
}

/// How a birth's vector is stored: `node:counter` pairs (node in hex), comma separated, in
/// ascending node order (text, the same on both backends).
enum DistinctBirthColumns {
    static func seenText(_ vector: VersionVector) -> String {
        vector.counters.sorted { $0.key < $1.key }.map { "\(String($0.key.rawValue, radix: 16)):\($0.value)" }.joined(
            separator: ",")
    }

    static func seen(_ text: String) throws(StorageError) -> VersionVector {
        var counters: [NodeID: UInt64] = [:]
        for pair in text.split(separator: ",") {
            let parts = pair.split(separator: ":")
            guard parts.count == 2, let node = UInt64(parts[0], radix: 16), let counter = UInt64(parts[1]) else {
                throw StorageError(.corrupt, "a distinct birth's vector is not node:counter pairs")
            }
            counters[NodeID(node)] = counter
        }
        return VersionVector(counters)
    }
}
