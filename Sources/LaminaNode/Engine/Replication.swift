import Foundation
import LaminaMerge
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore

/// What the replication log keeps of an operation (SPEC §6.5): the event's feed encoding
/// (a CHANGE frame with seq 0), except for a sent message, which the log names by id (the
/// message row holds it once; the write path stores no copy, WRITE-PATH.md), and a change of
/// a user's state, kept as a marker and the event's own encoding (it is no feed entry).
enum ReplicationLogCoding {
    /// The first byte of a message reference (no CHANGE frame starts with it).
    static let messageMarker: UInt8 = 0xFF
    /// The first byte of a user-state change (no CHANGE frame starts with it either).
    static let userStateMarker: UInt8 = 0xFE
    /// The first byte of a distinct creation (REPLICATE kind 69: the conversation and the
    /// vector its origin held), kept as the event's own encoding.
    static let distinctCreationMarker: UInt8 = 0xFD
    /// The first byte of a per-part edit (REPLICATE kind 74), kept as the event's own encoding.
    static let partsEditedMarker: UInt8 = 0xFC

    static func partsEdited(_ edited: MessagePartsEdited) throws -> [UInt8] {
        [partsEditedMarker] + (try ReplicatedEvent.partsEdited(edited).encoded())
    }

    static func distinctCreation(_ creation: DistinctCreation) throws -> [UInt8] {
        [distinctCreationMarker] + (try ReplicatedEvent.distinctCreation(creation).encoded())
    }

    static func userState(_ change: UserStateChange) throws -> [UInt8] {
        [userStateMarker] + (try ReplicatedEvent.user(change).encoded())
    }

    static func messageReference(_ id: MessageID) -> [UInt8] {
        var out: [UInt8] = [messageMarker]
        withUnsafeBytes(of: id.uuid.uuid) { out.append(contentsOf: $0) }
        return out
    }

    /// The operation a log record holds, read back with what it names.
    static func operation(_ record: ReplicationRecord, _ read: StorageReader) throws -> ReplicatedOperation {
        ReplicatedOperation(
            origin: record.origin, counter: record.counter, hlc: record.hlc, payload: try event(record.op, read))
    }

    private static func event(_ op: [UInt8], _ read: StorageReader) throws -> ReplicatedEvent {
        if op.first == userStateMarker {
            let event = try ReplicatedEvent.decode(exactly: Array(op.dropFirst()))
            guard case .user = event else {
                throw WireError(
                    .internalError, "a user-state record of the replication log holds a conversation change")
            }
            return event
        }
        if op.first == distinctCreationMarker {
            let event = try ReplicatedEvent.decode(exactly: Array(op.dropFirst()))
            guard case .distinctCreation = event else {
                throw WireError(.internalError, "a distinct-creation record of the replication log holds another event")
            }
            return event
        }
        if op.first == partsEditedMarker {
            let event = try ReplicatedEvent.decode(exactly: Array(op.dropFirst()))
            guard case .partsEdited = event else {
                throw WireError(.internalError, "a part-edit record of the replication log holds another event")
            }
            return event
        }
        if op.first == messageMarker {
            guard op.count == 17 else {
                throw WireError(
                    .internalError, "a message reference in the replication log is 17 bytes, got \(op.count)")
            }
            let id = MessageID(
                uuid: UUID(uuid: op.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 1, as: uuid_t.self) }))
            guard let stored = try read.message(id) else {
                throw WireError(.internalError, "the replication log names message \(id), which is not stored")
            }
            var message = stored.message
            message.recipientStatus = [:]  // statuses replicate as their own operations
            return .change(.messageCreated(message))
        }
        guard case .change(let change) = try Frame.decode(exactly: ByteBuffer(bytes: op)) else {
            throw WireError(.internalError, "a replication log record does not hold a change")
        }
        return .change(change.event)
    }
}

extension CommandContext {
    /// Records an operation this node originated (its feed encoding, or a message reference)
    /// in the replication log, in the command's own transaction: the next counter of this
    /// node, at `hlc` (SPEC §6.5).
    /// Returns the operation's counter.
    @discardableResult
    mutating func replicate(_ op: [UInt8], at hlc: HLCTimestamp) throws -> UInt64 {
        try tx.appendLocalOperation(op, origin: origin, hlc: hlc)
    }

    /// Applies an operation another node originated through the same rules as a local command
    /// (LaminaMerge's, in storage), appends the feed entries this node's users get, and logs it
    /// under its origin and counter. A counter already held is ignored (idempotent); one past
    /// the next is a gap (`invalid-argument`). The order in which operations of different
    /// origins arrive does not change the result.
    ///
    /// An operation naming a conversation this node has never held is parked: logged (so the
    /// counters go on and the link keeps streaming) and applied once the conversation's creation
    /// arrives (SPEC §6.5).
    mutating func applyReplicated(_ op: ReplicatedOperation) throws {
        let held = try tx.heldCounter(of: op.origin)
        guard op.counter > held else { return }
        guard op.counter == held + 1 else {
            throw WireError(
                .invalidArgument, "operation \(op.counter) of node \(op.origin.rawValue) leaves a gap after \(held)")
        }
        let logged: [UInt8]
        switch op.payload {
        case .user(let change):
            if let effect = try applyUserState(change, at: op.hlc) { userStateEffects.append(effect) }
            logged = try ReplicationLogCoding.userState(change)
        case .distinctCreation(let creation):
            try applyCreation(creation.conversation, seen: creation.seen, op)
            try unpark(creation.conversation.id)
            logged = try ReplicationLogCoding.distinctCreation(creation)
        case .partsEdited(let edited):
            logged = try ReplicationLogCoding.partsEdited(edited)
            do {
                try applyPartsEdited(edited, op)
            } catch let unheld as UnheldConversation {
                abandonedParked += try tx.makeRoomToPark(
                    origin: op.origin, bytes: logged.count, within: engine.configuration.parking)
                try tx.park(
                    origin: op.origin, counter: op.counter, conversation: unheld.id, bytes: logged.count, at: now)
            }
        case .change(let event):
            do {
                logged = try applyEvent(event, op)
            } catch let unheld as UnheldConversation {
                // Nothing was written for it yet: replicaHeader is every case's first step.
                logged = try FeedCoding.encode(event)
                abandonedParked += try tx.makeRoomToPark(
                    origin: op.origin, bytes: logged.count, within: engine.configuration.parking)
                try tx.park(
                    origin: op.origin, counter: op.counter, conversation: unheld.id, bytes: logged.count, at: now)
            }
        }
        guard try tx.appendOperation(ReplicationRecord(origin: op.origin, counter: op.counter, hlc: op.hlc, op: logged))
        else {
            throw WireError(.internalError, "operation \(op.counter) of node \(op.origin.rawValue) was logged twice")
        }
    }

    /// Applies the operations parked for `conversation` (now held), in HLC order.
    private mutating func unpark(_ conversation: ConversationID) throws {
        let parked = try tx.read.parkedOperations(of: conversation)
        guard !parked.isEmpty else { return }
        var ops: [ReplicatedOperation] = []
        for (origin, counter) in parked {
            guard let record = try tx.read.operations(of: origin, after: counter - 1, limit: 1).first,
                record.counter == counter
            else {
                throw WireError(
                    .internalError,
                    "parked operation \(counter) of node \(origin.rawValue) is not in the replication log")
            }
            ops.append(try ReplicationLogCoding.operation(record, tx.read))
        }
        ops.sort { ($0.hlc, $0.origin, $0.counter) < ($1.hlc, $1.origin, $1.counter) }
        try tx.unpark(conversation)
        for op in ops {
            if case .partsEdited(let edited) = op.payload {
                try applyPartsEdited(edited, op)
                continue
            }
            guard let event = op.event else {
                throw WireError(.internalError, "a parked operation is not a conversation change")
            }
            _ = try applyEvent(event, op)
        }
    }

    /// Applies one replicated operation's effect; returns what the log keeps of it.
    private mutating func applyEvent(_ event: ChangeEvent, _ op: ReplicatedOperation) throws -> [UInt8] {
        var logged = try FeedCoding.encode(event)
        switch event {
        case .conversationCreated(let conversation):
            // A distinct creation logged before kind 69 existed says nothing of what it saw.
            try applyCreation(conversation, seen: VersionVector(), op)
            try unpark(conversation.id)
        case .participantsChanged(let change):
            guard let header = try replicaHeader(change.conversationID) else { break }
            let before = header.participants
            var applied = ParticipantsChanged(
                conversationID: header.id, added: [], removed: [], by: change.by, at: change.at)
            for u in change.added.sorted()
            where try tx.applyMembership(
                .add, user: u, conversation: header.id, actor: change.by, hlc: change.at, origin: op.origin)
            {
                applied.added.insert(u)
            }
            for u in change.removed.sorted()
            where try tx.applyMembership(
                .remove, user: u, conversation: header.id, actor: change.by, hlc: change.at, origin: op.origin)
            {
                applied.removed.insert(u)
            }
            if !applied.added.isEmpty || !applied.removed.isEmpty {
                let after = try tx.read.participants(of: header.id)
                _ = try announce(applied, before: before, after: after)
                try emitCounts(of: header.id, to: after)
            } else if header.isDistinct, !change.added.isEmpty || !change.removed.isEmpty {
                // Nobody's standing moved, but the conversation is no longer distinct.
                try emitCounts(of: header.id, to: before)
            }
        case .metadataChanged(var change):
            guard let header = try replicaHeader(change.conversationID) else { break }
            change.conversationID = header.id
            if try tx.setMetadata(change.value, at: change.keyPath, in: header.id, hlc: change.at, origin: op.origin) {
                try emit(.metadataChanged(change), to: header.participants, conversation: header.id)
            }
        case .conversationDeleted(var deletion):
            guard let header = try replicaHeader(deletion.conversationID) else { break }
            deletion.conversationID = header.id
            _ = try delete(deletion, participants: header.participants)
        case .messageCreated(var message):
            guard let header = try replicaHeader(message.conversationID), try tx.read.message(message.id) == nil else {
                break
            }
            message.conversationID = header.id
            message.thread = nil  // thread summaries are derived by every node, never replicated (SPEC §6.5)
            var statuses: [UserID: RecipientStatus] = [:]
            for p in header.participants { statuses[p] = p == message.sender ? .read : .sent }
            message.recipientStatus = statuses
            let isFirst = try tx.appendMessage(message, hlc: op.hlc, origin: op.origin)
            // Its rich content stays on the node that accepted it until this node fetches it.
            for part in message.parts {
                if case .external(let reference) = part.content {
                    try tx.expectReplicatedContent(reference, owner: message.sender, at: now)
                }
            }
            try announce(message, in: header, isFirst: isFirst)
            // Pushed to the devices whose tokens this node holds, as a local send is (SPEC §5.9).
            try engine.pushes.record(
                message, to: engine.blockLists.recipients(header.participants, of: message.sender), in: tx, at: now)
            logged = ReplicationLogCoding.messageReference(message.id)
        case .messageStatusChanged(let change):
            guard let header = try replicaHeader(change.conversationID),
                let stored = try tx.read.message(change.messageID)
            else { break }
            // A deleted message's status is recorded, but no device holds or counts it any more.
            if try tx.recordStatus(change.status, of: change.messageID, for: change.user) != nil, !stored.isDeleted {
                var moved = change
                moved.conversationID = header.id
                try emit(
                    .messageStatusChanged(moved), to: statusAudience(header), conversation: header.id,
                    message: change.messageID)
                if change.status == .read, engine.blockLists.blocked(by: change.user).contains(stored.message.sender) {
                    try emitCounts(of: header.id, to: [change.user])
                }
            }
        case .statusUpTo(var change):
            guard let header = try replicaHeader(change.conversationID) else { break }
            change.conversationID = header.id
            let marker: StatusMarker = change.status == .read ? .read : .delivered
            if try tx.raise(marker, to: change.upTo, user: change.user, conversation: header.id) {
                try emit(.statusUpTo(change), to: statusAudience(header), conversation: header.id)
                if marker == .read { try emitCounts(of: header.id, to: [change.user]) }
            }
        case .messageDeleted(var deletion):
            guard let header = try replicaHeader(deletion.conversationID),
                try tx.read.message(deletion.messageID) != nil
            else { break }
            deletion.conversationID = header.id
            _ = try delete(deletion, participants: header.participants)
        case .messagePartsChanged(let change):
            // From an older peer (no feature bit 20): the edit from the list held here to its
            // whole list (SPEC §6.2).
            guard let header = try replicaHeader(change.conversationID),
                let stored = try tx.read.message(change.messageID)
            else { break }
            let edit = MessagePartsEdit.diff(from: stored.message.parts, to: change.parts, at: change.at)
            try applyPartsEdit(edit, to: stored, in: header, by: change.by, op)
        case .reactionsChanged(let change):
            guard let header = try replicaHeader(change.conversationID) else { break }
            try applyReplicatedReaction(change, in: header)
        case .conversationUpdated, .identifierChanged, .typing, .identityChanged, .blockListChanged, .presenceChanged,
            .followChanged, .notificationLevelChanged:
            throw WireError(.invalidArgument, "a \(event.kind) change is not a replicated operation")
        case .channelCreated, .channelMembershipChanged, .channelMessage, .channelDeleted:
            logged = try applyChannelEvent(event)
        }
        return logged
    }

    /// Applies a per-part edit (REPLICATE kind 74) by LaminaMerge's `MessagePartsMap`.
    private mutating func applyPartsEdited(_ edited: MessagePartsEdited, _ op: ReplicatedOperation) throws {
        guard let header = try replicaHeader(edited.conversationID),
            let stored = try tx.read.message(edited.messageID)
        else { return }
        try applyPartsEdit(edited.edit, to: stored, in: header, by: edited.by, op)
    }

    /// Merges a replicated edit into a message's parts; the participants who receive the
    /// sender's messages get `message-parts-changed` with the merged list at the message's edit
    /// time when the list changed. A deleted message's registers change too (edit and deletion
    /// commute), but no device holds it any more.
    private mutating func applyPartsEdit(
        _ edit: MessagePartsEdit, to stored: MessageRecord, in header: ConversationHeader, by: UserID,
        _ op: ReplicatedOperation
    ) throws {
        guard
            let outcome = try tx.applyPartsEdit(
                of: stored.message.id, edit, origin: op.origin, by: by, evenIfDeleted: true),
            outcome.changedParts, !stored.isDeleted
        else { return }
        let change = MessagePartsChanged(
            conversationID: header.id, messageID: stored.message.id, parts: outcome.after, by: by,
            at: outcome.editedAt)
        _ = try announce(change, in: header, sender: stored.message.sender)
    }

    /// The live conversation an operation names (following a distinct merge), or nil when it
    /// was deleted here: an operation on a deleted conversation changes nothing.
    private func replicaHeader(_ named: ConversationID) throws -> ConversationHeader? {
        var found = try tx.conversationHeader(named)
        if found?.isLive != true, let target = try tx.read.resolvedConversation(named) {
            found = try tx.conversationHeader(target)
        }
        guard let header = found else { throw UnheldConversation(id: named) }
        return header.isLive ? header : nil
    }

    /// A conversation created on another node: stored as it was created there. A distinct one
    /// joins, by LaminaMerge's rule (`DistinctResolution.join`), the classes of the distinct
    /// conversations of its participant set that were created concurrently with it (neither
    /// origin had seen the other); the classes merge into their earliest creation, the same on
    /// every node whatever the order of arrival, and this node's devices that held a retired
    /// conversation are told its new identifier.
    private mutating func applyCreation(_ conversation: Conversation, seen: VersionVector, _ op: ReplicatedOperation)
        throws
    {
        guard try tx.read.conversation(conversation.id) == nil else { return }
        guard conversation.isDistinct else {
            let creation = try tx.createConversation(conversation, hlc: op.hlc, origin: op.origin)
            try emit(
                .conversationCreated(creation.conversation.conversation), to: [conversation.creator],
                conversation: conversation.id)
            return
        }
        let birth = DistinctBirth(
            candidate: DistinctCandidate(conversation, createdAt: op.hlc), origin: op.origin, counter: op.counter,
            seen: seen)
        let group = try tx.read.distinctBirths(participants: conversation.participants)
        var survivors: [ConversationID: ConversationID] = [:]
        for b in group { survivors[b.id] = try tx.read.resolvedConversation(b.id) ?? b.id }
        let live = try tx.read.distinctConversation(participants: conversation.participants)?.conversation.id
        let join = DistinctResolution.join(birth, group: group, survivorOf: { survivors[$0] ?? $0 }, alsoJoin: live)

        // What the devices knew before: the participants of each held conversation retired now.
        var audiences: [ConversationID: Set<UserID>] = [:]
        var distinct = true
        var deleted = false
        for id in join.retired + [join.survivor] where id != conversation.id {
            audiences[id] = try tx.read.participants(of: id)
            guard let flags = try tx.read.distinctFlags(of: id) else {
                throw WireError(.internalError, "conversation \(id) vanished")
            }
            distinct = distinct && flags.distinct
            deleted = deleted || flags.deleted
        }
        try tx.insertReplicatedDistinct(conversation, hlc: op.hlc, origin: op.origin)
        try tx.recordDistinctBirth(birth)
        guard !join.retired.isEmpty else {
            try tx.setDistinct(conversation.id, true)
            try emit(.conversationCreated(conversation), to: [conversation.creator], conversation: conversation.id)
            return
        }
        try tx.mergeDistinct(join, distinct: distinct, deleted: deleted)
        guard let merged = try tx.read.conversation(join.survivor) else {
            throw WireError(.internalError, "survivor \(join.survivor) vanished")
        }
        // Devices that held a retired conversation follow it to the survivor (the newcomer's
        // messages arrive later, named by its id, which resolves here).
        for (retired, audience) in audiences.sorted(by: { $0.key.uuid.uuidString < $1.key.uuid.uuidString })
        where retired != join.survivor {
            try emit(
                .identifierChanged(IdentifierChanged(from: retired, to: join.survivor)), to: audience,
                conversation: join.survivor)
        }
        let renamed = audiences.filter { $0.key != join.survivor }.values.reduce(into: Set<UserID>()) {
            $0.formUnion($1)
        }
        if merged.isDeleted {
            // Merged into a conversation deleted for everyone: gone for them too.
            if !renamed.isEmpty {
                try emit(
                    .conversationDeleted(
                        ConversationDeleted(
                            conversationID: join.survivor, mode: .allParticipants, below: nil, by: conversation.creator)
                    ),
                    to: renamed, conversation: join.survivor)
            }
        } else if !renamed.isEmpty {
            let audience = try tx.read.participants(of: join.survivor)
            try emit(.conversationCreated(merged.conversation), to: audience, conversation: join.survivor)
            try emitCounts(of: join.survivor, to: audience)
        }
    }
}

/// A replicated operation names a conversation this node has never held (it is parked).
struct UnheldConversation: Error {
    var id: ConversationID
}

extension NodeEngine {
    /// The highest counter this node holds durably per origin (its version vector).
    public func versionVector() async throws -> VersionVector {
        VersionVector(try await store.read { r in try r.versionVector() })
    }

    /// Operations this node holds that a peer with `vector` lacks, at most `limit`, in an
    /// order that keeps causes before effects: per origin by counter, origins merged by HLC
    /// (an operation made after another was received has a later reading).
    public func operations(missingFrom vector: VersionVector, limit: Int) async throws -> [ReplicatedOperation] {
        try await operationsAndVector(missingFrom: vector, limit: limit).operations
    }

    /// ``operations(missingFrom:limit:)`` and this node's vector, from one read.
    func operationsAndVector(missingFrom vector: VersionVector, limit: Int) async throws -> (
        operations: [ReplicatedOperation], ours: VersionVector
    ) {
        let theirs = vector.counters
        return try await store.read { r in
            var candidates: [ReplicatedOperation] = []
            let ours = try r.versionVector()
            for (origin, held) in ours where held > theirs[origin, default: 0] {
                for record in try r.operations(of: origin, after: theirs[origin, default: 0], limit: limit) {
                    candidates.append(try ReplicationLogCoding.operation(record, r))
                }
            }
            candidates.sort { ($0.hlc, $0.origin, $0.counter) < ($1.hlc, $1.origin, $1.counter) }
            // Per origin the list stays a prefix (ascending counters sort by HLC), so no gap.
            return (Array(candidates.prefix(limit)), VersionVector(ours))
        }
    }

    /// Applies operations from a peer in one transaction (each through the same rules as a
    /// local command), publishes the feed entries to live sessions after the commit, and
    /// returns the version vector then held (what PEER_ACK carries).
    public func applyReplicated(_ operations: [ReplicatedOperation]) async throws -> VersionVector {
        for op in operations where op.origin != configuration.nodeID {
            // Later local operations read later than anything received (causality, HLC rule).
            _ = try clock.withLockedValue { (c: inout HybridLogicalClock) throws(MergeError) -> HLCTimestamp in
                try c.receive(op.hlc, .now())
            }
        }
        let now = Timestamp.now()
        let expired = now.adding(.zero - configuration.parking.lifetime)
        let (changes, effects, blocked, vector, abandoned, deliveries) = try await store.write {
            [self] tx -> (
                [FeedChange], [UserStateEffect], [BlockChange: Bool], [NodeID: UInt64], Int,
                [(ChannelMessage, Set<UserID>)]
            ) in
            var changes: [FeedChange] = []
            var effects: [UserStateEffect] = []
            var deliveries: [(ChannelMessage, Set<UserID>)] = []
            // Parked operations whose conversation never came within the lifetime are given up.
            var abandoned = try tx.abandonParked(before: expired)
            for op in operations {
                var context = CommandContext(tx: tx, user: op.payload.actor, engine: self, now: now)
                try context.applyReplicated(op)
                changes += context.changes
                effects += context.userStateEffects
                deliveries += context.channelMessagesToDeliver
                abandoned += context.abandonedParked.count
            }
            // Block lists as they now stand, for the fan-out's copy.
            var blocked: [BlockChange: Bool] = [:]
            for case .block(let b) in effects { blocked[b] = try tx.read.blocks(of: b.blocker).contains(b.blocked) }
            return (changes, effects, blocked, try tx.read.versionVector(), abandoned, deliveries)
        }
        if abandoned > 0 { parkedAbandoned.withLockedValue { $0 += abandoned } }
        apply(effects, blocked: blocked)
        publish(changes)
        for (message, members) in deliveries { deliverLive(message, to: members) }
        announceReplicatedChannels(changes, messages: deliveries.map(\.0))
        if operations.contains(where: \.referencesContent) { contentSignal.notify() }
        return VersionVector(vector)
    }
}

extension NodeEngine {
    /// Parked replicated operations given up since the start: over a bound of
    /// ``ParkingLimits``, or parked longer than its lifetime (metrics, logs, tests).
    public var abandonedParkedOperations: Int { parkedAbandoned.withLockedValue { $0 } }
}

extension ReplicatedOperation {
    /// A sent message, of a conversation or a channel, with rich content (which this node then
    /// fetches from a peer).
    var referencesContent: Bool {
        let parts: [MessagePart]
        switch payload {
        case .change(.messageCreated(let message)): parts = message.parts
        case .change(.channelMessage(let message)): parts = message.parts
        default: return false
        }
        return parts.contains { if case .external = $0.content { true } else { false } }
    }
}

extension ReplicatedEvent {
    /// The user whose command made the change (for a replicated operation).
    var actor: UserID {
        switch self {
        case .change(let event): event.actor
        case .user(.identity(let i)): i.user
        case .user(.block(let b)): b.blocker
        case .user(.badge(let b)): b.user
        case .user(.sessionsRevoked(let user)): user
        case .user(.pushRegistration(let r)): r.user
        case .user(.suspension(let s)): s.user
        case .user(.follow(let f)): f.follower
        case .user(.notificationLevel(let n)): n.user
        case .distinctCreation(let d): d.conversation.creator
        case .partsEdited(let e): e.by
        }
    }
}

extension ChangeEvent {
    /// The user whose command made the change (for a replicated operation).
    var actor: UserID {
        switch self {
        case .conversationCreated(let c): c.creator
        case .participantsChanged(let p): p.by
        case .metadataChanged(let m): m.by
        case .conversationDeleted(let d): d.by
        case .messageCreated(let m): m.sender
        case .messageStatusChanged(let s): s.user
        case .messageDeleted(let d): d.by
        case .messagePartsChanged(let p): p.by
        case .reactionsChanged(let r): r.user
        case .statusUpTo(let s): s.user
        case .typing(let t): t.user
        case .identityChanged(let i): i.user
        case .presenceChanged(let p): p.user
        case .followChanged(let f): f.user
        case .channelCreated(let c): c.creator
        case .channelMembershipChanged(let c): c.by
        case .channelMessage(let m): m.sender
        case .channelDeleted(let d): d.by
        case .conversationUpdated, .identifierChanged, .blockListChanged, .notificationLevelChanged: "node"
        }
    }
}

/// What a node holds of the replicated state, comparable across nodes (SPEC §6.5): equal
/// digests on every node that holds the same operations.
public struct ConvergenceDigest: Sendable, Hashable {
    /// SHA-256 (hex) over every conversation's digest, in id order, then the users' digest,
    /// then the channels'.
    public var overall: String
    /// SHA-256 (hex) of each conversation's replicated state (`StorageReader.replicatedStates`).
    public var conversations: [ConversationID: String]
    /// SHA-256 (hex) of the replicated state about users (`StorageReader.replicatedUserState`).
    public var users: String
    /// SHA-256 (hex) of the channels' replicated state (`StorageReader.replicatedChannelState`).
    public var channels: String
    /// The version vector the state was read with.
    public var vector: VersionVector

    /// One JSON object: node, vector, overall digest, conversations.
    public func json(node: NodeID, peers: [NodeID: (received: Int, sent: Int)]) -> String {
        let vectorText = vector.counters.sorted { $0.key < $1.key }.map {
            "\"\(String($0.key.rawValue, radix: 16))\": \($0.value)"
        }.joined(separator: ", ")
        let peerText = peers.sorted { $0.key < $1.key }
            .map {
                "\"\(String($0.key.rawValue, radix: 16))\": {\"received\": \($0.value.received), \"sent\": \($0.value.sent)}"
            }.joined(separator: ", ")
        let conversationText = conversations.sorted { $0.key.uuid.uuidString < $1.key.uuid.uuidString }
            .map { "\"\($0.key.uuid.uuidString.lowercased())\": \"\($0.value)\"" }.joined(separator: ", ")
        return
            "{\"node\": \"\(String(node.rawValue, radix: 16))\", \"vector\": {\(vectorText)}, \"digest\": \"\(overall)\", \"peers\": {\(peerText)}, \"users\": \"\(users)\", \"conversations\": {\(conversationText)}}\n"
    }
}

extension NodeEngine {
    /// The digest of everything this node holds that replicates (one consistent read).
    public func convergenceDigest() async throws -> ConvergenceDigest {
        try await store.read { r in
            let states = try r.replicatedStates()
            var conversations: [ConversationID: String] = [:]
            var all: [UInt8] = []
            for (id, text) in states {
                let digest = try SHA256Hasher.hash(Array(text.utf8))
                conversations[id] = Hex.encode(digest)
                all += digest
            }
            let users = try SHA256Hasher.hash(Array(try r.replicatedUserState().utf8))
            all += users
            let channels = try SHA256Hasher.hash(Array(try r.replicatedChannelState().utf8))
            all += channels
            return ConvergenceDigest(
                overall: Hex.encode(try SHA256Hasher.hash(all)), conversations: conversations, users: Hex.encode(users),
                channels: Hex.encode(channels), vector: VersionVector(try r.versionVector()))
        }
    }
}
