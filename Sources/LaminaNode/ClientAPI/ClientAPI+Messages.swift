import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire

extension ClientAPI {
    /// GET /conversations/:id/messages: the newest `page_size` messages, newest first, older
    /// than `from_id` when given; `Layer-Count` is how many the user can see in all.
    func listMessages(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let stored = try await visibleConversation(try r.conversationID(), for: user)
        let pageSize = try r.pageSize()
        let id = stored.conversation.id
        var before: MessagePosition?
        if let from = r.query["from_id"] {
            guard let message = ClientAPIRepresentation.message(from),
                let record = try await engine.store.read({ reader in try reader.message(message) }),
                record.message.conversationID == id, let position = record.message.position
            else { throw ServerAPIError.invalidProperty("from_id", "from_id names no message of this conversation") }
            before = position
        }
        let query: HistoryQuery = before.map { .lastBefore($0, after: nil, count: pageSize) } ?? .last(pageSize)
        let (messages, counts) = try await engine.store.read { reader -> ([Message], ConversationCounts) in
            let page = try reader.history(of: id, for: user, query)
            return (page, try reader.counts(of: id, for: user, blocked: Set(try reader.blocks(of: user))))
        }
        let summarized = try await engine.store.read { reader in try reader.withThreadSummaries(messages) }
        let shown = try await threaded(r, summarized)
        let reactions = try await reactionSummaries(of: summarized.map(\.id), seenBy: user)
        return ServerAPIJSON.response(
            200,
            summarized.reversed().map { m in
                var object = shown.message(m)
                object.reactions = reactions[m.id] ?? [:]
                return object
            }, extraHeaders: [("layer-count", "\(counts.messages)")])
    }

    /// POST /conversations/:id/messages `{"parts", "notification", "id"}`: 201 with the
    /// message, sent as the user; a retry (same `id`, same content) answers the same;
    /// `id_in_use` (409, the existing message in `data`) when `id` names another message.
    func sendMessage(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let object = try await sendMessage(r, conversation: try r.conversationID(), body: try r.object())
        return ServerAPIJSON.response(201, object, extraHeaders: [("location", object.url)])
    }

    /// Sending from a request body (REST, and the WebSocket's `Message.create`).
    func sendMessage(_ r: ClientAPIRequest, conversation: ConversationID, body: [String: JSONValue]) async throws
        -> ClientMessageObject
    {
        let user = try r.requireSession().user
        let id = try Self.chosenMessageID(body)
        // Rich content was uploaded first (POST /content, PUT upload_url): parts name it.
        let (parts, push) = try ServerAPI.content(body, of: id, uploads: try await referencedContent(body))
        let mentions = try MentionsJSON.mentions(body)
        _ = try await visibleConversation(conversation, for: user)
        let frame = Frame.sendMessage(
            SendMessage(
                messageID: id, conversationID: conversation, parts: parts, push: push,
                replyTo: try ServerAPI.replyTo(body), mentions: mentions))
        do {
            _ = try await engine.runServerAPICommand(frame, as: user)
        } catch let error as WireError where error.code == .idInUse {
            var e = ServerAPIError.idInUse("id \(ClientAPIRepresentation.messageID(id)) is in use")
            if let existing = try await engine.store.read({ reader in try reader.message(id, as: user) }),
                try await engine.store.read({ reader in try reader.conversation(existing.conversationID) })?
                    .conversation.participants.contains(user) == true
            {
                e.data = Self.json(try await representation(r, users: [existing.sender]).message(existing))
            }
            throw e
        }
        guard let stored = try await engine.store.read({ reader in try reader.message(id, as: user) }) else {
            throw ServerAPIError.internalError("the message was not stored")
        }
        return try await threaded(r, [stored]).message(stored)
    }

    /// The message id a body names (`id`: `layer:///messages/<uuid>`), else a new one.
    static func chosenMessageID(_ body: [String: JSONValue]) throws(ServerAPIError) -> MessageID {
        guard let raw = body["id"], !raw.isNull else { return MessageID(uuid: UUID()) }
        guard let text = raw.string, let chosen = ClientAPIRepresentation.message(text) else {
            throw .invalidProperty("id", "id must be layer:///messages/<uuid>")
        }
        return chosen
    }

    /// GET /messages/:id (404 unless the user can see it).
    func getMessage(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let message = try await visibleMessage(try r.messageID(), for: user)
        let summarized = try await engine.store.read { reader in try reader.withThreadSummaries([message]) }
        var object = try await threaded(r, summarized).message(summarized[0])
        object.reactions = try await reactionSummaries(of: [message.id], seenBy: user)[message.id] ?? [:]
        return ServerAPIJSON.response(200, object)
    }

    /// DELETE /messages/:id?mode=all_participants|my_devices: 204.
    func deleteMessage(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let mode = try Self.deletionMode(r)
        let message = try await visibleMessage(try r.messageID(), for: user)
        let frame = Frame.deleteMessage(
            DeleteMessage(requestID: UUID(), conversationID: message.conversationID, messageID: message.id, mode: mode))
        _ = try await engine.runServerAPICommand(frame, as: user)
        return HTTPResponse(status: 204)
    }

    /// POST /messages/:id/receipts `{"type": "read" | "delivery"}`: 204. A read receipt
    /// marks that message read; a delivery receipt marks every message up to it delivered
    /// (receipts are ranges, SPEC §6.2).
    func sendReceipt(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let body = try r.object()
        guard let raw = body["type"] else { throw ServerAPIError.missingProperty("type") }
        let message = try await visibleMessage(try r.messageID(), for: user)
        let frame: Frame
        switch raw.string {
        case "read"?:
            frame = .markRead(
                MarkRead(requestID: UUID(), conversationID: message.conversationID, messageID: message.id))
        case "delivery"?:
            guard let position = message.position else { return HTTPResponse(status: 204) }
            frame = .deliveryReceipt(
                DeliveryReceipt(requestID: UUID(), conversationID: message.conversationID, upTo: position))
        default: throw ServerAPIError.invalidProperty("type", "type must be read or delivery")
        }
        _ = try await engine.runServerAPICommand(frame, as: user)
        return HTTPResponse(status: 204)
    }

    /// The message as `user` sees it: 404 unless it is in a conversation they take (or
    /// took) part in and they may see it; 410 once deleted.
    func visibleMessage(_ id: MessageID, for user: UserID) async throws -> Message {
        let found = try await engine.store.read { reader -> (MessageRecord, Message?)? in
            guard let record = try reader.message(id) else { return nil }
            guard let conversation = try reader.conversation(record.message.conversationID),
                conversation.conversation.participants.contains(user)
            else { return nil }
            return (record, record.isDeleted ? nil : try reader.message(id, as: user))
        }
        guard let found else { throw ServerAPIError.notFound("no message \(ClientAPIRepresentation.messageID(id))") }
        let (record, message) = found
        guard !record.isDeleted, let message else {
            throw ServerAPIError.objectDeleted("message \(ClientAPIRepresentation.messageID(id)) was deleted")
        }
        return message
    }
}
