/// The names a webhook may subscribe by: the early names (`message.sent`, …, what the node
/// served first) and Layer's Webhooks 3.0 names (`Message.created`, …). A webhook's events are
/// delivered under the names it subscribed by: the `layer-webhook-event-type` header and the
/// payload's `event.type` carry the name it used. Events without a 3.0 name (`message.updated`,
/// a parts change as a whole) keep their early name; events that came with 3.0 (receipts,
/// parts, identities) have only their 3.0 name.
public enum WebhookEventNames {
    /// Layer 3.0's name of each event type that has one.
    static let layer3: [WebhookEventType: String] = [
        .messageSent: "Message.created",
        .messageDeleted: "Message.deleted",
        .conversationCreated: "Conversation.created",
        .conversationUpdated: "Conversation.updated",
        .conversationDeleted: "Conversation.deleted",
        .receiptCreated: "Receipt.created",
        .messagePartCreated: "MessagePart.created",
        .messagePartUpdated: "MessagePart.updated",
        .messagePartDeleted: "MessagePart.deleted",
        .identityCreated: "Identity.created",
        .identityUpdated: "Identity.updated",
        .identityDeleted: "Identity.deleted",
        // Lamina's name (issue 38): an edit by the sender, with the parts before and after.
        .messageUpdated: "Message.edited",
    ]

    private static let byName: [String: WebhookEventType] = {
        var out: [String: WebhookEventType] = [:]
        for type in WebhookEventType.allCases { out[type.rawValue] = type }
        for (type, name) in layer3 { out[name] = type }
        return out
    }()

    /// Every name a registration may use, sorted.
    public static var all: [String] { byName.keys.sorted() }

    /// The event type a subscribed name stands for (nil: no such name).
    public static func type(named name: String) -> WebhookEventType? { byName[name] }

    /// The event types a webhook's subscribed names stand for, as the outbox matches them.
    static func types(_ names: [String]) -> Set<String> { Set(names.compactMap { byName[$0]?.rawValue }) }

    /// The name `type` is delivered under to a webhook that subscribed with `subscribed`: its
    /// 3.0 name when that is how the webhook asked for it, else the early name.
    static func name(of type: WebhookEventType, for subscribed: [String]) -> String {
        if let name = layer3[type], subscribed.contains(name) { return name }
        return type.rawValue
    }
}
