import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire

/// Channels (SPEC §6.8) on the Client API, at the paths Layer's Web SDK calls (`/channels`,
/// `/channels/:id/members/:user_id`, `/channels/:id/messages`). Every change goes through the
/// engine's channel commands as the session's user, exactly as a sync session's: a user joins
/// and leaves only themselves (adding others is the Server API's), only the creator deletes,
/// only members read and send messages. Any user may see a channel (to find and join it).
extension ClientAPI {
    /// The most members a channel's page lists (`page_size` above the Client API's default
    /// cap is refused as for every list).
    static let channelMembersPageMax = ClientAPILimits.maxPageSize

    /// GET /channels: the channels the user is a member of, newest first, `page_size` after
    /// `from_id`; `Layer-Count` is how many in all.
    func listChannels(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let pageSize = try r.pageSize()
        var all = try await engine.channels(of: user).sorted {
            ($0.channel.createdAt.millisecondsSince1970, $0.channel.id.uuid.uuidString)
                > ($1.channel.createdAt.millisecondsSince1970, $1.channel.id.uuid.uuidString)
        }
        let total = all.count
        if let from = r.query["from_id"] {
            guard let id = ClientAPIRepresentation.channel(from),
                let index = all.firstIndex(where: { $0.channel.id == id })
            else { throw ServerAPIError.invalidProperty("from_id", "from_id names none of your channels") }
            all.removeFirst(index + 1)
        }
        let shown = try await representation(r, users: [user])
        let objects = all.prefix(pageSize).map {
            shown.channel($0.channel, memberCount: $0.memberCount, isMember: true)
        }
        return ServerAPIJSON.response(200, objects, extraHeaders: [("layer-count", "\(total)")])
    }

    /// POST /channels `{"name", "id", "members", "metadata"}` (the Web SDK's `Channel.create`
    /// data): 201 with the channel, the caller its first member. `members` may name only the
    /// caller (others join themselves, or the Server API adds them); `metadata` must be empty.
    /// A retry (same `id`, same name) answers 201 again; a taken name is 409 `conflict` with
    /// the existing channel in `data` (the Web SDK then takes that channel).
    func createChannel(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let body = try r.object()
        guard let text = body["name"]?.string else { throw ServerAPIError.missingProperty("name") }
        let name: ChannelName
        do { name = try ChannelName(text) } catch { throw ServerAPIError.invalidProperty("name", error.reason) }
        var id = ChannelID(uuid: UUID())
        if let raw = body["id"], !raw.isNull {
            guard let text = raw.string, let chosen = ClientAPIRepresentation.channel(text) else {
                throw ServerAPIError.invalidProperty("id", "id must be layer:///channels/<uuid>")
            }
            id = chosen
        }
        if let raw = body["members"], !raw.isNull {
            guard let list = raw.array else {
                throw ServerAPIError.invalidProperty("members", "members must be an array of identity ids")
            }
            for entry in list where try ServerAPIRepresentation.user(entry, property: "members") != user {
                throw ServerAPIError.accessDenied("a channel's creator may name only themselves in members")
            }
        }
        if let raw = body["metadata"], !raw.isNull, raw.object?.isEmpty != true {
            throw ServerAPIError.invalidProperty("metadata", "channels have no metadata in this version")
        }
        if case .refused(let error) = try await engine.createChannel(id, named: name, by: user) {
            if error.code == .idInUse,
                let existing = try await engine.store.read({ reader in try reader.channel(named: name) }),
                existing.channel.id != id
            {
                let member = try await engine.store.read { reader in
                    try reader.isChannelMember(user, of: existing.channel.id)
                }
                let object = try await representation(r, users: [user]).channel(
                    existing.channel, memberCount: existing.memberCount, isMember: member)
                throw ServerAPIError.conflict("the channel name '\(name)' is taken", data: Self.json(object))
            }
            throw ServerAPIError.from(error)
        }
        let object = try await channelObject(id, r)
        return ServerAPIJSON.response(201, object, extraHeaders: [("location", object.url)])
    }

    /// GET /channels/:channel_id: the channel, with the caller's membership (404 when there is
    /// no such live channel).
    func getChannel(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        ServerAPIJSON.response(200, try await channelObject(try r.channelID(), r))
    }

    /// DELETE /channels/:channel_id: by its creator (403 otherwise), for everyone: 204.
    func deleteChannel(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        try Self.check(try await engine.deleteChannel(try r.channelID(), by: user, requestID: UUID()))
        return HTTPResponse(status: 204)
    }

    /// GET /channels/:channel_id/members: the memberships, in user id order, `page_size` after
    /// `from_id` (a user id or identity id); `Layer-Count` is the member count. Members only.
    func listChannelMembers(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let id = try r.channelID()
        let pageSize = try r.pageSize()
        var members = try await memberOnly(id, user) { reader in try reader.channelMembers(of: id) }.sorted()
        let total = members.count
        if let from = r.query["from_id"] {
            let after = try ServerAPIRepresentation.user(from, property: "from_id")
            members = members.filter { $0 > after }
        }
        let page = Array(members.prefix(pageSize))
        let shown = try await representation(r, users: page)
        return ServerAPIJSON.response(
            200, page.map { shown.membership($0, of: id) }, extraHeaders: [("layer-count", "\(total)")])
    }

    /// GET /channels/:channel_id/members/:user_id: the membership (the Web SDK's
    /// `channel.getMember`), 404 when that user is not a member. Members only.
    func getChannelMember(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let id = try r.channelID()
        let member = try Self.pathUser(r)
        guard try await memberOnly(id, user, { reader in try reader.isChannelMember(member, of: id) }) else {
            throw ServerAPIError.notFound("\(member) is not a member of \(ClientAPIRepresentation.channelID(id))")
        }
        return ServerAPIJSON.response(200, try await representation(r, users: [member]).membership(member, of: id))
    }

    /// PUT /channels/:channel_id/members/:user_id with the caller's own id: joins (204, also
    /// when a member already; 422 `invalid_property` at the member limit). 403 for another user.
    func joinChannel(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try Self.ownMembership(r)
        let outcome = try await engine.joinChannel(try r.channelID(), user: user, by: user, requestID: UUID())
        if case .refused(let error) = outcome, error.code == .tooManyParticipants {
            throw ServerAPIError.invalidProperty("members", error.reason)
        }
        try Self.check(outcome)
        return HTTPResponse(status: 204)
    }

    /// DELETE /channels/:channel_id/members/:user_id with the caller's own id: leaves (204, also
    /// when not a member). 403 for another user.
    func leaveChannel(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try Self.ownMembership(r)
        try Self.check(try await engine.leaveChannel(try r.channelID(), user: user, by: user, requestID: UUID()))
        return HTTPResponse(status: 204)
    }

    /// GET /channels/:channel_id/messages: the newest `page_size` messages of the channel's
    /// log, newest first, older than `from_id` when given; `Layer-Count` is the log's length.
    /// Members only (the whole history, whenever they joined).
    func listChannelMessages(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let id = try r.channelID()
        let pageSize = try r.pageSize()
        var from: MessageID?
        if let text = r.query["from_id"] {
            guard let message = ClientAPIRepresentation.message(text) else {
                throw ServerAPIError.invalidProperty("from_id", "from_id must be layer:///messages/<uuid>")
            }
            from = message
        }
        let read = try await memberOnly(id, user) { [from] reader -> ([ChannelMessage], UInt64)? in
            guard let record = try reader.channel(id) else { return nil }
            var before = record.head + 1
            if let from {
                guard let message = try reader.channelMessage(from), message.channelID == id else { return nil }
                before = message.logSeq
            }
            // The log is numbered 1, 2, 3, ... without gaps: one range read.
            let after = before > UInt64(pageSize) ? before - 1 - UInt64(pageSize) : 0
            let page = try reader.channelLog(id, after: after, limit: pageSize).filter { $0.logSeq < before }
            return (page, record.head)
        }
        guard let (messages, head) = read else {
            throw ServerAPIError.invalidProperty("from_id", "from_id names no message of this channel")
        }
        let shown = try await representation(r, users: Set(messages.map(\.sender)))
        return ServerAPIJSON.response(
            200, messages.reversed().map { shown.channelMessage($0) }, extraHeaders: [("layer-count", "\(head)")])
    }

    /// POST /channels/:channel_id/messages `{"parts", "id"}`: 201 with the message, sent as the
    /// user (members only); a retry (same `id`, same parts) answers the same; 409 `id_in_use`
    /// when `id` names another message. Parts are inline or name content the user uploaded
    /// (`"content": {"id", "size"}`), as a conversation's message.
    func sendChannelMessage(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let object = try await sendChannelMessage(r, channel: try r.channelID(), body: try r.object())
        return ServerAPIJSON.response(201, object, extraHeaders: [("location", object.url)])
    }

    /// Sending to a channel from a request body (REST, and the WebSocket's `Message.create`
    /// naming a channel).
    func sendChannelMessage(_ r: ClientAPIRequest, channel: ChannelID, body: [String: JSONValue]) async throws
        -> ClientChannelMessageObject
    {
        let user = try r.requireSession().user
        let id = try Self.chosenMessageID(body)
        // Rich content was uploaded first (POST /content, PUT upload_url): parts name it.
        let (parts, _) = try ServerAPI.content(body, of: id, uploads: try await referencedContent(body))
        try Self.check(
            try await engine.sendChannelMessage(
                SendChannelMessage(messageID: id, channelID: channel, parts: parts), by: user))
        guard let stored = try await engine.store.read({ reader in try reader.channelMessage(id) }) else {
            throw ServerAPIError.internalError("the channel message was not stored")
        }
        return try await representation(r, users: [stored.sender]).channelMessage(stored)
    }

    /// GET /channels/:channel_id/messages/:message_id (members only; 404 for a message of
    /// another channel).
    func getChannelMessage(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let id = try r.channelID()
        let messageID = try r.messageID()
        let message = try await memberOnly(id, user) { reader -> ChannelMessage? in
            guard let m = try reader.channelMessage(messageID), m.channelID == id else { return nil }
            return m
        }
        guard let message else {
            throw ServerAPIError.notFound("no message \(ClientAPIRepresentation.messageID(messageID))")
        }
        return ServerAPIJSON.response(200, try await representation(r, users: [message.sender]).channelMessage(message))
    }

    // MARK: Helpers

    /// The channel as the caller sees it; 404 when it does not exist or was deleted.
    func channelObject(_ id: ChannelID, _ r: ClientAPIRequest) async throws -> ClientChannelObject {
        let user = try r.requireSession().user
        let found = try await engine.store.read { reader -> (ChannelRecord, Bool)? in
            guard let record = try reader.channel(id), !record.isDeleted else { return nil }
            return (record, try reader.isChannelMember(user, of: id))
        }
        guard let (record, member) = found else {
            throw ServerAPIError.notFound("no channel \(ClientAPIRepresentation.channelID(id))")
        }
        return try await representation(r, users: [user]).channel(
            record.channel, memberCount: record.memberCount, isMember: member)
    }

    /// Reads `body` when `user` is a member of the live channel `id`: 404 without the channel,
    /// 403 `access_denied` for a non-member.
    private func memberOnly<T: Sendable>(
        _ id: ChannelID, _ user: UserID, _ body: @escaping @Sendable (StorageReader) throws -> T
    ) async throws -> T {
        let result = try await engine.store.read { reader -> Result<T, ServerAPIError> in
            guard let record = try reader.channel(id), !record.isDeleted else {
                return .failure(.notFound("no channel \(ClientAPIRepresentation.channelID(id))"))
            }
            guard try reader.isChannelMember(user, of: id) else {
                return .failure(.accessDenied("\(user) is not a member of \(ClientAPIRepresentation.channelID(id))"))
            }
            return .success(try body(reader))
        }
        return try result.get()
    }

    /// The `user_id` of a join or leave: the caller's own (403 for anyone else).
    private static func ownMembership(_ r: ClientAPIRequest) throws -> UserID {
        let user = try r.requireSession().user
        guard try pathUser(r) == user else {
            throw ServerAPIError.accessDenied("a user joins and leaves channels only themselves")
        }
        return user
    }

    /// A refused channel command as Layer's error.
    private static func check(_ outcome: NodeEngine.ChannelOutcome) throws {
        if case .refused(let error) = outcome { throw ServerAPIError.from(error) }
    }
}

extension ClientAPIRequest {
    /// The `channel_id` path parameter (a UUID, or its Layer id percent-encoded); 404 otherwise.
    func channelID() throws(ServerAPIError) -> ChannelID {
        guard let raw = parameters["channel_id"], let id = ClientAPIRepresentation.channel(raw) else {
            throw .notFound("no channel \(parameters["channel_id"]?.prefix(200) ?? "")")
        }
        return id
    }
}
