import Foundation
import LaminaModel
import LaminaWire

/// `request` packets as sync frames (event loop). Each request that becomes a command waits
/// for its ACK or ERROR (``WebSocketSession/Pending``) and counts against
/// ``WebSocketSession/maxRequestsInFlight``; bad input is answered at once with Layer's error.
extension WebSocketSession {
    func handle(_ request: WebSocketRequest) {
        do {
            switch request.method {
            case .counterRead:
                lockedCounterResponse(request.requestID)
            case .eventReplay:
                try replay(request)
            case .messageCreate:
                try createMessage(request)
            case .conversationCreate:
                try createConversation(request)
            case .presenceSubscribe:
                subscribePresence(request)
            case .presenceUpdate:
                try updatePresence(request)
            case .presenceSync:
                try syncPresence(request)
            }
        } catch let error as ServerAPIError {
            respond(to: request.requestID, error: error)
        } catch {
            respond(to: request.requestID, error: .internalError("\(error)"))
        }
    }

    /// `Counter.read`: the counter of the answer itself (the Web SDK compares it with the
    /// last one it saw to find a gap).
    private func lockedCounterResponse(_ requestID: String) {
        let counter = withLockedCounter { $0 }
        respond(to: requestID, data: WebSocketCounterData(counter: counter))
    }

    /// `Event.replay {from_timestamp}`: a SYNC from the feed position the timestamp names; the
    /// entries this connection has not sent come as `change` packets, then the answer.
    private func replay(_ request: WebSocketRequest) throws {
        guard let text = request.data?.object?["from_timestamp"]?.string else {
            throw ServerAPIError.missingProperty("data.from_timestamp")
        }
        guard let cursor = WebSocketTimestamp.seq(from: text) else {
            throw ServerAPIError.invalidProperty("data.from_timestamp", "from_timestamp is an ISO 8601 time")
        }
        let id = UUID()
        guard replayStarted(request.requestID, cursor: cursor, id: id) else {
            throw ServerAPIError.invalidRequest("a replay is already running on this connection")
        }
        requestStarted()
        submit(.sync(SyncRequest(requestID: id, cursor: cursor)))
    }

    /// `Message.create`: `object_id` the conversation (or a channel: ``createChannelMessage(_:in:)``),
    /// `data` {parts, id?, notification?}.
    private func createMessage(_ request: WebSocketRequest) throws {
        guard let object = request.objectID else { throw ServerAPIError.missingProperty("object_id") }
        if object.hasPrefix("layer:///channels/") {
            guard let channel = ClientAPIRepresentation.channel(object) else {
                throw ServerAPIError.invalidProperty("object_id", "object_id is a channel id")
            }
            return try createChannelMessage(request, in: channel)
        }
        guard let conversation = Self.conversationID(object) else {
            throw ServerAPIError.invalidProperty("object_id", "object_id is a conversation id")
        }
        guard let data = request.data?.object else { throw ServerAPIError.missingProperty("data") }
        var id = MessageID(uuid: UUID())
        if let raw = data["id"], !raw.isNull {
            guard let text = raw.string, let given = Self.messageID(text) else {
                throw ServerAPIError.invalidProperty("data.id", "id is layer:///messages/<uuid>")
            }
            id = given
        }
        let (parts, push) = try ServerAPI.content(data, of: id)
        let message = Message(
            id: id, conversationID: conversation, sender: user, parts: parts, push: push, recipientStatus: [:])
        expect(id.uuid, .message(requestID: request.requestID, message))
        requestStarted()
        submit(.sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: parts, push: push)))
    }

    /// `Conversation.create`: `data` {participants, distinct?, metadata?, id?}; the caller is a
    /// participant whether listed or not.
    private func createConversation(_ request: WebSocketRequest) throws {
        guard let data = request.data?.object else { throw ServerAPIError.missingProperty("data") }
        guard let list = data["participants"]?.array else {
            throw ServerAPIError.missingProperty("data.participants")
        }
        var participants: Set<UserID> = [user]
        for (index, item) in list.enumerated() {
            let reference = item.object?["id"] ?? item.object?["user_id"] ?? item
            participants.insert(try ServerAPIRepresentation.user(reference, property: "data.participants[\(index)]"))
        }
        let options = try ClientConversationOptions(data, prefix: "data.")
        let (distinct, metadata) = (options.distinct, options.metadata)
        var id = ConversationID(uuid: UUID())
        if let raw = data["id"], !raw.isNull {
            guard let text = raw.string, let given = Self.conversationID(text) else {
                throw ServerAPIError.invalidProperty("data.id", "id is layer:///conversations/<uuid>")
            }
            id = given
        }
        expect(id.uuid, .conversation(requestID: request.requestID, id))
        requestStarted()
        submit(
            .createConversation(
                CreateConversation(
                    conversationID: id, participants: participants,
                    options: ConversationOptions(isDistinct: distinct, metadata: metadata))))
    }
}
