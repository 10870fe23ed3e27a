import Foundation
import LaminaModel
import LaminaWire

/// What a run of node changes means for the local store (SPEC §6.3, §6.4).
public struct DecodedChanges: Hashable, Sendable {
    /// The store changes, in feed order.
    public var changes: [RemoteChange] = []
    /// The highest feed seq among them, when above the cursor they were decoded against.
    public var cursor: UInt64?
    /// Typing indicators of other users (seq 0, never stored).
    public var typing: [TypingChanged] = []
    /// Presence of followed users and of the user themself (seq 0, never stored, SPEC §6.6).
    public var presence: [PresenceChanged] = []
    /// Messages that arrived from other users: the delivery receipts to send.
    public var receivedFromOthers: [Message] = []
    /// Entries skipped because their seq was at or below the cursor (at-least-once delivery).
    public var duplicatesSkipped = 0
    /// Conversations sent outside the feed (seq 0 `conversation-created`): a snapshot's,
    /// when they come before the SYNC's ACK (SPEC §6.3).
    public var unsequencedConversations: [ConversationID] = []

    public init() {}
}

/// What the node's answer to one command means for its outbox entry (SPEC §5.5, §5.6, §7).
public enum OutboxCompletion: Hashable, Sendable {
    /// ACK: the command is durable; for SEND_MESSAGE it carries position and sent-at, for
    /// CREATE_CONVERSATION the conversation it resolved to.
    case acknowledged(UUID, Ack)
    /// ERROR with a code not worth retrying: the entry fails with the node's code and reason.
    /// `conversationID` names the existing conversation for `existing-distinct-conversation`.
    case failed(UUID, code: WireError.Code, reason: String, conversationID: ConversationID?)
    /// ERROR with a transient code: send the same command again, after `after` when given.
    case retry(UUID, after: Duration?)
}

/// Maps node frames to store changes and outbox completions. Pure.
public enum ChangeDecoder {
    /// The error codes after which a retry may succeed (SPEC §7).
    public static let transientCodes: Set<WireError.Code> = [
        .overloaded, .quotaExceeded, .contentNotReady, .internalError, .shuttingDown,
    ]

    /// Decodes feed entries against the device's `cursor`: entries with 0 < seq <= cursor
    /// were applied before and are skipped; seq 0 entries (history, snapshots, typing) never
    /// move the cursor. `receivedAt` stamps new messages.
    public static func decode(_ entries: [Change], after cursor: UInt64, localUser: UserID, receivedAt: Timestamp)
        -> DecodedChanges
    {
        var out = DecodedChanges()
        var highest = cursor
        // A history answer's or snapshot's reactions (seq 0) replace those of the messages they
        // follow (SPEC §6.9): gathered per message, so each message changes once.
        let answered = answeredReactions(entries)
        for entry in entries {
            if entry.seq != 0 {
                guard entry.seq > highest else {
                    out.duplicatesSkipped += 1
                    continue
                }
                highest = entry.seq
            }
            switch entry.event {
            case .typing(let t):
                if t.user != localUser { out.typing.append(t) }
            case .presenceChanged(let p):
                out.presence.append(p)
            case .messageCreated(let m):
                out.changes.append(.message(m, receivedAt: receivedAt))
                if entry.seq == 0 { out.changes.append(.reactionsReplaced(m.id, answered[m.id] ?? [:])) }
                // Counts grow by the feed's messages only (history and snapshots are counted
                // in the node's counts already): SPEC §6.4.
                if entry.seq != 0 { out.changes.append(.messageCounted(m.conversationID, m.id)) }
                if m.sender != localUser { out.receivedFromOthers.append(m) }
            case .messageStatusChanged(let s):
                if entry.seq != 0, s.user == localUser, s.status == .read {
                    out.changes.append(.readCounted(s.conversationID, s.messageID))
                }
                out.changes.append(.recipientStatus(s.messageID, user: s.user, status: s.status))
            case .conversationCreated(let c):
                if entry.seq == 0 { out.unsequencedConversations.append(c.id) }
                out.changes.append(.conversation(c))
            case .reactionsChanged(let r) where entry.seq == 0 && answered[r.messageID] != nil:
                // Applied with its message's replacement above.
                break
            default:
                if let change = remoteChange(entry.event, receivedAt: receivedAt) { out.changes.append(change) }
            }
        }
        if highest > cursor { out.cursor = highest }
        return out
    }

    /// The store change of one event; nil for typing, which the store does not keep.
    public static func remoteChange(_ event: ChangeEvent, receivedAt: Timestamp) -> RemoteChange? {
        switch event {
        case .conversationCreated(let c): .conversation(c)
        case .conversationUpdated(let u):
            .counts(
                u.conversationID,
                NodeCounts(
                    messages: Int(clamping: u.messageCount), unread: Int(clamping: u.unreadCount),
                    lastMessageID: u.lastMessageID),
                isDistinct: u.isDistinct, deliveryReceiptsEnabled: u.deliveryReceiptsEnabled,
                readReceiptsEnabled: u.readReceiptsEnabled)
        case .participantsChanged(let p): .participants(p.conversationID, added: p.added, removed: p.removed)
        case .metadataChanged(let m): .metadata(m.conversationID, path: m.keyPath, value: m.value)
        case .conversationDeleted(let d):
            d.below.map { .messagesDeleted(d.conversationID, below: $0) } ?? .conversationDeleted(d.conversationID)
        case .identifierChanged(let i): .distinctMerge(from: i.from, into: i.to)
        case .messageCreated(let m): .message(m, receivedAt: receivedAt)
        case .messageStatusChanged(let s): .recipientStatus(s.messageID, user: s.user, status: s.status)
        case .messageDeleted(let d): .messageDeleted(d.messageID)
        case .messagePartsChanged(let p):
            .messageParts(
                p.messageID, parts: p.parts,
                editedAt: Timestamp(millisecondsSince1970: Int64(clamping: p.at.physical)))
        case .identityChanged(let i):
            .identity(i.user, i.identity.map { UserIdentity(userID: i.user, values: $0.values, metadata: $0.metadata) })
        case .blockListChanged(let c): .blockList(c.user, blocking: c.blocking)
        case .followChanged(let c): .following(c.user, following: c.following)
        case .notificationLevelChanged(let c): .notificationLevel(c.conversationID, c.level, until: c.until)
        case .typing, .presenceChanged: nil
        case .channelCreated(let c): .channel(c)
        case .channelMembershipChanged(let m): .channelMembership(m.channelID, isMember: m.joined)
        case .channelMessage(let m): .channelMessage(m)
        case .channelDeleted(let d): .channelDeleted(d.channelID)
        case .statusUpTo(let s): .statusUpTo(s.conversationID, user: s.user, status: s.status, upTo: s.upTo)
        case .reactionsChanged(let r): .reaction(r.messageID, user: r.user, key: r.key, present: r.present)
        }
    }

    /// The seq 0 reactions among `entries` of messages that came with seq 0 among them too.
    static func answeredReactions(_ entries: [Change]) -> [MessageID: [String: Set<UserID>]] {
        var answered: Set<MessageID> = []
        var out: [MessageID: [String: Set<UserID>]] = [:]
        for entry in entries where entry.seq == 0 {
            switch entry.event {
            case .messageCreated(let m): answered.insert(m.id)
            case .reactionsChanged(let r) where r.present && answered.contains(r.messageID):
                out[r.messageID, default: [:]][r.key, default: []].insert(r.user)
            default: break
            }
        }
        return out
    }

    /// The completion an ACK or a command's ERROR gives; nil for other frames and for
    /// errors about the stream (no request id).
    public static func completion(_ frame: Frame) -> OutboxCompletion? {
        switch frame {
        case .ack(let ack):
            return .acknowledged(ack.requestID, ack)
        case .error(let error):
            guard let id = error.requestID else { return nil }
            if transientCodes.contains(error.code) {
                return .retry(id, after: error.retryAfterMilliseconds.map { .milliseconds(Int64($0)) })
            }
            return .failed(id, code: error.code, reason: error.reason, conversationID: error.conversationID)
        default:
            return nil
        }
    }

    /// Delivery receipts for messages received from others (SPEC §6.2 DELIVERY_RECEIPT):
    /// one per conversation, up to the highest position received there.
    public static func deliveryReceipts(for messages: [Message], requestID: () -> UUID = UUID.init) -> [DeliveryReceipt]
    {
        var highest: [ConversationID: MessagePosition] = [:]
        var order: [ConversationID] = []
        for m in messages {
            guard let p = m.position else { continue }
            if let h = highest[m.conversationID] {
                if p > h { highest[m.conversationID] = p }
            } else {
                highest[m.conversationID] = p
                order.append(m.conversationID)
            }
        }
        return order.map { DeliveryReceipt(requestID: requestID(), conversationID: $0, upTo: highest[$0]!) }
    }
}
