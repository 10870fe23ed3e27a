import LaminaModel

/// The JSON body of a webhook delivery (Layer's Webhooks 3.0): `event`, the `actor` when
/// known, the event's object (`message`, `conversation` with `changes`, `receipt`,
/// `message_part` with its `message`, `identity`, `channel`, `membership`, or a channel's
/// `message`), and the webhook's `config` when it has
/// one.
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

    /// A conversation's message (whole, or its ids only) or a channel's message.
    enum MessageField: Encodable, Sendable {
        case full(MessageObject)
        case reference(MessageReference)
        case channel(ChannelMessageObject)

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .full(let object): try object.encode(to: encoder)
            case .reference(let reference): try reference.encode(to: encoder)
            case .channel(let object): try object.encode(to: encoder)
            }
        }
    }

    var event: Event
    var actor: SenderObject?
    var message: MessageField?
    var conversation: Object<ConversationObject, ConversationReference>?
    /// `Channel.*`: the channel (as it was, for a deletion).
    var channel: ChannelObject?
    /// `Membership.*`: whose membership of which channel.
    var membership: WebhookMembershipObject?
    /// `Conversation.updated`: what changed.
    var changes: [WebhookChangeObject]?
    var receipt: WebhookReceiptObject?
    var message_part: PartObject?
    var identity: IdentityObject?
    /// `Message.reactions_changed`: whose reaction, which key, and whether it is there now.
    var reaction: WebhookReactionObject?
    var config: JSONValue?

    init(event: Event, actor: SenderObject?, config: JSONValue?) {
        self.event = event
        self.actor = actor
        self.config = config
    }
}

/// One entry of `Conversation.updated`'s `changes`: the property (`participants`, or
/// `metadata.<key path>`), its value before (`old_value`) and after (`new_value`); null where
/// a metadata key was absent. Participants appear as identities.
struct WebhookChangeObject: Encodable, Sendable {
    var property: String
    @Nullable var old_value: JSONValue?
    @Nullable var new_value: JSONValue?

    /// An edit's `parts`, before and after, as the Server API shows parts.
    init(parts before: [MessagePart], after: [MessagePart], of message: MessageID, _ r: ServerAPIRepresentation) {
        property = "parts"
        func json(_ parts: [MessagePart]) -> JSONValue? {
            (try? ServerAPIJSON.encode(r.parts(parts, of: message))).flatMap(ServerAPIJSON.value)
        }
        old_value = json(before)
        new_value = json(after)
    }

    init(_ change: WebhookConversationChange, _ r: ServerAPIRepresentation) {
        switch change {
        case .participants(let before, let after):
            property = "participants"
            func identities(_ users: [String]) -> JSONValue {
                .array(
                    users.compactMap { try? UserID($0) }.map { user in
                        guard let data = try? ServerAPIJSON.encode(r.participant(user)),
                            let value = ServerAPIJSON.value(data)
                        else { return .string(ServerAPIRepresentation.identityID(user)) }
                        return value
                    })
            }
            old_value = identities(before)
            new_value = identities(after)
        case .metadata(let path, let before, let after):
            property = path
            old_value = before
            new_value = after
        }
    }
}

/// `Receipt.created`'s `receipt`: `type` (`read` or `delivery`), the `position` up to which it
/// counts, the `conversation`, and the `message` when the receipt named one.
struct WebhookReceiptObject: Encodable, Sendable {
    var type: String
    var position: Int64
    var conversation: ConversationReference
    var message: MessageReference?

    init(_ receipt: WebhookReceipt, base: String) {
        type = receipt.type
        position = receipt.position
        let conversation = ConversationID(uuid: receipt.conversation)
        let uuid = receipt.conversation.uuidString.lowercased()
        self.conversation = ConversationReference(
            id: ServerAPIRepresentation.conversationID(conversation), url: "\(base)/conversations/\(uuid)")
        message = receipt.message.map { m in
            ServerAPIRepresentation(base: base, version: .v3).messageReference(MessageID(uuid: m), in: conversation)
        }
    }
}
