import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire

extension ServerAPI {
    /// POST /conversations/:id/messages: sent as a participant (`sender.user_id` in 1.0,
    /// `sender_id` in 3.0) or from a named system sender (`sender.name`), with `parts` and an
    /// optional `notification`; 201 with the message.
    func sendMessage(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let conversation = try r.conversationID()
        let id = MessageID(uuid: try r.requestID() ?? UUID())
        let body = try ServerAPIJSON.object(r.http.body)
        let sender = try Self.sender(body)
        let uploads = try await referencedContent(body)
        let (parts, push) = try Self.content(body, of: id, uploads: uploads)
        let overrides = try Self.pushOverrides(body)
        let mentions = try MentionsJSON.mentions(body)
        _ = try await liveConversation(conversation)
        let frame = Frame.sendMessage(
            SendMessage(
                messageID: id, conversationID: conversation, parts: parts, push: push,
                replyTo: try Self.replyTo(body), mentions: mentions))
        _ = try await engine.runServerAPICommand(
            frame, as: sender, pushOverrides: overrides, contentOwner: Self.contentOwner)
        guard let stored = try await engine.store.read({ reader in try reader.message(id) }) else {
            throw ServerAPIError.internalError("the message was not stored")
        }
        let object = try await threaded(r, [stored.message]).message(stored.message)
        return ServerAPIJSON.response(201, object, extraHeaders: [("location", object.url)])
    }

    /// GET …/messages: newest `page_size` messages, newest first; as the system (all
    /// participants' statuses) or as `user_id` (that user's view, with `is_unread`).
    func listMessages(_ r: ServerAPIRequest, asUser: Bool) async throws -> HTTPResponse {
        let stored = try await liveConversation(try r.conversationID())
        let viewer = asUser ? try r.userID() : Self.actor(of: stored.conversation)
        let pageSize = try r.pageSize()
        let id = stored.conversation.id
        let (messages, total) = try await engine.store.read { reader in
            (
                try reader.history(of: id, for: viewer, .last(pageSize), hidingBlocked: asUser),
                asUser
                    ? try reader.counts(of: id, for: viewer, blocked: Set(try reader.blocks(of: viewer))).messages
                    : try reader.messageCount(of: id)
            )
        }
        let summarized = try await engine.store.read { reader in try reader.withThreadSummaries(messages) }
        let shown = try await threaded(r, summarized)
        let reactions = try await reactionSummaries(of: summarized.map(\.id), seenBy: asUser ? viewer : nil)
        return ServerAPIJSON.response(
            200,
            summarized.reversed().map {
                shown.message($0, for: asUser ? viewer : nil, reactions: reactions[$0.id] ?? [:])
            },
            extraHeaders: [Self.layerCount(total)])
    }

    /// GET …/messages/:message_id.
    func getMessage(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let message = try await storedMessage(r)
        let reactions = try await reactionSummaries(of: [message.message.id], seenBy: nil)
        let summarized = try await engine.store.read { reader in try reader.withThreadSummaries([message.message]) }
        return ServerAPIJSON.response(
            200,
            try await threaded(r, summarized).message(summarized[0], reactions: reactions[message.message.id] ?? [:]))
    }

    /// DELETE …/messages/:message_id: deleted for every participant (204).
    func deleteMessage(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let message = try await storedMessage(r)
        let conversation = try await liveConversation(message.message.conversationID)
        let actor =
            conversation.conversation.participants.contains(message.message.sender)
            ? message.message.sender : Self.actor(of: conversation.conversation)
        let frame = Frame.deleteMessage(
            DeleteMessage(
                requestID: UUID(), conversationID: message.message.conversationID, messageID: message.message.id,
                mode: .allParticipants))
        _ = try await engine.runServerAPICommand(frame, as: actor)
        return HTTPResponse(status: 204)
    }

    func storedMessage(_ r: ServerAPIRequest) async throws -> MessageRecord {
        let conversation = try r.conversationID()
        let id = try r.messageID()
        guard let stored = try await engine.store.read({ reader in try reader.message(id) }),
            stored.message.conversationID == conversation
        else { throw ServerAPIError.notFound("no message \(ServerAPIRepresentation.messageID(id))") }
        guard !stored.isDeleted else {
            throw ServerAPIError.objectDeleted("message \(ServerAPIRepresentation.messageID(id)) was deleted")
        }
        return stored
    }

    /// The sender: a participant (`sender.user_id` in 1.0, `sender_id` in 3.0), or a named
    /// system sender (`sender.name`, both versions), stored as the reserved id
    /// ``UserID/systemSender(named:)``; a system sender needs not take part in the conversation.
    static func sender(_ body: [String: JSONValue]) throws(ServerAPIError) -> UserID {
        if let id = body["sender_id"] { return try ServerAPIRepresentation.user(id, property: "sender_id") }
        guard let raw = body["sender"] else { throw .missingProperty("sender") }
        guard let sender = raw.object else { throw .invalidProperty("sender", "sender must be an object") }
        if let user = sender["user_id"], !user.isNull {
            guard sender["name"]?.isNull ?? true else {
                throw .invalidProperty(
                    "sender", "sender has either user_id (a participant) or name (a system sender), not both")
            }
            return try ServerAPIRepresentation.user(user, property: "sender.user_id")
        }
        if let name = sender["name"], !name.isNull {
            guard let text = name.string else { throw .invalidProperty("sender.name", "sender.name must be a string") }
            do { return try UserID.systemSender(named: text) } catch {
                throw .invalidProperty("sender.name", error.reason)
            }
        }
        throw .missingProperty("sender.user_id")
    }

    /// A message's `parts` and optional `notification`, the parts' ids following from `id`.
    /// Parts may reference content in `uploads` (``referencedContent(_:)``); nil: rich content is refused.
    static func content(
        _ body: [String: JSONValue], of id: MessageID, uploads: [ContentID: ContentUpload]? = nil
    ) throws(ServerAPIError) -> ([MessagePart], PushConfiguration?) {
        guard let rawParts = body["parts"] else { throw .missingProperty("parts") }
        guard let list = rawParts.array, !list.isEmpty else {
            throw .invalidProperty("parts", "parts must be a non-empty array")
        }
        var parts: [MessagePart] = []
        for (index, raw) in list.enumerated() {
            parts.append(try part(raw, id: partID(id, index), name: "parts[\(index)]", uploads: uploads))
        }
        var push: PushConfiguration?
        if let raw = body["notification"], !raw.isNull {
            guard let n = raw.object else {
                throw .invalidProperty("notification", "notification must be an object")
            }
            push = try pushConfiguration(n, property: "notification")
        }
        return (parts, push)
    }

    /// A `notification` object (`text`, `sound`, `title`, `category`, `data`) as a push configuration.
    static func pushConfiguration(_ n: [String: JSONValue], property: String) throws(ServerAPIError)
        -> PushConfiguration
    {
        func string(_ key: String) throws(ServerAPIError) -> String? {
            guard let v = n[key], !v.isNull else { return nil }
            guard let s = v.string else {
                throw .invalidProperty("\(property).\(key)", "\(property).\(key) must be a string")
            }
            return s
        }
        var data: [String: String] = [:]
        if let d = n["data"]?.object { for (k, v) in d { data[k] = v.text } }
        return PushConfiguration(
            alert: try string("text"), sound: try string("sound"), title: try string("title"),
            category: try string("category"), data: data)
    }

    /// The Platform API's per-recipient overrides: `notification.recipients`, an object from
    /// user ids (identity ids in 3.0) to a notification whose fields replace the message's for
    /// that recipient's pushes. Checked like the notification itself.
    static func pushOverrides(_ body: [String: JSONValue]) throws(ServerAPIError) -> [UserID: PushConfiguration] {
        guard let n = body["notification"]?.object, let raw = n["recipients"], !raw.isNull else { return [:] }
        guard let map = raw.object, map.count <= ServerAPILimits.maxPushOverrides else {
            throw .invalidProperty(
                "notification.recipients",
                "notification.recipients must be an object of at most \(ServerAPILimits.maxPushOverrides) recipients")
        }
        var out: [UserID: PushConfiguration] = [:]
        for (key, value) in map {
            let user = try ServerAPIRepresentation.user(key, property: "notification.recipients")
            guard let object = value.object else {
                throw .invalidProperty(
                    "notification.recipients", "each of notification.recipients is a notification object")
            }
            let push = try pushConfiguration(object, property: "notification.recipients")
            do { try push.validate() } catch { throw .invalidProperty("notification.recipients", error.reason) }
            out[user] = push
        }
        return out
    }

    static func partID(_ message: MessageID, _ index: Int) -> UUID {
        derivedUUID(
            withUnsafeBytes(of: message.uuid.uuid) { Array($0) }
                + withUnsafeBytes(of: UInt32(index).bigEndian) { Array($0) })
    }

    /// A UUID that follows from `input` (the first 16 bytes of its SHA-256, as version 8,
    /// RFC 9562): the same input gives the same id, so a repeated request is the same command.
    static func derivedUUID(_ input: [UInt8]) -> UUID {
        var bytes = Array(((try? SHA256Hasher.hash(input)) ?? input + [UInt8](repeating: 0, count: 16)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }

    /// A part named `name` in errors: `body` (text, or base64 with `encoding: base64`) and
    /// `mime_type`. A sent message's part ids follow from its id and the index, so a repeated
    /// request (same `If-None-Match`) is the same command.
    /// A `content` part (rich content, ServerAPI+Content.swift) needs `uploads`: nil refuses it.
    static func part(_ raw: JSONValue, id: UUID, name: String, uploads: [ContentID: ContentUpload]? = nil)
        throws(ServerAPIError) -> MessagePart
    {
        guard let p = raw.object else { throw .invalidProperty(name, "\(name) must be an object") }
        guard let mime = p["mime_type"] else { throw .missingProperty("\(name).mime_type") }
        guard let mimeString = mime.string else {
            throw .invalidProperty("\(name).mime_type", "mime_type must be a string")
        }
        if let reference = p["content"], !reference.isNull {
            guard let uploads else {
                throw .invalidProperty(
                    "\(name).content",
                    "rich content goes in a new message's parts (POST …/messages), not in a part update")
            }
            guard p["body"]?.isNull ?? true else {
                throw .invalidProperty(name, "a part has either body or content, not both")
            }
            let type: MIMEType
            do { type = try MIMEType(mimeString) } catch { throw .invalidProperty("\(name).mime_type", error.reason) }
            return try contentPart(reference, id: id, mime: type, name: "\(name).content", uploads: uploads)
        }
        guard let body = p["body"] else { throw .missingProperty("\(name).body") }
        guard let text = body.string else { throw .invalidProperty("\(name).body", "body must be a string") }
        var bytes = Array(text.utf8)
        if let encoding = p["encoding"] {
            guard encoding.string == "base64", let data = Data(base64Encoded: text) else {
                throw .invalidProperty("\(name).encoding", "encoding must be base64, with a base64 body")
            }
            bytes = Array(data)
        }
        do {
            return try MessagePart(id: id, mimeType: try MIMEType(mimeString), bytes: bytes)
        } catch {
            throw .invalidProperty(name, error.reason)
        }
    }
}
