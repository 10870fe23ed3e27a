import Foundation
import LaminaModel
import LaminaStore
import NIOConcurrencyHelpers

/// The event types a webhook can subscribe to. The raw value is the name an outbox row keeps:
/// the early name, or Layer 3.0's name for the types that came with 3.0 (receipts, parts,
/// identities; ``WebhookEventNames``).
public enum WebhookEventType: String, Sendable, CaseIterable {
    case messageSent = "message.sent"
    case messageDeleted = "message.deleted"
    case messageUpdated = "message.updated"
    case conversationCreated = "conversation.created"
    case conversationUpdated = "conversation.updated"
    case conversationDeleted = "conversation.deleted"
    /// A user's read or delivery receipt: every message up to a position.
    case receiptCreated = "Receipt.created"
    /// A part added to a sent message (Server API 3.0).
    case messagePartCreated = "MessagePart.created"
    /// A part of a sent message given new content (same id).
    case messagePartUpdated = "MessagePart.updated"
    /// A part removed from a sent message.
    case messagePartDeleted = "MessagePart.deleted"
    /// An identity set for a user who had none.
    case identityCreated = "Identity.created"
    /// A user's identity replaced or changed.
    case identityUpdated = "Identity.updated"
    /// A user's identity deleted.
    case identityDeleted = "Identity.deleted"
    /// A channel created (SPEC §6.8; a name Lamina chose: Layer published no channel events).
    case channelCreated = "Channel.created"
    /// A channel deleted for everyone.
    case channelDeleted = "Channel.deleted"
    /// A user became a member of a channel: joined, or added by the Server API.
    case membershipCreated = "Membership.created"
    /// A user stopped being a member: left, or removed by the Server API.
    case membershipDeleted = "Membership.deleted"
    /// A message sent to a channel.
    case channelMessageCreated = "ChannelMessage.created"
    /// A user's reaction on a message appeared or went away (SPEC §6.9; a name Lamina chose:
    /// Layer had no reactions).
    case messageReactionsChanged = "Message.reactions_changed"
}

/// The write side of the webhooks' transactional outbox. Commands call ``record`` inside
/// their transaction: one queue row per event per active webhook subscribed to it, in the
/// same commit; with no such webhook nothing is built or written. A row holds the event's
/// facts (``WebhookEvent``), not its JSON: the delivery lane renders that when it sends, off
/// the writer thread. After the commit the delivery is woken for the webhooks that got rows.
///
/// The active subscriptions are kept here, changed by the management writes inside their
/// own transactions on the writer thread, so every command sees the set as of its place
/// in commit order.
final class WebhookOutbox: Sendable {
    /// Active webhooks and their event types.
    private let subscriptions = NIOLockedValueBox<[UUID: Set<String>]>([:])
    /// Webhooks given rows in the transaction being built (woken on its commit).
    private let wake = CommitWaker<UUID>()
    /// `https://host:port/apps/<app id>` for the `url` fields of payloads.
    private let base = NIOLockedValueBox("layer:///apps/unknown")

    /// Sets where payload URLs point and whom to wake after commits (nil: unchanged).
    func configure(base: String?, waker: (@Sendable ([UUID: Int]) -> Void)?) {
        if let base { self.base.withLockedValue { $0 = base } }
        if let waker { wake.setWaker(waker) }
    }

    /// Replaces the active subscriptions (start-up, and after a failed commit).
    func load(_ webhooks: [StoredWebhook]) {
        var active: [UUID: Set<String>] = [:]
        for w in webhooks where w.status == .active { active[w.id] = WebhookEventNames.types(w.events) }
        subscriptions.withLockedValue { $0 = active }
    }

    /// Inside a management transaction: the webhook now delivers `events`, or (nil) nothing.
    func setSubscription(_ id: UUID, events: [String]?) {
        subscriptions.withLockedValue { $0[id] = events.map(WebhookEventNames.types) }
    }

    /// Active webhooks known now.
    var activeCount: Int { subscriptions.withLockedValue { $0.values.count { _ in true } } }

    /// Whether any active webhook takes `type` (commands skip building the payload otherwise).
    func wants(_ type: WebhookEventType) -> Bool {
        subscriptions.withLockedValue { s in s.values.contains { $0.contains(type.rawValue) } }
    }

    /// Queues `type` for each active webhook subscribed to it, in `tx`. `subject` gives what
    /// the event is about and is called only when some webhook takes the event.
    func record(
        _ type: WebhookEventType, actor: UserID?, in tx: StorageTransaction, at time: Timestamp,
        subject: () throws -> WebhookEvent.Subject
    ) throws {
        let targets = subscriptions.withLockedValue { s in
            s.compactMap { $0.value.contains(type.rawValue) ? $0.key : nil }
        }
        guard !targets.isEmpty else { return }
        let event = WebhookEvent(
            type: type, createdAt: time, actor: actor, base: base.withLockedValue { $0 }, subject: try subject())
        let data: Data
        do { data = try event.facts() } catch {
            throw StorageError(.invalidArgument, "a webhook event does not encode: \(error)")
        }
        try tx.enqueueWebhookEvent(
            type.rawValue, payload: data, for: targets.sorted { $0.uuidString < $1.uuidString }, at: time)
        for target in targets { wake.queued(1, for: target, in: tx) }
    }
}
