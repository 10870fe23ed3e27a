import Foundation
import LaminaModel
import LaminaStore
import LaminaWire

/// What a `Message.reactions_changed` event keeps (SPEC §6.9, WEBHOOKS.md): the change, and the
/// message's reactions after it (by key, the users).
struct WebhookReaction: Codable, Equatable, Sendable {
    var key: String
    /// The user ids, as strings (the row's JSON).
    var user: String
    var present: Bool
    var reactions: [String: [String]]

    /// The reactions as the message object shows them.
    var summaries: [String: ReactionSummaryObject] {
        reactions.mapValues { users in
            ReactionSummaryObject(count: users.count, user_ids: users.sorted().map { "layer:///identities/\($0)" })
        }
    }
}

/// `Message.reactions_changed`'s `reaction`.
struct WebhookReactionObject: Encodable, Sendable {
    var key: String
    var user_id: String
    var present: Bool
}

extension CommandContext {
    /// Queues `Message.reactions_changed` for the webhooks subscribed to it (nothing is read or
    /// written when none is): the message with its reactions after the change.
    func recordReactionWebhook(_ change: ReactionsChanged, message: Message) throws {
        try engine.webhooks.record(.messageReactionsChanged, actor: change.user, in: tx, at: now) {
            var reactions: [String: [String]] = [:]
            for p in try tx.read.presentReactions(on: [message.id]) {
                reactions[p.key, default: []].append(p.user.rawValue)
            }
            return .reaction(
                message,
                WebhookReaction(
                    key: change.key, user: change.user.rawValue, present: change.present, reactions: reactions))
        }
    }
}
