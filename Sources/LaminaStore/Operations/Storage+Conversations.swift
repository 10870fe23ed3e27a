import Foundation
import LaminaMerge
import LaminaModel

/// A conversation as stored: the model value (current participants and metadata) plus
/// what replication and distinct merges need.
package struct StoredConversation: Hashable, Sendable {
    package var conversation: Conversation
    /// The node where the conversation was created.
    package var origin: NodeID
    /// The HLC reading of its creation.
    package var hlc: HLCTimestamp
    /// The surviving conversation, when a distinct merge retired this one.
    package var mergedInto: ConversationID?
    package var isDeleted: Bool

    /// Whether the conversation still takes writes (not merged away, not deleted).
    package var isLive: Bool { mergedInto == nil && !isDeleted }
}

/// The result of `createConversation`.
package struct ConversationCreation: Hashable, Sendable {
    /// The new conversation, or the existing one it resolved to.
    package var conversation: StoredConversation
    /// False when the call resolved to an existing conversation (same id, or a live distinct
    /// conversation with the same participant set).
    package var created: Bool
}

extension StorageTransaction {
    /// Creates a conversation, or resolves to an existing one: the same id (a retry), or for a
    /// distinct conversation the live distinct conversation with the same participant set.
    /// The creator's add operations for every participant and the initial metadata are recorded
    /// at `hlc`.
    package func createConversation(_ conversation: Conversation, hlc: HLCTimestamp, origin: NodeID)
        throws(StorageError) -> ConversationCreation
    {
        do { try conversation.validate() } catch { throw error.storageError }
        if let existing = try read.conversation(conversation.id) {
            return ConversationCreation(conversation: existing, created: false)
        }
        if conversation.isDistinct,
            let existing = try read.distinctConversation(participants: conversation.participants)
        {
            return ConversationCreation(conversation: existing, created: false)
        }
        try insert(conversation, distinct: conversation.isDistinct, hlc: hlc, origin: origin)
        guard let stored = try read.conversation(conversation.id) else {
            throw StorageError(.corrupt, "conversation \(conversation.id) vanished after insert")
        }
        return ConversationCreation(conversation: stored, created: true)
    }

    /// Stores a distinct conversation that another node created concurrently with the live
    /// local distinct conversation of the same participant set, and applies the merge decided
    /// by the merge rules (LaminaMerge's `DistinctResolution.survivor(_:_:)`: the earlier
    /// creation, then the smaller id): the loser is retired into the survivor. `survivor` is
    /// the caller's expectation; one that disagrees with the rule is `.invalidArgument`.
    /// Returns the survivor.
    package func insertConcurrentDistinct(
        _ incoming: Conversation, hlc: HLCTimestamp, origin: NodeID, survivor: ConversationID
    ) throws(StorageError) -> StoredConversation {
        do { try incoming.validate() } catch { throw error.storageError }
        guard incoming.isDistinct else {
            throw StorageError(.invalidArgument, "conversation \(incoming.id) is not distinct")
        }
        guard try read.conversation(incoming.id) == nil else {
            throw StorageError(.alreadyExists, "conversation \(incoming.id) exists")
        }
        guard let local = try read.distinctConversation(participants: incoming.participants) else {
            throw StorageError(
                .notFound, "no live distinct conversation with the participants of \(incoming.id); create it instead")
        }
        let localID = local.conversation.id
        let decided = DistinctResolution.survivor(
            DistinctCandidate(incoming, createdAt: hlc), DistinctCandidate(local.conversation, createdAt: local.hlc)
        ).id
        guard survivor == decided else {
            throw StorageError(
                .invalidArgument,
                "the merge rules make \(decided) the survivor of \(incoming.id) and \(localID), not \(survivor)")
        }
        // Inserted as non-distinct so the unique distinct index holds while both are live.
        try insert(incoming, distinct: false, hlc: hlc, origin: origin)
        try retireConversation(survivor == localID ? incoming.id : localID, mergedInto: survivor)
        try db.run("UPDATE conversations SET is_distinct = 1 WHERE id = ?", [Columns.blob(incoming.id.uuid)])
        headersChanged()
        guard let stored = try read.conversation(survivor) else {
            throw StorageError(.corrupt, "survivor \(survivor) vanished")
        }
        return stored
    }

    /// Inserts a conversation row with its creation membership and initial metadata.
    private func insert(_ conversation: Conversation, distinct: Bool, hlc: HLCTimestamp, origin: NodeID)
        throws(StorageError)
    {
        let (p, l, n) = try Columns.hlc(hlc)
        let id = Columns.blob(conversation.id.uuid)
        try db.run(
            """
            INSERT INTO conversations (id, creator, is_distinct, participant_set_key, delivery_receipts_enabled,
                read_receipts_enabled, created_at, origin_node, hlc_physical, hlc_logical, hlc_node)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                id, conversation.creator.rawValue, distinct, Self.participantSetKey(conversation.participants),
                conversation.deliveryReceiptsEnabled, conversation.readReceiptsEnabled,
                conversation.createdAt.millisecondsSince1970,
                Columns.node(origin), p, l, n,
            ]
        )
        for user in conversation.participants.sorted() {
            _ = try applyMembership(
                .add, user: user, conversation: conversation.id, actor: conversation.creator, hlc: hlc, origin: origin,
                keepDistinct: true)
        }
        for (key, value) in conversation.metadata.values.sorted(by: { $0.key < $1.key }) {
            let path: MetadataKeyPath
            do { path = try MetadataKeyPath([key]) } catch { throw error.storageError }
            _ = try setMetadata(value, at: path, in: conversation.id, hlc: hlc, origin: origin)
        }
    }

    /// Applies one membership operation. The user's standing (member or not, and since when)
    /// is what LaminaMerge's `MembershipStanding.of` gives over the user's logged operations,
    /// whatever their order of arrival; a replayed operation changes nothing. A distinct
    /// conversation becomes non-distinct with any new operation (even one that changes no
    /// standing).
    /// Returns whether the participant's membership changed.
    @discardableResult
    package func applyMembership(
        _ operation: MembershipOperation, user: UserID, conversation: ConversationID, actor: UserID,
        hlc: HLCTimestamp, origin: NodeID
    ) throws(StorageError) -> Bool {
        try applyMembership(
            operation, user: user, conversation: conversation, actor: actor, hlc: hlc, origin: origin,
            keepDistinct: false)
    }

    private func applyMembership(
        _ operation: MembershipOperation, user: UserID, conversation: ConversationID, actor: UserID,
        hlc: HLCTimestamp, origin: NodeID, keepDistinct: Bool
    ) throws(StorageError) -> Bool {
        _ = try requireLive(conversation)
        let (p, l, n) = try Columns.hlc(hlc)
        let id = Columns.blob(conversation.uuid)
        try db.run(
            """
            INSERT OR IGNORE INTO membership_ops (conversation_id, user_id, op, actor, origin_node, hlc_physical, hlc_logical, hlc_node)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [id, user.rawValue, operation.rawValue, actor.rawValue, Columns.node(origin), p, l, n]
        )
        guard db.changesCount == 1 else { return false }
        // Any membership operation but the creation's ends distinctness, whether or not it
        // changes the user's standing: the operations held decide it, so every node agrees
        // whatever their order (a concurrent later add can make a removal change nothing).
        if !keepDistinct {
            try db.run("UPDATE conversations SET is_distinct = 0 WHERE id = ? AND is_distinct = 1", [id])
            if db.changesCount > 0 { headersChanged() }
        }
        let before = try read.participantState(of: user, in: conversation)
        var log: [LaminaMerge.MembershipOperation] = []
        for row in try db.rows(
            "SELECT op, actor, hlc_physical, hlc_logical, hlc_node FROM membership_ops WHERE conversation_id = ? AND user_id = ?",
            [id, user.rawValue]
        ) {
            guard let op = MembershipOperation(rawValue: row["op"]) else {
                throw StorageError(.corrupt, "unknown membership op")
            }
            log.append(
                LaminaMerge.MembershipOperation(
                    op.merge, user: user, actor: try Columns.user(row, "actor"), at: try Columns.hlc(row, "hlc")))
        }
        guard let after = MembershipStanding.of(log), after.isMember != before?.isMember || after.since != before?.since
        else { return false }
        let (sp, sl, sn) = try Columns.hlc(after.since)
        // A removal takes away the unread messages from its cutoff on: counted while the row still says member.
        let removedUnread =
            before?.isMember == true && !after.isMember
            ? try read.storedUnreadByRule(of: user, in: conversation, from: after.since, inclusive: true) : 0
        try db.run(
            """
            INSERT INTO participants (conversation_id, user_id, is_member, hlc_physical, hlc_logical, hlc_node) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (conversation_id, user_id) DO UPDATE SET
                is_member = excluded.is_member, hlc_physical = excluded.hlc_physical, hlc_logical = excluded.hlc_logical, hlc_node = excluded.hlc_node
            """,
            [id, user.rawValue, after.isMember, sp, sl, sn]
        )
        try countStandingChange(
            of: user, in: conversation, from: before,
            to: ParticipantState(isMember: after.isMember, since: after.since),
            removedUnread: removedUnread)
        headersChanged()
        return after.isMember != (before?.isMember ?? false)
    }

    /// Retires `conversation` into `survivor` after a distinct merge: its messages, membership
    /// history, metadata and read markers move to the survivor (metadata by last writer wins,
    /// read and delivered markers by maximum), and it records `mergedInto` so clients can follow the change.
    package func retireConversation(_ conversation: ConversationID, mergedInto survivor: ConversationID)
        throws(StorageError)
    {
        guard conversation != survivor else {
            throw StorageError(.invalidArgument, "a conversation cannot be merged into itself")
        }
        _ = try requireLive(conversation)
        _ = try requireLive(survivor)
        let from = Columns.blob(conversation.uuid)
        let to = Columns.blob(survivor.uuid)
        let clash =
            try db.int64(
                """
                SELECT count(*) FROM messages a JOIN messages b ON b.conversation_id = ?
                    AND a.pos_physical = b.pos_physical AND a.pos_logical = b.pos_logical AND a.pos_node = b.pos_node
                WHERE a.conversation_id = ?
                """,
                [to, from]
            ) ?? 0
        guard clash == 0 else {
            throw StorageError(
                .positionTaken, "\(clash) messages of \(conversation) share positions with messages of \(survivor)")
        }
        try retokenizeMessages(of: conversation, into: survivor)
        try db.run("UPDATE messages SET conversation_id = ? WHERE conversation_id = ?", [to, from])
        // Membership: replay the retired log into the survivor (duplicates ignored, greatest HLC wins).
        for row in try db.rows("SELECT * FROM membership_ops WHERE conversation_id = ? ORDER BY seq", [from]) {
            guard let op = MembershipOperation(rawValue: row["op"]) else {
                throw StorageError(.corrupt, "unknown membership op")
            }
            _ = try applyMembership(
                op, user: Columns.user(row, "user_id"), conversation: survivor, actor: Columns.user(row, "actor"),
                hlc: Columns.hlc(row, "hlc"), origin: Columns.node(row["origin_node"] as Int64), keepDistinct: true
            )
        }
        for row in try db.rows("SELECT * FROM metadata_entries WHERE conversation_id = ?", [from]) {
            try mergeMetadataRow(row, into: to)
        }
        for marker in StatusMarker.allCases {
            for (user, position) in try read.markers(marker.rawValue, of: conversation) {
                _ = try raise(marker, to: position, user: user, conversation: survivor)
            }
        }
        try db.run("UPDATE conversations SET merged_into = ? WHERE id = ?", [to, from])
        // The survivor's counters, counted again over the messages it holds now.
        try db.run("DELETE FROM message_counts WHERE conversation_id = ?", [from])
        try recountConversation(survivor)
        headersChanged()
    }

    /// Marks a conversation deleted for every participant; it takes no more writes.
    package func deleteConversation(_ conversation: ConversationID) throws(StorageError) {
        _ = try requireLive(conversation)
        try db.run("UPDATE conversations SET deleted = 1 WHERE id = ?", [Columns.blob(conversation.uuid)])
        headersChanged()
    }

    /// The live conversation, or `.notFound` / `.conversationRetired`.
    func requireLive(_ conversation: ConversationID) throws(StorageError) -> Row {
        guard
            let row = try db.row(
                "SELECT merged_into, deleted FROM conversations WHERE id = ?", [Columns.blob(conversation.uuid)])
        else {
            throw StorageError(.notFound, "no conversation \(conversation)")
        }
        let merged: Data? = row["merged_into"]
        let deleted: Bool = row["deleted"]
        guard merged == nil, !deleted else {
            throw StorageError(
                .conversationRetired,
                "conversation \(conversation) was \(deleted ? "deleted" : "merged into another") and takes no more writes"
            )
        }
        return row
    }

    /// The canonical key of a participant set: the sorted user ids' UTF-8 bytes, each followed by
    /// a 0 byte (user ids hold no control characters, so the key is unambiguous).
    static func participantSetKey(_ participants: Set<UserID>) -> Data {
        var key = Data()
        for user in participants.sorted() {
            key.append(contentsOf: Array(user.rawValue.utf8))
            key.append(0)
        }
        return key
    }
}

/// One entry of a conversation's membership log.
package enum MembershipOperation: UInt8, Hashable, Sendable, CaseIterable {
    case add = 1
    case remove = 2

    /// The same kind in LaminaMerge's terms.
    var merge: LaminaMerge.MembershipOperation.Kind { self == .add ? .add : .remove }
}

/// A user's current standing in a conversation (LaminaMerge's `MembershipStanding` as stored).
package struct ParticipantState: Hashable, Sendable {
    package var isMember: Bool
    /// When the current state began: the addition that made the user a member, or the removal
    /// that ended their latest membership. When not a member, the user sees only messages
    /// positioned before it (`MembershipStanding.canSee`).
    package var since: HLCTimestamp
}

extension StorageReader {
    /// A conversation by id, whatever its state.
    package func conversation(_ id: ConversationID) throws(StorageError) -> StoredConversation? {
        guard let row = try db.row("SELECT * FROM conversations WHERE id = ?", [Columns.blob(id.uuid)]) else {
            return nil
        }
        return try storedConversation(row)
    }

    /// The live distinct conversation whose participants are exactly `participants`, if any.
    package func distinctConversation(participants: Set<UserID>) throws(StorageError) -> StoredConversation? {
        guard
            let row = try db.row(
                "SELECT * FROM conversations WHERE participant_set_key = ? AND is_distinct = 1 AND merged_into IS NULL AND deleted = 0",
                [StorageTransaction.participantSetKey(participants)]
            )
        else { return nil }
        return try storedConversation(row)
    }

    /// The current participants of a conversation.
    package func participants(of conversation: ConversationID) throws(StorageError) -> Set<UserID> {
        var out = Set<UserID>()
        for row in try db.rows(
            "SELECT user_id FROM participants WHERE conversation_id = ? AND is_member = 1",
            [Columns.blob(conversation.uuid)])
        {
            out.insert(try Columns.user(row, "user_id"))
        }
        return out
    }

    /// A user's standing in a conversation; nil if they never took part.
    package func participantState(of user: UserID, in conversation: ConversationID) throws(StorageError)
        -> ParticipantState?
    {
        guard
            let row = try db.row(
                "SELECT is_member, hlc_physical, hlc_logical, hlc_node FROM participants WHERE conversation_id = ? AND user_id = ?",
                [Columns.blob(conversation.uuid), user.rawValue]
            )
        else { return nil }
        return ParticipantState(isMember: row["is_member"], since: try Columns.hlc(row, "hlc"))
    }

    /// The membership log of a conversation, in HLC order.
    package func membershipLog(of conversation: ConversationID) throws(StorageError) -> [MembershipRecord] {
        try db.rows(
            "SELECT * FROM membership_ops WHERE conversation_id = ? ORDER BY hlc_physical, hlc_logical, hlc_node, user_id",
            [Columns.blob(conversation.uuid)]
        ).map { (row) throws(StorageError) -> MembershipRecord in
            guard let op = MembershipOperation(rawValue: row["op"]) else {
                throw StorageError(.corrupt, "unknown membership op")
            }
            return MembershipRecord(
                operation: op, user: try Columns.user(row, "user_id"), actor: try Columns.user(row, "actor"),
                hlc: try Columns.hlc(row, "hlc"), origin: Columns.node(row["origin_node"] as Int64)
            )
        }
    }

    /// The live conversations the user takes part in now, oldest first.
    package func conversations(of user: UserID) throws(StorageError) -> [StoredConversation] {
        try db.rows(
            """
            SELECT c.* FROM participants p JOIN conversations c ON c.id = p.conversation_id
            WHERE p.user_id = ? AND p.is_member = 1 AND c.merged_into IS NULL AND c.deleted = 0
            ORDER BY c.hlc_physical, c.hlc_logical, c.hlc_node, c.id
            """,
            [user.rawValue]
        ).map { (row) throws(StorageError) in try storedConversation(row) }
    }

    func storedConversation(_ row: Row) throws(StorageError) -> StoredConversation {
        let idData: Data? = row["id"]
        let id = ConversationID(uuid: try Columns.uuid(idData, column: "id"))
        let mergedData: Data? = row["merged_into"]
        let conversation = Conversation(
            id: id,
            participants: try participants(of: id),
            isDistinct: row["is_distinct"],
            metadata: try metadata(of: id),
            deliveryReceiptsEnabled: row["delivery_receipts_enabled"],
            readReceiptsEnabled: row["read_receipts_enabled"] as Bool,
            createdAt: try Columns.timestamp(row, "created_at"),
            creator: try Columns.user(row, "creator")
        )
        return StoredConversation(
            conversation: conversation,
            origin: Columns.node(row["origin_node"] as Int64),
            hlc: try Columns.hlc(row, "hlc"),
            mergedInto: try mergedData.map { (d) throws(StorageError) in
                ConversationID(uuid: try Columns.uuid(d, column: "merged_into"))
            },
            isDeleted: row["deleted"]
        )
    }
}

/// One membership operation as logged.
package struct MembershipRecord: Hashable, Sendable {
    package var operation: MembershipOperation
    package var user: UserID
    package var actor: UserID
    package var hlc: HLCTimestamp
    package var origin: NodeID
}

/// What a command needs of its conversation: no metadata, one read of the row and one of
/// its participants.
package struct ConversationHeader: Hashable, Sendable {
    package var id: ConversationID
    package var isLive: Bool
    package var isDistinct: Bool
    package var deliveryReceiptsEnabled: Bool
    package var readReceiptsEnabled: Bool
    /// The current participants.
    package var participants: Set<UserID>
    /// Every user who ever took part, with their standing.
    package var states: [UserID: ParticipantState]

    package var participantLimit: Int {
        Conversation.participantLimit(readReceiptsEnabled: readReceiptsEnabled)
    }

    /// Whether any recipient status is shared with the other participants (SPEC §6.2).
    package var sharesStatuses: Bool { deliveryReceiptsEnabled || readReceiptsEnabled }
}

extension StorageReader {
    /// The conversation's header (flags and participants), whatever its state. `locking`
    /// (several writers): the conversation's row is locked until COMMIT by the same statement.
    package func conversationHeader(_ id: ConversationID, locking: Bool = false) throws(StorageError)
        -> ConversationHeader?
    {
        // One statement (a round trip on PostgreSQL): the flags on every row, one row per
        // participant (one with NULLs for none). Columns by position: every command reads it.
        let rows = try db.rows(
            locking ? ConversationHeaderSQL.locking : ConversationHeaderSQL.plain, [Columns.blob(id.uuid)])
        return try Self.header(id, rows[...])
    }

    /// The header of `id` from its rows of `ConversationHeaderSQL` (columns from `offset` on).
    private static func header(_ id: ConversationID, _ rows: ArraySlice<SQLRow>, offset o: Int = 0)
        throws(StorageError) -> ConversationHeader?
    {
        guard let row = rows.first else { return nil }
        var states: [UserID: ParticipantState] = [:]
        var participants = Set<UserID>()
        for p in rows where !p.isNull(o + 5) {
            let user = try Columns.user(p, o + 5)
            let state = ParticipantState(isMember: p[o + 6], since: try Columns.hlc(p, from: o + 7))
            states[user] = state
            if state.isMember { participants.insert(user) }
        }
        let merged: Data? = row[o + 2]
        let deleted: Bool = row[o + 3]
        return ConversationHeader(
            id: id, isLive: merged == nil && !deleted, isDistinct: row[o + 0], deliveryReceiptsEnabled: row[o + 1],
            readReceiptsEnabled: row[o + 4], participants: participants, states: states)
    }

    /// Several writers: locks the rows of the conversations `ids` (those that exist) in id
    /// order, in ONE statement, and returns their headers. The writer takes a group's
    /// conversations so before any other lock: every node locks conversations in one order, and
    /// only then feeds (`lockFeeds`), so groups on several nodes do not deadlock.
    package func lockConversationHeaders(_ ids: [ConversationID]) throws(StorageError) -> [ConversationHeader] {
        guard !ids.isEmpty else { return [] }
        let rows = try db.rows(
            ConversationHeaderSQL.lockingMany, [Columns.jsonHex(ids.map { Columns.blob($0.uuid) })])
        var out: [ConversationHeader] = []
        var start = rows.startIndex
        while start < rows.endIndex {
            guard let uuid = rows[start].uuid(0) else {
                throw StorageError(.corrupt, "a conversation id is not 16 bytes")
            }
            var end = start + 1
            while end < rows.endIndex, rows[end].uuid(0) == uuid { end += 1 }
            let id = ConversationID(uuid: uuid)
            if let header = try Self.header(id, rows[start..<end], offset: 1) { out.append(header) }
            start = end
        }
        return out
    }

    /// Several writers: locks the `feed_heads` rows of `users` that exist, in user order (after
    /// the group's conversations: see `lockConversationHeaders`). Sent without waiting.
    package func lockFeeds(_ users: [UserID]) throws(StorageError) {
        guard !users.isEmpty else { return }
        try db.run(ConversationHeaderSQL.lockingFeeds, [try Columns.jsonText(users.map(\.rawValue))])
    }
}

/// The statement that reads a conversation's header, and (several writers) locks its row.
enum ConversationHeaderSQL {
    static let plain = """
        SELECT c.is_distinct, c.delivery_receipts_enabled, c.merged_into, c.deleted, c.read_receipts_enabled,
            p.user_id, p.is_member, p.hlc_physical, p.hlc_logical, p.hlc_node
        FROM conversations c LEFT JOIN participants p ON p.conversation_id = c.id WHERE c.id = ?
        """
    static let locking = plain + " FOR UPDATE OF c"
    /// The headers of the conversations in a JSON array of hex ids, their rows locked in id order.
    static let lockingMany = """
        SELECT c.id, c.is_distinct, c.delivery_receipts_enabled, c.merged_into, c.deleted, c.read_receipts_enabled,
            p.user_id, p.is_member, p.hlc_physical, p.hlc_logical, p.hlc_node
        FROM conversations c LEFT JOIN participants p ON p.conversation_id = c.id
        WHERE c.id IN (SELECT decode(x, 'hex') FROM jsonb_array_elements_text(CAST(? AS jsonb)) AS x)
        ORDER BY c.id FOR UPDATE OF c
        """
    /// Locks the `feed_heads` rows of the users in a JSON array, in user order.
    static let lockingFeeds = """
        SELECT user_id FROM feed_heads
        WHERE user_id IN (SELECT CAST(u AS TEXT) COLLATE "C" FROM jsonb_array_elements_text(CAST(? AS jsonb)) AS u)
        ORDER BY user_id FOR UPDATE
        """
}
