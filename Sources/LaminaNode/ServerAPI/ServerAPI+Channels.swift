import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire

/// A channel (SPEC §6.8) as the Server API shows it.
struct ChannelObject: Encodable, Sendable {
    var id: String
    var url: String
    var messages_url: String
    var members_url: String
    var name: String
    var created_at: String
    var member_count: Int
}

/// A channel's message as the Server API shows it: no recipient status; `position` is its
/// place in the channel's log.
struct ChannelMessageObject: Encodable, Sendable {
    var id: String
    var url: String
    var channel: ConversationReference
    var parts: [PartObject]
    var sent_at: String
    var sender: SenderObject
    var position: UInt64
}

/// Channels through the Server API (`/channels`, SPEC §6.8): the app's backend creates and
/// deletes channels, adds and removes members, and sends messages (as a member, or as a named
/// system sender). Every call goes through the engine's channel commands, so devices learn of
/// it as of a member's own command.
extension ServerAPI {
    /// The most members one creation may name.
    static let maxChannelMembersPerRequest = 1_000

    /// The system sender the Server API acts as for channels it creates, joins and deletes.
    static let channelActor = ServerAPI.contentOwner

    /// POST /channels: `name` (required, unique), `members` (optional user ids, at most
    /// ``maxChannelMembersPerRequest``). 201 with the channel; 409 `id_in_use` for a taken name.
    func createChannel(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let id = ChannelID(uuid: try r.requestID() ?? UUID())
        let body = try ServerAPIJSON.object(r.http.body)
        guard let rawName = body["name"] else { throw ServerAPIError.missingProperty("name") }
        guard let text = rawName.string else { throw ServerAPIError.invalidProperty("name", "name must be a string") }
        let name: ChannelName
        do { name = try ChannelName(text) } catch { throw ServerAPIError.invalidProperty("name", error.reason) }
        var members: [UserID] = []
        if let raw = body["members"], !raw.isNull {
            guard let list = raw.array else {
                throw ServerAPIError.invalidProperty("members", "members must be an array of user ids")
            }
            guard list.count <= Self.maxChannelMembersPerRequest else {
                throw ServerAPIError.invalidProperty(
                    "members", "a creation names at most \(Self.maxChannelMembersPerRequest) members")
            }
            for item in list { members.append(try ServerAPIRepresentation.user(item, property: "members")) }
        }
        try Self.check(try await engine.createChannel(id, named: name, by: Self.channelActor))
        for member in Set(members).sorted() {
            try Self.check(
                try await engine.joinChannel(id, user: member, by: Self.channelActor, requestID: UUID()))
        }
        let object = try await channelObject(r, id)
        return ServerAPIJSON.response(201, object, extraHeaders: [("location", object.url)])
    }

    /// GET /channels/:channel_id.
    func getChannel(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        ServerAPIJSON.response(200, try await channelObject(r, try r.channelID()))
    }

    /// DELETE /channels/:channel_id: for everyone (204).
    func deleteChannel(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        try Self.check(try await engine.deleteChannel(try r.channelID(), by: Self.channelActor, requestID: UUID()))
        return HTTPResponse(status: 204)
    }

    /// GET /channels/:channel_id/members: the members' user ids, in order, with Layer-Count.
    func listChannelMembers(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let id = try r.channelID()
        let members = try await engine.store.read { reader -> [UserID]? in
            guard let record = try reader.channel(id), !record.isDeleted else { return nil }
            return try reader.channelMembers(of: id)
        }
        guard let members else { throw ServerAPIError.notFound("no channel \(id.uuid.uuidString.lowercased())") }
        return ServerAPIJSON.response(200, members.map(\.rawValue), extraHeaders: [Self.layerCount(members.count)])
    }

    /// PUT /channels/:channel_id/members/:user_id: adds the member (204, also when one already).
    func addChannelMember(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        try Self.check(
            try await engine.joinChannel(
                try r.channelID(), user: try r.userID(), by: Self.channelActor, requestID: UUID()))
        return HTTPResponse(status: 204)
    }

    /// DELETE /channels/:channel_id/members/:user_id: removes the member (204, also when not one).
    func removeChannelMember(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        try Self.check(
            try await engine.leaveChannel(
                try r.channelID(), user: try r.userID(), by: Self.channelActor, requestID: UUID()))
        return HTTPResponse(status: 204)
    }

    /// POST /channels/:channel_id/messages: `sender` (a member's `user_id`, or a system sender's
    /// `name`) and `parts` (inline, or `content` naming content the backend or the sender
    /// uploaded, as a conversation's message); 201 with the message.
    func sendChannelMessage(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let channel = try r.channelID()
        let id = MessageID(uuid: try r.requestID() ?? UUID())
        let body = try ServerAPIJSON.object(r.http.body)
        let sender = try Self.sender(body)
        // Rich content was uploaded first (POST /content), by the backend or the sender.
        let (parts, _) = try Self.content(body, of: id, uploads: try await referencedContent(body))
        try Self.check(
            try await engine.sendChannelMessage(
                SendChannelMessage(messageID: id, channelID: channel, parts: parts), by: sender,
                contentOwner: Self.contentOwner))
        guard let stored = try await engine.store.read({ reader in try reader.channelMessage(id) }) else {
            throw ServerAPIError.internalError("the channel message was not stored")
        }
        let object = try await representation(r, users: [sender]).channelMessage(stored)
        return ServerAPIJSON.response(201, object, extraHeaders: [("location", object.url)])
    }

    /// The channel as shown, or 404.
    private func channelObject(_ r: ServerAPIRequest, _ id: ChannelID) async throws -> ChannelObject {
        guard let record = try await engine.store.read({ reader in try reader.channel(id) }), !record.isDeleted else {
            throw ServerAPIError.notFound("no channel \(id.uuid.uuidString.lowercased())")
        }
        let uuid = id.uuid.uuidString.lowercased()
        let base = r.representation.base
        return ChannelObject(
            id: "layer:///channels/\(uuid)", url: "\(base)/channels/\(uuid)",
            messages_url: "\(base)/channels/\(uuid)/messages",
            members_url: "\(base)/channels/\(uuid)/members", name: record.channel.name.rawValue,
            created_at: ServerAPIJSON.date(millisecondsSince1970: record.channel.createdAt.millisecondsSince1970),
            member_count: record.memberCount)
    }

    /// A refused channel command as the Server API's error.
    private static func check(_ outcome: NodeEngine.ChannelOutcome) throws {
        if case .refused(let error) = outcome {
            if error.code == .tooManyParticipants { throw ServerAPIError.invalidProperty("members", error.reason) }
            throw ServerAPIError.from(error)
        }
    }
}

extension ServerAPIRequest {
    /// The `channel_id` path parameter; 404 when it is no UUID.
    func channelID() throws(ServerAPIError) -> ChannelID {
        guard let raw = parameters["channel_id"], let uuid = UUID(uuidString: raw) else {
            throw .notFound("no channel \(parameters["channel_id"] ?? "")")
        }
        return ChannelID(uuid: uuid)
    }
}
