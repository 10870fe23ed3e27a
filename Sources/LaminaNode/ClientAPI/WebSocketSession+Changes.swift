import LaminaModel
import LaminaStore
import LaminaWire

/// Feed entries as Layer `change` packets (and typing as `signal` packets), under the
/// session's lock.
extension WebSocketSession {
    func packets(for event: ChangeEvent, seq: UInt64?) {
        if announcementPackets(for: event, seq: seq) { return }
        let r = representation
        switch event {
        case .conversationCreated(let conversation):
            change("create", conversation: conversation.id, r.conversation(conversation), seq: seq)
        case .conversationUpdated(let updated):
            change(
                "update", conversation: updated.conversationID,
                [
                    WebSocketPatchOperation(
                        operation: "set", property: "unread_message_count",
                        value: .integer(Int64(clamping: updated.unreadCount))),
                    WebSocketPatchOperation(
                        operation: "set", property: "total_message_count",
                        value: .integer(Int64(clamping: updated.messageCount))),
                ], seq: seq)
        case .participantsChanged(let changed):
            var operations: [WebSocketPatchOperation] = []
            for user in changed.added.sorted() {
                operations.append(.init(operation: "add", property: "participants", value: participant(user)))
            }
            for user in changed.removed.sorted() {
                operations.append(.init(operation: "remove", property: "participants", value: participant(user)))
            }
            change("update", conversation: changed.conversationID, operations, seq: seq)
        case .metadataChanged(let changed):
            let property = "metadata.\(changed.keyPath)"
            let operation =
                changed.value.map {
                    WebSocketPatchOperation(
                        operation: "set", property: property, value: ServerAPIRepresentation.json($0))
                } ?? WebSocketPatchOperation(operation: "delete", property: property)
            change("update", conversation: changed.conversationID, [operation], seq: seq)
        case .conversationDeleted(let deleted):
            receipts.forget(deleted.conversationID)
            let mode = deleted.mode == .allParticipants ? "all_participants" : "my_devices"
            change(
                "delete", conversation: deleted.conversationID,
                WebSocketDeletionData(mode: mode, from_position: deleted.below.map(Self.position)), seq: seq)
        case .identifierChanged(let changed):
            // A distinct conversation resolved to another: the old id is gone (the other
            // arrives as its own create).
            change("delete", conversation: changed.from, WebSocketDeletionData(mode: "all_participants"), seq: seq)
        case .messageCreated(let message):
            receipts.record(message)
            change("create", message: message.id, in: message.conversationID, r.message(message), seq: seq)
        case .messageStatusChanged(let changed):
            guard receipts.apply(changed) else { return }
            change(
                "update", message: changed.messageID, in: changed.conversationID,
                [statusOperation(changed.user, changed.status)], seq: seq)
        case .statusUpTo(let range):
            for message in receipts.apply(range) {
                change(
                    "update", message: message, in: range.conversationID,
                    [statusOperation(range.user, range.status)], seq: seq)
            }
        case .messageDeleted(let deleted):
            receipts.forget(deleted.messageID, in: deleted.conversationID)
            let mode = deleted.mode == .allParticipants ? "all_participants" : "my_devices"
            change(
                "delete", message: deleted.messageID, in: deleted.conversationID, WebSocketDeletionData(mode: mode),
                seq: seq)
        case .messagePartsChanged(let changed):
            let parts = r.parts(
                Message(
                    id: changed.messageID, conversationID: changed.conversationID, sender: changed.by,
                    parts: changed.parts))
            let value = Self.json(parts) ?? .array([])
            // And the message's `edited_at` (a Lamina extension, as REST shows it): the update's time.
            let editedAt = ClientAPIRepresentation.date(
                Timestamp(millisecondsSince1970: Int64(clamping: changed.at.physical)))
            change(
                "update", message: changed.messageID, in: changed.conversationID,
                [
                    WebSocketPatchOperation(operation: "set", property: "parts", value: value),
                    WebSocketPatchOperation(operation: "set", property: "edited_at", value: .string(editedAt)),
                ], seq: seq)
        case .typing(let typing):
            guard typing.user != user else { return }
            let action =
                switch typing.state {
                case .started: "started"
                case .paused: "paused"
                case .finished: "finished"
                }
            write(
                "signal",
                WebSocketSignalBody(
                    object: .init(id: ClientAPIRepresentation.conversationID(typing.conversationID)),
                    data: .init(action: action, sender: r.identity(typing.user))),
                seq: seq)
        case .presenceChanged(let changed):
            // Only after `Presence.subscribe` (as Layer's node did).
            guard presenceSubscribed else { return }
            write("change", presenceChange(changed), seq: seq)
        case .identityChanged(let changed):
            identityPackets(changed, seq: seq)
        case .blockListChanged, .followChanged, .notificationLevelChanged:
            // Not part of Layer's WebSocket packets (block lists, follows and notification
            // levels are read over REST).
            break
        case .reactionsChanged(let changed):
            // A Lamina extension (SPEC §6.9): the message's `reactions` gain or lose one
            // (key, user) pair; REST shows them summed per key.
            let pair = JSONValue.object([
                "key": .string(changed.key), "user_id": .string(ClientAPIRepresentation.identityID(changed.user)),
            ])
            change(
                "update", message: changed.messageID, in: changed.conversationID,
                [
                    WebSocketPatchOperation(
                        operation: changed.present ? "add" : "remove", property: "reactions", value: pair)
                ], seq: seq)
        case .channelCreated, .channelMembershipChanged, .channelMessage, .channelDeleted:
            channelPackets(for: event, seq: seq)
        }
    }

    /// The user's announcements conversation as REST shows it: its messages are
    /// `Announcement` objects (created, read, deleted), the conversation itself is not shown.
    /// Whether `event` was one of its.
    private func announcementPackets(for event: ChangeEvent, seq: UInt64?) -> Bool {
        let mine = announcements
        switch event {
        case .conversationCreated(let c): return c.id == mine
        case .conversationUpdated(let u): return u.conversationID == mine
        case .participantsChanged(let c): return c.conversationID == mine
        case .metadataChanged(let c): return c.conversationID == mine
        case .conversationDeleted(let d): return d.conversationID == mine
        case .messageCreated(let m) where m.conversationID == mine:
            receipts.record(m)
            change("create", announcement: m.id, representation.announcement(m), seq: seq)
        case .messageStatusChanged(let c) where c.conversationID == mine:
            guard receipts.apply(c) else { return true }
            change("update", announcement: c.messageID, [statusOperation(c.user, c.status)], seq: seq)
        case .statusUpTo(let range) where range.conversationID == mine:
            for message in receipts.apply(range) {
                change("update", announcement: message, [statusOperation(range.user, range.status)], seq: seq)
            }
        case .messageDeleted(let d) where d.conversationID == mine:
            receipts.forget(d.messageID, in: d.conversationID)
            let mode = d.mode == .allParticipants ? "all_participants" : "my_devices"
            change("delete", announcement: d.messageID, WebSocketDeletionData(mode: mode), seq: seq)
        default: return false
        }
        return true
    }

    /// An identity's change (the feed sends it to the users who share a conversation with
    /// it): an `Identity` update setting every property (deleting those it no longer has), or
    /// its deletion. The socket's known identities follow it, so later packets show the name.
    private func identityPackets(_ changed: IdentityChange, seq: UInt64?) {
        let user = changed.user
        guard let identity = changed.identity else {
            representation.identities[user] = nil
            change("delete", identity: user, WebSocketDeletionData(mode: "all_participants"), seq: seq)
            return
        }
        if representation.identities[user] != nil || representation.identities.count < Self.maxKnownIdentities {
            representation.identities[user] = StoredIdentity(values: identity.values, metadata: identity.metadata)
        }
        var operations: [WebSocketPatchOperation] = []
        for field in StoredIdentity.fields {
            if let value = identity.values[field] ?? (field == "display_name" ? user.rawValue : nil) {
                operations.append(.init(operation: "set", property: field, value: .string(value)))
            } else {
                operations.append(.init(operation: "delete", property: field))
            }
        }
        operations.append(
            .init(operation: "set", property: "metadata", value: .object(identity.metadata.mapValues { .string($0) })))
        change("update", identity: user, operations, seq: seq)
    }

    private func change<Data: Encodable>(_ operation: String, identity user: UserID, _ data: Data, seq: UInt64?) {
        let shown = representation.identity(user)
        write(
            "change",
            WebSocketChangeBody(
                operation: operation,
                object: WebSocketObjectReference(
                    type: "Identity", id: ClientAPIRepresentation.identityID(user), url: shown.url ?? ""),
                data: data), seq: seq)
    }

    private func change<Data: Encodable>(
        _ operation: String, announcement message: MessageID, _ data: Data, seq: UInt64?
    ) {
        write(
            "change",
            WebSocketChangeBody(
                operation: operation,
                object: WebSocketObjectReference(
                    type: "Announcement", id: ClientAPIRepresentation.announcementID(message),
                    url: "\(representation.base)/announcements/\(ClientAPIRepresentation.lowercase(message.uuid))"),
                data: data), seq: seq)
    }

    private func change<Data: Encodable>(
        _ operation: String, conversation: ConversationID, _ data: Data, seq: UInt64?
    ) {
        let uuid = ClientAPIRepresentation.lowercase(conversation.uuid)
        write(
            "change",
            WebSocketChangeBody(
                operation: operation,
                object: WebSocketObjectReference(
                    type: "Conversation", id: ClientAPIRepresentation.conversationID(conversation),
                    url: "\(representation.base)/conversations/\(uuid)"),
                data: data), seq: seq)
    }

    private func change<Data: Encodable>(
        _ operation: String, message: MessageID, in conversation: ConversationID, _ data: Data, seq: UInt64?
    ) {
        let uuid = ClientAPIRepresentation.lowercase(message.uuid)
        write(
            "change",
            WebSocketChangeBody(
                operation: operation,
                object: WebSocketObjectReference(
                    type: "Message", id: ClientAPIRepresentation.messageID(message),
                    url: "\(representation.base)/messages/\(uuid)"),
                data: data), seq: seq)
    }

    /// A participant as a patch value: its identity object.
    private func participant(_ user: UserID) -> JSONValue {
        Self.json(representation.identity(user)) ?? .string(ClientAPIRepresentation.identityID(user))
    }

    /// A recipient's status as a patch of `recipient_status.<identity id>`.
    private func statusOperation(_ user: UserID, _ status: RecipientStatus) -> WebSocketPatchOperation {
        WebSocketPatchOperation(
            operation: "set", property: "recipient_status.\(ClientAPIRepresentation.identityID(user))",
            value: .string(ServerAPIRepresentation.status(status)))
    }

    /// An object as a patch value.
    static func json(_ value: some Encodable) -> JSONValue? {
        (try? ServerAPIJSON.encode(value)).flatMap(ServerAPIJSON.value)
    }

    /// A position as the Client API writes it.
    static func position(_ p: MessagePosition) -> Int64 { ClientAPIRepresentation.position(p) }
}
