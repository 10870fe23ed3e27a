import LaminaModel
import LaminaWire

/// Feed entries as Layer `change` packets (and typing as `signal` packets), under the
/// session's lock.
extension WebSocketSession {
    func packets(for event: ChangeEvent, seq: UInt64?) {
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
            change(
                "update", message: changed.messageID, in: changed.conversationID,
                [WebSocketPatchOperation(operation: "set", property: "parts", value: value)], seq: seq)
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
        case .identityChanged, .blockListChanged, .followChanged:
            // Not carried yet: identity changes, block lists and follows are read over REST
            // (identities inside packets show the profiles read when the socket opened).
            break
        case .channelCreated, .channelMembershipChanged, .channelMessage, .channelDeleted:
            // Channels are not in the Client API yet (sync protocol only, SPEC §6.8).
            break
        }
    }

    private func change<Data: Encodable>(
        _ operation: String, conversation: ConversationID, _ data: Data, seq: UInt64?
    ) {
        let uuid = conversation.uuid.uuidString.lowercased()
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
        let uuid = message.uuid.uuidString.lowercased()
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
