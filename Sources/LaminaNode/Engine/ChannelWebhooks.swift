import LaminaModel
import LaminaStore

/// The webhook events of channels (Protocol/WEBHOOKS.md): queued in the command's own
/// transaction through the webhooks' outbox, so an event is delivered exactly when its command
/// committed, retried until the target takes it. Nothing is built when no webhook takes it.
extension NodeEngine {
    /// `Channel.created` or `Channel.deleted`: the channel with `memberCount` members.
    func recordChannelWebhook(
        _ type: WebhookEventType, _ channel: ChatChannel, memberCount: Int, by actor: UserID,
        in tx: StorageTransaction, at now: Timestamp
    ) throws {
        try webhooks.record(type, actor: actor, in: tx, at: now) {
            .channel(WebhookChannel(channel, memberCount: memberCount))
        }
    }

    /// `Membership.created` (joined, or added) or `Membership.deleted` (left, or removed).
    func recordMembershipWebhook(
        _ type: WebhookEventType, _ user: UserID, of channel: ChannelID, by actor: UserID,
        in tx: StorageTransaction, at now: Timestamp
    ) throws {
        try webhooks.record(type, actor: actor, in: tx, at: now) {
            .membership(WebhookMembership(channel: channel.uuid, user: user.rawValue))
        }
    }

    /// `ChannelMessage.created`: the message as stored, its place in the log included.
    func recordChannelMessageWebhook(_ message: ChannelMessage, in tx: StorageTransaction) throws {
        try webhooks.record(.channelMessageCreated, actor: message.sender, in: tx, at: message.sentAt) {
            .channelMessage(message)
        }
    }
}
