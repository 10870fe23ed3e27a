import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire

extension ClientAPI {
    /// GET /conversations: the user's conversations (their announcements apart), newest
    /// first by `sort_by` (`created_at`, the default, or `last_message`), `page_size` after
    /// `from_id`; `Layer-Count` is how many there are in all.
    func listConversations(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let session = try r.requireSession()
        let pageSize = try r.pageSize()
        let sort = r.query["sort_by"] ?? "created_at"
        guard ["created_at", "last_message"].contains(sort) else {
            throw ServerAPIError.invalidProperty("sort_by", "sort_by must be created_at or last_message")
        }
        let user = session.user
        let snapshot = try await engine.store.read { reader in try reader.snapshot(of: user) }
        let marker = ServerAPI.announcementsMarker
        var all = snapshot.conversations.filter {
            $0.conversation.metadata.values[marker.key] != .string(marker.value)
                || $0.conversation.id != ServerAPI.announcementsConversation(of: user)
        }
        func created(_ c: SnapshotConversation) -> (Int64, String) {
            (c.conversation.createdAt.millisecondsSince1970, c.conversation.id.uuid.uuidString)
        }
        if sort == "last_message" {
            all.sort {
                ($0.lastMessage?.position ?? .zero, created($0).0, created($0).1) > (
                    $1.lastMessage?.position ?? .zero, created($1).0, created($1).1
                )
            }
        } else {
            all.sort { created($0) > created($1) }
        }
        let total = all.count
        if let from = r.query["from_id"] {
            guard let id = ClientAPIRepresentation.conversation(from),
                let index = all.firstIndex(where: { $0.conversation.id == id })
            else { throw ServerAPIError.invalidProperty("from_id", "from_id names none of your conversations") }
            all.removeFirst(index + 1)
        }
        let page = all.prefix(pageSize)
        var shown = ClientAPIRepresentation(base: r.base, viewer: user, identities: snapshot.identities)
        shown.content = try await representation(r, users: [UserID]()).content
        let objects = page.map {
            shown.conversation(
                $0.conversation, unread: $0.counts.unread, total: $0.counts.messages, lastMessage: $0.lastMessage)
        }
        return ServerAPIJSON.response(200, objects, extraHeaders: [("layer-count", "\(total)")])
    }

    /// GET /conversations/:id (404 unless the user takes part).
    func getConversation(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let session = try r.requireSession()
        let stored = try await visibleConversation(try r.conversationID(), for: session.user)
        return ServerAPIJSON.response(200, try await conversationObject(stored.conversation, r))
    }

    /// POST /conversations `{"participants", "distinct", "metadata", "id"}`: 201 with the new
    /// conversation (the caller is a participant); 200 with the existing distinct one whose
    /// metadata matches (or a retry of the same `id`); 409 `conflict` with the existing one in
    /// `data` when its metadata differs; 409 `id_in_use` with the object in `data` when `id`
    /// names another conversation.
    func createConversation(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let (object, status) = try await createConversation(r, body: try r.object())
        return ServerAPIJSON.response(status, object, extraHeaders: [("location", object.url)])
    }

    /// Conversation creation from a request body (REST, and the WebSocket's `Conversation.create`).
    func createConversation(_ r: ClientAPIRequest, body: [String: JSONValue]) async throws -> (
        ClientConversationObject, Int
    ) {
        let session = try r.requireSession()
        let user = session.user
        var participants: Set<UserID> = [user]
        if let raw = body["participants"], !raw.isNull {
            guard let list = raw.array else {
                throw ServerAPIError.invalidProperty("participants", "participants must be an array of identity ids")
            }
            for item in list { participants.insert(try ServerAPIRepresentation.user(item, property: "participants")) }
        }
        let options = try ClientConversationOptions(body)
        let (distinct, metadata) = (options.distinct, options.metadata)
        var id = ConversationID(uuid: UUID())
        if let raw = body["id"], !raw.isNull {
            guard let text = raw.string, let chosen = ClientAPIRepresentation.conversation(text) else {
                throw ServerAPIError.invalidProperty("id", "id must be layer:///conversations/<uuid>")
            }
            id = chosen
            if let existing = try await engine.store.read({ reader in try reader.conversation(chosen) }) {
                let same =
                    existing.isLive && existing.conversation.participants == participants
                    && existing.conversation.isDistinct == distinct && existing.conversation.participants.contains(user)
                guard same else { throw try await idInUse(existing, r) }
                return (try await conversationObject(existing.conversation, r), 200)
            }
        }
        let frame = Frame.createConversation(
            CreateConversation(
                conversationID: id, participants: participants,
                options: ConversationOptions(isDistinct: distinct, metadata: metadata)))
        let result: ServerAPICommandResult
        do {
            result = try await engine.runServerAPICommand(frame, as: user)
        } catch let conflict as DistinctConflict {
            guard let existing = try await engine.store.read({ reader in try reader.conversation(conflict.existing) })
            else { throw conflict }
            let object = try await conversationObject(existing.conversation, r)
            throw ServerAPIError(
                409, "conflict", 108, "a distinct conversation with these participants exists with other metadata",
                data: Self.json(object))
        }
        guard let resolved = result.ack.conversationID,
            let stored = try await engine.store.read({ reader in try reader.conversation(resolved) })
        else { throw ServerAPIError.internalError("the conversation was not stored") }
        let status = resolved == id && result.applied ? 201 : 200
        return (try await conversationObject(stored.conversation, r), status)
    }

    /// PATCH /conversations/:id (`application/vnd.layer-patch+json`): participants and
    /// metadata, as the user, all or none (204).
    func patchConversation(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let session = try r.requireSession()
        try ConversationPatch.checkContentType(r.http.headers["content-type"])
        let operations = try ServerAPIJSON.array(r.http.body)
        let stored = try await visibleConversation(try r.conversationID(), for: session.user)
        let (frames, _) = try ConversationPatch.frames(operations, on: stored.conversation)
        if let first = frames.first {
            let rest = Array(frames.dropFirst())
            _ = try await engine.runServerAPICommand(first, as: session.user) { context, _ in
                for frame in rest { _ = try context.apply(frame) }
            }
        }
        return HTTPResponse(status: 204)
    }

    /// DELETE /conversations/:id?mode=all_participants|my_devices[&leave=true][&from_position=N]:
    /// deleted for everyone, or from the user's devices (with `leave`, the user also leaves;
    /// with `from_position`, only the messages up to that position go). 204.
    func deleteConversation(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let session = try r.requireSession()
        let mode = try Self.deletionMode(r)
        let leave = try Self.flag(r, "leave")
        var below: MessagePosition?
        if let raw = r.query["from_position"] {
            guard let n = Int64(raw), let position = ClientAPIRepresentation.position(n) else {
                throw ServerAPIError.invalidProperty("from_position", "from_position must be a message position")
            }
            below = position
        }
        if leave && mode == .allParticipants {
            throw ServerAPIError.invalidProperty("leave", "leave=true goes with mode=my_devices")
        }
        let stored = try await visibleConversation(try r.conversationID(), for: session.user)
        let id = stored.conversation.id
        let delete = Frame.deleteConversation(
            DeleteConversation(requestID: UUID(), conversationID: id, mode: mode, below: below))
        let user = session.user
        _ = try await engine.runServerAPICommand(delete, as: user) { context, _ in
            if leave {
                _ = try context.apply(
                    .removeParticipants(ParticipantsUpdate(requestID: UUID(), conversationID: id, users: [user])))
            }
        }
        return HTTPResponse(status: 204)
    }

    /// POST /conversations/:id/mark_all_read `{"position"}`: the user has read every message
    /// up to that position (all, without one); 204.
    func markAllRead(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let session = try r.requireSession()
        let stored = try await visibleConversation(try r.conversationID(), for: session.user)
        let id = stored.conversation.id
        var upTo: MessagePosition?
        let body = r.http.body.readableBytes > 0 ? try r.object() : [:]
        if let raw = body["position"], !raw.isNull {
            guard case .integer(let n) = raw, let position = ClientAPIRepresentation.position(n) else {
                throw ServerAPIError.invalidProperty("position", "position must be a message position (an integer)")
            }
            upTo = position
        }
        guard let last = try await engine.store.read({ reader in try reader.lastPosition(of: id) }) else {
            return HTTPResponse(status: 204)
        }
        let frame = Frame.markAllRead(MarkAllRead(requestID: UUID(), conversationID: id, upTo: min(upTo ?? last, last)))
        _ = try await engine.runServerAPICommand(frame, as: session.user)
        return HTTPResponse(status: 204)
    }

    // MARK: Helpers

    /// `mode`: `all_participants` or `my_devices` (required, as Layer had it).
    static func deletionMode(_ r: ClientAPIRequest) throws(ServerAPIError) -> DeletionMode {
        switch r.query["mode"] {
        case "all_participants"?: return .allParticipants
        case "my_devices"?: return .myDevices
        case nil: throw .missingProperty("mode")
        default: throw .invalidProperty("mode", "mode must be all_participants or my_devices")
        }
    }

    static func flag(_ r: ClientAPIRequest, _ name: String) throws(ServerAPIError) -> Bool {
        switch r.query[name] {
        case nil, "false"?: return false
        case "true"?: return true
        default: throw .invalidProperty(name, "\(name) must be true or false")
        }
    }

    /// The conversation, live and with the user among its participants: 404 otherwise (410
    /// when it was deleted or merged into another).
    func visibleConversation(_ id: ConversationID, for user: UserID) async throws -> StoredConversation {
        guard let stored = try await engine.store.read({ r in try r.conversation(id) }),
            stored.conversation.participants.contains(user) || !stored.isLive
        else { throw ServerAPIError.notFound("no conversation \(ClientAPIRepresentation.conversationID(id))") }
        guard stored.isLive else {
            var error = ServerAPIError.objectDeleted(
                "conversation \(ClientAPIRepresentation.conversationID(id)) was deleted")
            if let survivor = stored.mergedInto {
                error.data = ["merged_into": .string(ClientAPIRepresentation.conversationID(survivor))]
            }
            throw error
        }
        return stored
    }

    /// The conversation as the session's user sees it: their unread count, the message
    /// count, the last message.
    func conversationObject(_ c: Conversation, _ r: ClientAPIRequest) async throws -> ClientConversationObject {
        let user = try r.requireSession().user
        let (counts, last) = try await engine.store.read { reader -> (ConversationCounts?, Message?) in
            guard c.participants.contains(user) else { return (nil, nil) }
            let counts = try reader.counts(of: c.id, for: user, blocked: Set(try reader.blocks(of: user)))
            return (counts, try counts.lastMessage.flatMap { id in try reader.message(id, as: user) })
        }
        let shown = try await representation(r, users: c.participants.union(last.map { [$0.sender] } ?? []))
        return shown.conversation(c, unread: counts?.unread ?? 0, total: counts?.messages ?? 0, lastMessage: last)
    }

    /// `id_in_use` with the existing object in `data` when the user may see it.
    func idInUse(_ existing: StoredConversation, _ r: ClientAPIRequest) async throws -> ServerAPIError {
        var error = ServerAPIError.idInUse(
            "id \(ClientAPIRepresentation.conversationID(existing.conversation.id)) is in use")
        if existing.conversation.participants.contains(try r.requireSession().user) {
            error.data = Self.json(try await conversationObject(existing.conversation, r))
        } else {
            error.data = ["id": .string(ClientAPIRepresentation.conversationID(existing.conversation.id))]
        }
        return error
    }

    /// An object as JSON values (an error's `data`).
    static func json(_ value: some Encodable) -> [String: JSONValue] {
        guard let data = try? ServerAPIJSON.encode(value),
            let object = try? JSONDecoder().decode([String: JSONValue].self, from: data)
        else { return [:] }
        return object
    }
}
