import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire

extension ServerAPI {
    /// POST /conversations: 201 with the new conversation; 200 with the existing distinct
    /// one (metadata absent or equal); 409 `conflict` when its metadata differs. The new
    /// conversation reaches every participant's devices at once, empty.
    func createConversation(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let id = ConversationID(uuid: try r.requestID() ?? UUID())
        let body = try ServerAPIJSON.object(r.http.body)
        guard let rawParticipants = body["participants"] else { throw ServerAPIError.missingProperty("participants") }
        guard let list = rawParticipants.array else {
            throw ServerAPIError.invalidProperty("participants", "participants must be an array of user ids")
        }
        var users = Set<UserID>()
        for item in list { users.insert(try ServerAPIRepresentation.user(item, property: "participants")) }
        let participants = users
        guard let creator = participants.sorted().first else {
            throw ServerAPIError.invalidProperty("participants", "a conversation needs at least one participant")
        }
        var distinct = true
        if let value = body["distinct"] {
            guard let flag = value.bool else {
                throw ServerAPIError.invalidProperty("distinct", "distinct must be true or false")
            }
            distinct = flag
        }
        var metadata = Metadata()
        if let value = body["metadata"], !value.isNull {
            guard let object = value.object else {
                throw ServerAPIError.invalidProperty("metadata", "metadata must be an object of strings and objects")
            }
            for (key, v) in object {
                metadata.values[key] = try ServerAPIRepresentation.metadataValue(v, property: "metadata.\(key)")
            }
        }
        let frame = Frame.createConversation(
            CreateConversation(
                conversationID: id, participants: participants,
                options: ConversationOptions(isDistinct: distinct, metadata: metadata)))
        let result = try await engine.runServerAPICommand(frame, as: creator) { context, ack in
            // Created now: the other participants learn of it at once, not with its first message.
            guard ack.conversationID == id, let created = try context.tx.read.conversation(id) else { return }
            try context.emit(
                .conversationCreated(created.conversation), to: participants.subtracting([creator]), conversation: id)
        }
        guard let resolved = result.ack.conversationID,
            let stored = try await engine.store.read({ r in try r.conversation(resolved) })
        else { throw ServerAPIError.internalError("the conversation was not stored") }
        let object = try await representation(r, users: stored.conversation.participants).conversation(
            stored.conversation)
        let status = resolved == id && (result.applied || r.http.headers["if-none-match"] != nil) ? 201 : 200
        return ServerAPIJSON.response(status, object, extraHeaders: [("location", object.url)])
    }

    /// GET /conversations/:id.
    func getConversation(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let stored = try await liveConversation(try r.conversationID())
        return ServerAPIJSON.response(
            200, try await representation(r, users: stored.conversation.participants).conversation(stored.conversation))
    }

    /// GET /users/:user_id/conversations: the user's conversations, newest first
    /// (`sort_by=created_at` or `last_message`), `page_size`, `from_id` (after that one).
    func listConversations(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let user = try r.userID()
        let pageSize = try r.pageSize()
        let sort = r.query["sort_by"] ?? "created_at"
        guard ["created_at", "last_message"].contains(sort) else {
            throw ServerAPIError.invalidProperty("sort_by", "sort_by must be created_at or last_message")
        }
        let all = try await engine.store.read { reader -> [(StoredConversation, MessagePosition?)] in
            try reader.conversations(of: user).filter(\.isLive).map {
                ($0, sort == "last_message" ? try reader.lastPosition(of: $0.conversation.id) : nil)
            }
        }
        var ordered: [Conversation]
        if sort == "last_message" {
            ordered = all.sorted {
                ($0.1 ?? .zero, $0.0.conversation.createdAt.millisecondsSince1970) > (
                    $1.1 ?? .zero, $1.0.conversation.createdAt.millisecondsSince1970
                )
            }.map(\.0.conversation)
        } else {
            ordered = all.map(\.0.conversation).sorted {
                ($0.createdAt.millisecondsSince1970, $0.id.uuid.uuidString) > (
                    $1.createdAt.millisecondsSince1970, $1.id.uuid.uuidString
                )
            }
        }
        if let from = r.query["from_id"] {
            let uuid = UUID(uuidString: from.replacingOccurrences(of: "layer:///conversations/", with: ""))
            guard let uuid, let index = ordered.firstIndex(where: { $0.id.uuid == uuid }) else {
                throw ServerAPIError.invalidProperty("from_id", "from_id names no conversation of \(user)")
            }
            ordered.removeFirst(index + 1)
        }
        let total = all.count
        let page = Array(ordered.prefix(pageSize))
        let shown = try await representation(r, users: Set(page.flatMap(\.participants)))
        return ServerAPIJSON.response(200, page.map(shown.conversation), extraHeaders: [Self.layerCount(total)])
    }

    /// DELETE /conversations/:id: deleted for every participant (204).
    func deleteConversation(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let stored = try await liveConversation(try r.conversationID())
        let actor = Self.actor(of: stored.conversation)
        let frame = Frame.deleteConversation(
            DeleteConversation(requestID: UUID(), conversationID: stored.conversation.id, mode: .allParticipants))
        _ = try await engine.runServerAPICommand(frame, as: actor)
        return HTTPResponse(status: 204)
    }

    /// PATCH /conversations/:id with `application/vnd.layer-patch+json` operations on
    /// `participants` (add, remove, set) and `metadata[.path]` (set, delete): all or none (204).
    func patchConversation(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        try ConversationPatch.checkContentType(r.http.headers["content-type"])
        let operations = try ServerAPIJSON.array(r.http.body)
        let stored = try await liveConversation(try r.conversationID())
        let (ordered, participants) = try ConversationPatch.taggedFrames(operations, on: stored.conversation)
        // The actor stays a participant through every operation (removals go last).
        let actor =
            participants.intersection(stored.conversation.participants).sorted().first
            ?? Self.actor(of: stored.conversation)
        if let first = ordered.first {
            let rest = Array(ordered.dropFirst())
            let id = stored.conversation.id
            // One `Conversation.updated` per operation (WEBHOOKS.md), however many commands it takes.
            _ = try await engine.runServerAPICommand(
                first.frame, as: actor, patchOperation: first.operation
            ) { context, _ in
                for (operation, frame) in rest {
                    context.patchOperation = operation
                    _ = try context.apply(frame)
                }
                try context.flushConversationUpdated(id)
            }
        }
        return HTTPResponse(status: 204)
    }

    /// POST /users/:user_id/conversations/:id/mark_all_read: every message up to the newest
    /// is read by that user; the senders' devices learn it as read receipts (204).
    func markAllRead(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let user = try r.userID()
        let stored = try await liveConversation(try r.conversationID())
        let id = stored.conversation.id
        guard let last = try await engine.store.read({ reader in try reader.lastPosition(of: id) }) else {
            return HTTPResponse(status: 204)
        }
        let frame = Frame.markAllRead(MarkAllRead(requestID: UUID(), conversationID: id, upTo: last))
        _ = try await engine.runServerAPICommand(frame, as: user)
        return HTTPResponse(status: 204)
    }

    /// The participant the Server API acts as: the creator while a participant, else the first.
    static func actor(of conversation: Conversation) -> UserID {
        conversation.participants.contains(conversation.creator)
            ? conversation.creator : (conversation.participants.sorted().first ?? conversation.creator)
    }

    /// The conversation, live: 404 when unknown, 410 when deleted or merged away.
    func liveConversation(_ id: ConversationID) async throws -> StoredConversation {
        guard let stored = try await engine.store.read({ r in try r.conversation(id) }) else {
            throw ServerAPIError.notFound("no conversation \(ServerAPIRepresentation.conversationID(id))")
        }
        guard stored.isLive else {
            var error = ServerAPIError.objectDeleted(
                "conversation \(ServerAPIRepresentation.conversationID(id)) was deleted")
            if let survivor = stored.mergedInto {
                error.data = ["merged_into": .string(ServerAPIRepresentation.conversationID(survivor))]
            }
            throw error
        }
        return stored
    }
}
