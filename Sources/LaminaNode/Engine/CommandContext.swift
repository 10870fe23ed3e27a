import Foundation
import LaminaMerge
import LaminaModel
import LaminaStore
import LaminaWire

/// One command inside its transaction: authorizes, decides (HLC from the node's clock,
/// last-writer-wins and status lattices in storage), writes, and appends the feed entries.
struct CommandContext {
    let tx: StorageTransaction
    let user: UserID
    let engine: NodeEngine
    let now: Timestamp
    /// Feed entries appended so far (published after the commit).
    var changes: [FeedChange] = []
    /// Set when the command is answered with this error although what it wrote commits
    /// (a distinct creation refused for its metadata still records its alias).
    var refusal: DistinctConflict?
    /// What replicated user-state changes require of the engine after the commit.
    var userStateEffects: [UserStateEffect] = []
    /// Channel messages from peers appended here, with the channel's members, delivered live
    /// to those online after the commit (SPEC §6.8).
    var channelMessagesToDeliver: [(ChannelMessage, Set<UserID>)] = []
    /// Parked operations given up to park another (``ParkingLimits``), origin and counter.
    var abandonedParked: [(NodeID, UInt64)] = []
    /// Whether the command has written anything (a send that fails before it may be a retry,
    /// answered from what the first attempt stored).
    private(set) var startedWriting = false
    /// Per-recipient push configurations replacing the message's (the Server API's overrides).
    var pushOverrides: [UserID: PushConfiguration] = [:]
    /// Besides the sender's own, the uploads a sent message may reference: the Server API's
    /// (content a backend uploaded, owned by ``ServerAPI/contentOwner``).
    var contentOwner: UserID?
    /// Non-nil while the Server API applies a PATCH: the `Conversation.updated` changes its
    /// commands make wait here with the index of their operation (``patchOperation``), and go
    /// out as one event per operation (``flushConversationUpdated(_:)``).
    var pendingConversationChanges: [(operation: Int, change: WebhookConversationChange)]?
    /// The PATCH operation whose commands run now.
    var patchOperation = 0

    var origin: NodeID { engine.configuration.nodeID }

    /// Applies one command; `digest` (the SHA-256 of its encoding) is kept with a sent message
    /// so a retry is recognised without an idempotency record.
    mutating func apply(_ frame: Frame, digest: [UInt8]? = nil) throws -> Ack {
        switch frame {
        case .createConversation(let f): return try createConversation(f)
        case .addParticipants(let f): return try changeParticipants(f, .add)
        case .removeParticipants(let f): return try changeParticipants(f, .remove)
        case .setMetadata(let f): return try setMetadata(f.conversationID, f.keyPath, f.value, f.requestID)
        case .deleteMetadata(let f): return try setMetadata(f.conversationID, f.keyPath, nil, f.requestID)
        case .deleteConversation(let f): return try deleteConversation(f)
        case .markAllRead(let f): return try markAllRead(f)
        case .sendMessage(let f): return try sendMessage(f, digest: digest)
        case .markRead(let f): return try markRead(f)
        case .deleteMessage(let f): return try deleteMessage(f)
        case .deliveryReceipt(let f): return try deliveryReceipt(f)
        case .updateMessageParts(let f): return try updateMessageParts(f)
        case .react(let f): return try react(f)
        default: throw WireError(.unexpectedFrame, "\(frame.type.name) is not a command")
        }
    }

    /// Appends `event` to the feeds of `users`; returns its feed encoding (also what the
    /// replication log keeps of it).
    @discardableResult
    mutating func emit(
        _ event: ChangeEvent, to users: Set<UserID>, conversation: ConversationID?, message: MessageID? = nil
    ) throws -> [UInt8] {
        let shared = try SharedChangeEvent(event)
        let payload = try FeedCoding.encode(shared)
        guard !users.isEmpty else { return payload }
        let seqs = try tx.appendChange(
            to: users, kind: event.kind, conversation: conversation, message: message, payload: payload, at: now)
        for (u, seq) in seqs.sorted(by: { $0.key < $1.key }) {
            changes.append(FeedChange(user: u, seq: seq, shared: shared))
        }
        return payload
    }

    /// The live conversation's header, if the user takes part in it now. An id that names no
    /// live conversation is resolved first (an alias or a merged-away id, SPEC §6.1): the
    /// header is then the target's, and commands use its `id`.
    func member(of named: ConversationID) throws -> ConversationHeader {
        let header = try live(named)
        let id = header.id
        guard let state = header.states[user] else {
            throw WireError(.notAParticipant, "\(user) is not a participant of \(id)")
        }
        guard state.isMember else { throw WireError(.removedParticipant, "\(user) was removed from \(id)") }
        return header
    }

    /// The live conversation's header (an alias or a merged-away id resolved first), whoever asks.
    func live(_ named: ConversationID) throws -> ConversationHeader {
        var found = try tx.conversationHeader(named)
        if found?.isLive != true, let target = try tx.read.resolvedConversation(named) {
            found = try tx.conversationHeader(target)
        }
        guard let header = found, header.isLive else { throw WireError(.notFound, "no conversation \(named)") }
        return header
    }

    /// Whom a status change of a conversation reaches: everyone (each client shows it by the
    /// conversation's switches, SPEC §6.2), or only the user's own devices when both receipt
    /// switches are off.
    func statusAudience(_ header: ConversationHeader) -> Set<UserID> {
        header.sharesStatuses ? header.participants : [user]
    }

    // MARK: Conversations

    mutating func createConversation(_ f: CreateConversation) throws -> Ack {
        // A retry of a creation that resolved to another conversation (its id is an alias).
        if let alias = try tx.read.alias(f.conversationID) {
            guard alias.user == user else { throw WireError(.idInUse, "conversation id \(f.conversationID) is in use") }
            guard let existing = try tx.read.conversation(alias.conversation), existing.isLive else {
                throw WireError(.notFound, "no conversation \(alias.conversation)")
            }
            return try resolve(f, into: existing.conversation)
        }
        let conversation = try Conversation(
            id: f.conversationID, creator: user, participants: f.participants, options: f.options, createdAt: now)
        let hlc = try engine.nextHLC()
        let creation = try tx.createConversation(conversation, hlc: hlc, origin: origin)
        guard creation.created else {
            let existing = creation.conversation.conversation
            guard existing.id != conversation.id else {
                throw WireError(.idInUse, "conversation id \(conversation.id) is in use")
            }
            return try resolve(f, into: existing)
        }
        // Others see the conversation with its first message (SPEC §6.2).
        let created = try emit(
            .conversationCreated(creation.conversation.conversation), to: [user], conversation: conversation.id)
        if conversation.isDistinct {
            // Peers learn what this node had seen of the participant set's other distinct
            // conversations (none live here now), so all decide its merges alike (SPEC §6.5).
            let seen = VersionVector(try tx.read.versionVector())
            let counter = try replicate(
                try ReplicationLogCoding.distinctCreation(
                    DistinctCreation(conversation: creation.conversation.conversation, seen: seen)), at: hlc)
            try tx.recordDistinctBirth(
                DistinctBirth(
                    candidate: DistinctCandidate(creation.conversation.conversation, createdAt: hlc), origin: origin,
                    counter: counter, seen: seen))
        } else {
            try replicate(created, at: hlc)
        }
        try engine.webhooks.record(.conversationCreated, actor: user, in: tx, at: now) {
            .conversation(creation.conversation.conversation)
        }
        return Ack(requestID: f.conversationID.uuid, conversationID: conversation.id)
    }

    /// A distinct creation that resolved to the live distinct conversation `existing`: its id
    /// becomes an alias of `existing`, so the commands pipelined behind it that name it apply
    /// to `existing` (SPEC §6.1), whether the answer is the ACK or `existing-distinct-conversation`.
    private mutating func resolve(_ f: CreateConversation, into existing: Conversation) throws -> Ack {
        try tx.recordAlias(f.conversationID, of: existing.id, by: user, at: now)
        let ack = Ack(requestID: f.conversationID.uuid, conversationID: existing.id)
        if !f.options.metadata.values.isEmpty, f.options.metadata != existing.metadata {
            refusal = DistinctConflict(existing: existing.id)
            return ack
        }
        // The caller's devices learn the conversation they now share as it is (creator,
        // creation time), even before its first message makes it visible to them, with counts.
        try emit(.conversationCreated(existing), to: [user], conversation: existing.id)
        try emitCounts(of: existing.id, to: [user])
        return ack
    }

    mutating func changeParticipants(_ f: ParticipantsUpdate, _ operation: LaminaStore.MembershipOperation) throws
        -> Ack
    {
        let stored = try member(of: f.conversationID)
        let id = stored.id
        let before = stored.participants
        if operation == .add { for u in f.users { try u.checkIsUser() } }
        let hlc = try engine.nextHLC()
        var changed = Set<UserID>()
        for u in f.users.sorted() {
            let didChange = try tx.applyMembership(
                operation, user: u, conversation: id, actor: user, hlc: hlc, origin: origin)
            if didChange { changed.insert(u) }
        }
        let after = try tx.read.participants(of: id)
        guard after.count <= stored.participantLimit else {
            throw WireError(
                .tooManyParticipants, "\(after.count) participants exceed the limit of \(stored.participantLimit)")
        }
        guard !after.isEmpty else { throw WireError(.noParticipants, "a conversation keeps at least one participant") }
        if !changed.isEmpty {
            let event = ParticipantsChanged(
                conversationID: id, added: operation == .add ? changed : [],
                removed: operation == .remove ? changed : [],
                by: user, at: hlc)
            _ = try announce(event, before: before, after: after)
            // New participants need their counts, the others (removed ones too) the distinct
            // flag it may clear.
            try emitCounts(of: id, to: before.union(after))
            try recordConversationUpdated(id, WebhookConversationChange.participants(before, after))
        } else if stored.isDistinct, !f.users.isEmpty {
            // Nobody's standing moved, but the conversation is no longer distinct.
            try emitCounts(of: id, to: after)
        }
        // Every operation is logged, also one that changed nothing here: it still decides
        // against concurrent operations of other nodes (the latest reading wins).
        let issued = ParticipantsChanged(
            conversationID: id, added: operation == .add ? f.users : [], removed: operation == .remove ? f.users : [],
            by: user, at: hlc)
        try replicate(try FeedCoding.encode(.participantsChanged(issued)), at: hlc)
        return Ack(requestID: f.requestID, conversationID: id)
    }

    /// Tells the feeds of a membership change: a new participant's feed gets the conversation
    /// before the change to it (SPEC §6.1); everyone before or after gets the change. Returns
    /// the change's encoding.
    mutating func announce(_ event: ParticipantsChanged, before: Set<UserID>, after: Set<UserID>) throws -> [UInt8] {
        if !event.added.isEmpty, let now = try tx.read.conversation(event.conversationID) {
            try emit(.conversationCreated(now.conversation), to: event.added, conversation: event.conversationID)
        }
        return try emit(.participantsChanged(event), to: before.union(after), conversation: event.conversationID)
    }

    mutating func setMetadata(
        _ named: ConversationID, _ path: MetadataKeyPath, _ value: MetadataValue?, _ requestID: UUID
    ) throws -> Ack {
        let stored = try member(of: named)
        let id = stored.id
        let hlc = try engine.nextHLC()
        let old =
            engine.webhooks.wants(.conversationUpdated) ? try tx.read.conversation(id)?.conversation.metadata : nil
        _ = try tx.setMetadata(value, at: path, in: id, hlc: hlc, origin: origin)
        try replicate(
            try emit(
                .metadataChanged(MetadataChanged(conversationID: id, keyPath: path, value: value, by: user, at: hlc)),
                to: stored.participants, conversation: id),
            at: hlc)
        if let old {
            let new = try tx.read.conversation(id)?.conversation.metadata
            try recordConversationUpdated(id, WebhookConversationChange.metadata(path, old[path], new?[path]))
        }
        return Ack(requestID: requestID, conversationID: id)
    }

    mutating func deleteConversation(_ f: DeleteConversation) throws -> Ack {
        let stored = try member(of: f.conversationID)
        let id = stored.id
        let deletion = ConversationDeleted(conversationID: id, mode: f.mode, below: f.below, by: user)
        // The event carries the conversation as it was (Layer's deletions carry the object).
        let was =
            f.mode == .allParticipants && f.below == nil && engine.webhooks.wants(.conversationDeleted)
            ? try tx.read.conversation(id)?.conversation : nil
        try replicate(try delete(deletion, participants: stored.participants), at: try engine.nextHLC())
        if let was {
            try engine.webhooks.record(.conversationDeleted, actor: user, in: tx, at: now) { .conversation(was) }
        }
        return Ack(requestID: f.requestID, conversationID: id)
    }

    /// Applies a conversation deletion and tells the feeds; returns the change's encoding.
    mutating func delete(_ deletion: ConversationDeleted, participants: Set<UserID>) throws -> [UInt8] {
        let id = deletion.conversationID
        let event = ChangeEvent.conversationDeleted(deletion)
        switch (deletion.mode, deletion.below) {
        case (.myDevices, _):
            // Only the sender's devices drop it; the node keeps it for the others.
            return try emit(event, to: [deletion.by], conversation: id)
        case (.allParticipants, nil):
            try tx.deleteConversation(id)
            return try emit(event, to: participants, conversation: id)
        case (.allParticipants, let below?):
            try tx.deleteMessages(of: id, before: below)
            let payload = try emit(event, to: participants, conversation: id)
            try emitCounts(of: id, to: participants)
            return payload
        }
    }

    mutating func markAllRead(_ f: MarkAllRead) throws -> Ack {
        let stored = try member(of: f.conversationID)
        try raiseStatus(.read, upTo: f.upTo, in: stored)
        return Ack(requestID: f.requestID, conversationID: stored.id)
    }

    /// Moves the user's `marker` up to `upTo` (at most the conversation's latest message,
    /// so a message accepted later is not covered by a receipt that never saw it) and, when
    /// it moved, tells the audience with one `status-up-to` change for the whole range.
    mutating func raiseStatus(_ marker: StatusMarker, upTo: MessagePosition, in stored: ConversationHeader) throws {
        guard let last = try tx.read.lastPosition(of: stored.id) else { return }
        let bound = min(upTo, last)
        guard try tx.raise(marker, to: bound, user: user, conversation: stored.id) else { return }
        let event = StatusUpTo(conversationID: stored.id, user: user, status: marker.status, upTo: bound)
        try replicate(
            try emit(.statusUpTo(event), to: statusAudience(stored), conversation: stored.id), at: try engine.nextHLC())
        try recordReceipt(WebhookReceipt(status: marker.status, conversation: stored.id, upTo: bound, message: nil))
        // A range read moves the reader's unread count by what the range covers: the node counts it.
        if marker == .read { try emitCounts(of: stored.id, to: [user]) }
    }

    mutating func emitStatus(_ status: RecipientStatus, of message: MessageID, in stored: ConversationHeader) throws
        -> [UInt8]
    {
        let event = MessageStatusChanged(conversationID: stored.id, messageID: message, user: user, status: status)
        return try emit(
            .messageStatusChanged(event), to: statusAudience(stored), conversation: stored.id, message: message)
    }

    // MARK: Messages

    mutating func sendMessage(_ f: SendMessage, digest: [UInt8]?) throws -> Ack {
        // A named system sender (only the Server API acts as one) sends to any live conversation.
        let stored = user.isSystemSender ? try live(f.conversationID) : try member(of: f.conversationID)
        let id = stored.id
        let participants = stored.participants
        var statuses: [UserID: RecipientStatus] = [:]
        for p in participants { statuses[p] = p == user ? .read : .sent }
        let position = try engine.nextHLC()
        if let root = f.replyTo { try Threads.checkReplyTarget(root, in: id, tx.read) }
        // SPEC §3.17: mentions of users who are not participants now are dropped, not refused.
        let message = Message(
            id: f.messageID, conversationID: id, sender: user, parts: f.parts, sentAt: now, position: position,
            push: f.push, recipientStatus: statuses, replyTo: f.replyTo, mentions: f.mentions.intersection(participants)
        )
        try message.validate()
        if let refused = try ContentReferenceCheck.check(
            message.parts, sender: user, contentOwner: contentOwner, in: tx.read)
        {
            throw refused
        }
        let isFirst: Bool
        startedWriting = true
        do {
            isFirst = try tx.appendMessage(message, hlc: position, origin: origin, requestDigest: digest)
        } catch {
            guard error.code == .alreadyExists else { throw error }
            startedWriting = false  // the message row is the first write, and it was refused
            throw WireError(.idInUse, "message id \(message.id) is in use")
        }
        try announce(message, in: stored, isFirst: isFirst)
        try replicate(ReplicationLogCoding.messageReference(message.id), at: position)
        try engine.webhooks.record(.messageSent, actor: user, in: tx, at: now) { .message(message) }
        try engine.pushes.record(
            message, to: engine.blockLists.recipients(participants, of: user), overrides: pushOverrides, in: tx, at: now
        )
        return Ack(requestID: f.messageID.uuid, conversationID: id, position: position, timestamp: now)
    }

    /// `conversation.updated` for the webhooks that take it, with the conversation as it is now
    /// and what changed (nothing is recorded when nothing changed); while a PATCH operation
    /// groups its commands (``pendingConversationChanges``), the change waits for its group.
    private mutating func recordConversationUpdated(_ id: ConversationID, _ change: WebhookConversationChange?) throws {
        guard let change, engine.webhooks.wants(.conversationUpdated) else { return }
        if pendingConversationChanges != nil {
            pendingConversationChanges?.append((patchOperation, change))
            return
        }
        try recordConversationUpdated(id, changes: [change])
    }

    private func recordConversationUpdated(_ id: ConversationID, changes: [WebhookConversationChange]) throws {
        guard !changes.isEmpty, let now = try tx.read.conversation(id) else { return }
        try engine.webhooks.record(.conversationUpdated, actor: user, in: tx, at: self.now) {
            .conversationUpdate(now.conversation, changes)
        }
    }

    /// One `Conversation.updated` per PATCH operation that changed something, in operation
    /// order, each with its operation's changes: the participant changes of one operation (a
    /// `set` is an add and a remove, removals run last) become one entry from the first's old
    /// value to the last's new value.
    mutating func flushConversationUpdated(_ id: ConversationID) throws {
        guard let pending = pendingConversationChanges else { return }
        pendingConversationChanges = nil
        for operation in Set(pending.map(\.operation)).sorted() {
            var changes: [WebhookConversationChange] = []
            var participants: (before: [String], after: [String])?
            for entry in pending where entry.operation == operation {
                if case .participants(let before, let after) = entry.change {
                    participants = (participants?.before ?? before, after)
                } else {
                    changes.append(entry.change)
                }
            }
            if let participants, participants.before != participants.after {
                changes.insert(.participants(before: participants.before, after: participants.after), at: 0)
            }
            try recordConversationUpdated(id, changes: changes)
        }
    }

    /// `Receipt.created` for the webhooks that take it: the user's receipt.
    func recordReceipt(_ receipt: WebhookReceipt) throws {
        try engine.webhooks.record(.receiptCreated, actor: user, in: tx, at: now) { .receipt(receipt) }
    }

    /// Appends a stored message to its participants' feeds, except those of participants who
    /// block its sender (they still learn of the conversation); the conversation first to the
    /// others when this is its first message (SPEC §6.2). Not to its creator: their feed got it
    /// when they created it (a second `conversation-created` was a Conversation `create`
    /// packet on their Client API WebSocket for a conversation it already showed).
    mutating func announce(_ message: Message, in stored: ConversationHeader, isFirst: Bool) throws {
        let id = stored.id
        let participants = stored.participants
        if isFirst, let conversation = try tx.read.conversation(id) {
            try emit(
                .conversationCreated(conversation.conversation),
                to: participants.subtracting([message.sender, conversation.conversation.creator]), conversation: id)
        }
        let event = ChangeEvent.messageCreated(message)
        let recipients = engine.blockLists.recipients(participants, of: message.sender)
        let seqs = try tx.appendMessageCreated(message.id, in: id, to: recipients, kind: event.kind, at: now)
        // One encoding for every feed; when each sees only its own status (both switches off)
        // every status in it is `invalid` and each feed's CHANGE gets its own status byte put in
        // (`Message.reported(to:)`). One switch off shows a new message's statuses (read, sent)
        // as they are.
        let shared = try FeedCoding.messageCreated(message, sharesStatuses: stored.sharesStatuses)
        for (u, seq) in seqs.sorted(by: { $0.key < $1.key }) {
            changes.append(FeedChange(user: u, seq: seq, shared: shared))
        }
    }

    /// The message, if it belongs to the conversation and is not deleted.
    func message(_ id: MessageID, in conversation: ConversationID) throws -> Message {
        guard let stored = try tx.read.message(id), stored.message.conversationID == conversation, !stored.isDeleted
        else {
            throw WireError(.notFound, "no message \(id) in \(conversation)")
        }
        return stored.message
    }

    mutating func markRead(_ f: MarkRead) throws -> Ack {
        let stored = try member(of: f.conversationID)
        let message = try message(f.messageID, in: stored.id)
        if message.sender != user {
            let change = try tx.recordStatus(.read, of: message.id, for: user)
            if change != nil {
                try replicate(try emitStatus(.read, of: message.id, in: stored), at: try engine.nextHLC())
                if let position = message.position {
                    try recordReceipt(
                        WebhookReceipt(status: .read, conversation: stored.id, upTo: position, message: message.id))
                }
                // The reader's devices count this read themselves, unless the message is one
                // their counts leave out (its sender is blocked): then the node tells them.
                if engine.blockLists.blocked(by: user).contains(message.sender) {
                    try emitCounts(of: stored.id, to: [user])
                }
            }
        }
        return Ack(requestID: f.requestID, conversationID: stored.id)
    }

    mutating func deleteMessage(_ f: DeleteMessage) throws -> Ack {
        let stored = try member(of: f.conversationID)
        let message = try message(f.messageID, in: stored.id)
        let deletion = MessageDeleted(conversationID: stored.id, messageID: message.id, mode: f.mode, by: user)
        try replicate(try delete(deletion, participants: stored.participants), at: try engine.nextHLC())
        if f.mode == .allParticipants {
            // The event carries the message as it was (Layer's deletions carry the object).
            try engine.webhooks.record(.messageDeleted, actor: user, in: tx, at: now) { .message(message) }
        }
        return Ack(requestID: f.requestID, conversationID: stored.id)
    }

    /// Applies a message deletion and tells the feeds; returns the change's encoding.
    mutating func delete(_ deletion: MessageDeleted, participants: Set<UserID>) throws -> [UInt8] {
        let event = ChangeEvent.messageDeleted(deletion)
        switch deletion.mode {
        case .myDevices:
            return try emit(
                event, to: [deletion.by], conversation: deletion.conversationID, message: deletion.messageID)
        case .allParticipants:
            try tx.deleteMessage(deletion.messageID)
            let payload = try emit(
                event, to: participants, conversation: deletion.conversationID, message: deletion.messageID)
            try emitCounts(of: deletion.conversationID, to: participants)
            return payload
        }
    }

    /// UPDATE_MESSAGE_PARTS: the sender (or the Server API on its behalf) replaces the parts of
    /// a message it sent; the participants who receive the sender's messages get
    /// `message-parts-changed` with the whole new list.
    mutating func updateMessageParts(_ f: UpdateMessageParts) throws -> Ack {
        let stored = user.isSystemSender ? try live(f.conversationID) : try member(of: f.conversationID)
        let message = try message(f.messageID, in: stored.id)
        guard message.sender == user else {
            throw WireError(.forbidden, "only the sender of \(message.id) may change its parts")
        }
        try Message.validate(parts: f.parts)
        for part in f.parts {
            if case .external = part.content {
                throw WireError(
                    .invalidArgument, "a part update carries inline parts only (rich content is sent with SEND_MESSAGE)"
                )
            }
        }
        let hlc = try engine.nextHLC()
        // Per part (SPEC §6.2): the parts whose id is new or whose value changed are set at this
        // reading, the ids gone are removed; the parts that stay unchanged keep theirs.
        let edit = MessagePartsEdit.diff(from: message.parts, to: f.parts, at: hlc)
        guard let outcome = try tx.applyPartsEdit(of: message.id, edit, origin: origin, by: user),
            outcome.after == f.parts
        else {
            throw WireError(.internalError, "the node's clock went back: \(hlc) is not after the message's parts")
        }
        let event = MessagePartsChanged(
            conversationID: stored.id, messageID: message.id, parts: f.parts, by: user, at: hlc)
        _ = try announce(event, in: stored, sender: message.sender)
        let edited = MessagePartsEdited(
            conversationID: stored.id, messageID: message.id, parts: f.parts, set: Set(edit.set.map(\.id)),
            removed: Set(edit.removed), by: user, at: hlc)
        try replicate(try ReplicationLogCoding.partsEdited(edited), at: hlc)
        try engine.webhooks.record(.messageUpdated, actor: user, in: tx, at: now) {
            var updated = message
            updated.parts = f.parts
            return .edited(updated, before: message.parts)
        }
        try recordPartChanges(of: message, to: f.parts)
        return Ack(requestID: f.requestID, conversationID: stored.id)
    }

    /// Tells a part update to the participants who receive `sender`'s messages; returns the
    /// change's encoding.
    mutating func announce(_ event: MessagePartsChanged, in stored: ConversationHeader, sender: UserID) throws
        -> [UInt8]
    {
        try emit(
            .messagePartsChanged(event), to: engine.blockLists.recipients(stored.participants, of: sender),
            conversation: stored.id, message: event.messageID)
    }

    /// DELIVERY_RECEIPT: the user's status becomes at least delivered for every message of
    /// others up to `upTo` (one range update); ignored (but acknowledged) when receipts are
    /// disabled.
    mutating func deliveryReceipt(_ f: DeliveryReceipt) throws -> Ack {
        let stored = try member(of: f.conversationID)
        guard stored.deliveryReceiptsEnabled else { return Ack(requestID: f.requestID, conversationID: stored.id) }
        try raiseStatus(.delivered, upTo: f.upTo, in: stored)
        return Ack(requestID: f.requestID, conversationID: stored.id)
    }
}

extension Message {
    /// The message as `viewer` is shown it in a conversation with both receipt switches off:
    /// their own status, `invalid` for everyone else (`RecipientStatusLattice.reported`).
    func reported(to viewer: UserID) -> Message {
        var out = self
        for (user, status) in recipientStatus {
            out.recipientStatus[user] = RecipientStatusLattice.reported(
                status, of: user, viewer: viewer, receiptsEnabled: false)
        }
        return out
    }
}

extension CommandContext {
    /// `MessagePart.created`, `.updated` and `.deleted` for a part update of `message`: the
    /// parts by id, new ones created, ones with other content or type updated, missing ones
    /// deleted (carrying the part as it was).
    func recordPartChanges(of message: Message, to parts: [MessagePart]) throws {
        let old = Dictionary(message.parts.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let new = Set(parts.map(\.id))
        func only(_ part: MessagePart) -> WebhookEvent.Subject {
            var m = message
            m.parts = [part]
            return .part(m)
        }
        for part in parts {
            if let before = old[part.id] {
                if before != part {
                    try engine.webhooks.record(.messagePartUpdated, actor: user, in: tx, at: now) { only(part) }
                }
            } else {
                try engine.webhooks.record(.messagePartCreated, actor: user, in: tx, at: now) { only(part) }
            }
        }
        for part in message.parts where !new.contains(part.id) {
            try engine.webhooks.record(.messagePartDeleted, actor: user, in: tx, at: now) { only(part) }
        }
    }
}
