/// The JSON body of a webhook delivery (Layer's Webhooks 3.0): `event`, the `actor` when
/// known, `message` or `conversation` (whole, or by id for deletions), and the webhook's
/// `config` when it has one.
struct WebhookPayload: Encodable, Sendable {
    struct Event: Encodable, Sendable {
        var type: String
        var id: String
        var created_at: String
    }

    /// A whole object, or its ids only (deletions).
    enum Object<Full: Encodable & Sendable, Reference: Encodable & Sendable>: Encodable, Sendable {
        case full(Full)
        case reference(Reference)

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .full(let object): try object.encode(to: encoder)
            case .reference(let reference): try reference.encode(to: encoder)
            }
        }
    }

    var event: Event
    var actor: SenderObject?
    var message: Object<MessageObject, MessageReference>?
    var conversation: Object<ConversationObject, ConversationReference>?
    var config: JSONValue?

    init(event: Event, actor: SenderObject?, config: JSONValue?) {
        self.event = event
        self.actor = actor
        self.config = config
    }
}
