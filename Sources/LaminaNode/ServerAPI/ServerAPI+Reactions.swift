import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire

/// A message's reactions in the Server API and Client API (a Lamina extension, SPEC §6.9): per
/// key, how many users reacted with it and who.
public struct ReactionSummaryObject: Codable, Sendable, Hashable {
    public var count: Int
    /// The users' identity ids (`layer:///identities/<user>`), sorted.
    public var user_ids: [String]

    /// The summaries of `present`'s reactions on one message, by key.
    static func summaries(_ present: [PresentReaction]) -> [String: ReactionSummaryObject] {
        var users: [String: [UserID]] = [:]
        for p in present { users[p.key, default: []].append(p.user) }
        return users.mapValues { list in
            ReactionSummaryObject(
                count: list.count, user_ids: list.sorted().map(ServerAPIRepresentation.identityID))
        }
    }

    /// The summaries of several messages' reactions, by message.
    static func byMessage(_ present: [PresentReaction]) -> [MessageID: [String: ReactionSummaryObject]] {
        Dictionary(grouping: present, by: \.message).mapValues(summaries)
    }
}

extension NodeEngine {
    /// The reactions on `messages` by message, as `viewer` is shown them: without those of the
    /// users they block (as their feed, history and snapshots leave them out, SPEC §6.2, §6.9);
    /// all of them for the system (nil). The Server API's and the Client API's one rule.
    func reactionSummaries(of messages: [MessageID], seenBy viewer: UserID?) async throws
        -> [MessageID: [String: ReactionSummaryObject]]
    {
        guard !messages.isEmpty else { return [:] }
        let hidden = viewer.map { blockLists.blocked(by: $0) } ?? []
        let present = try await store.read { reader in try reader.presentReactions(on: messages) }
        return ReactionSummaryObject.byMessage(hidden.isEmpty ? present : present.filter { !hidden.contains($0.user) })
    }
}

extension ServerAPI {
    /// POST /users/:user_id/messages/:message_id/reactions (a Lamina extension, SPEC §6.9): the
    /// user adds (`"action": "add"`, the default) or removes (`"remove"`) the reaction `key` on a
    /// message of a conversation they take part in, as a REACT from one of their devices would;
    /// 204. 404 for a message that does not exist or is deleted, 403 for a user who is not (or no
    /// longer) a participant, 422 for a key that is empty, over 64 bytes or holds a control
    /// character.
    func react(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        let user = try r.userID()
        let id = try r.messageID()
        let (key, op) = try Self.reaction(try ServerAPIJSON.object(r.http.body))
        guard let stored = try await engine.store.read({ reader in try reader.message(id) }), !stored.isDeleted else {
            throw ServerAPIError.notFound("no message \(ServerAPIRepresentation.messageID(id))")
        }
        let frame = Frame.react(
            React(
                requestID: try r.requestID() ?? UUID(), conversationID: stored.message.conversationID, messageID: id,
                key: key, op: op))
        _ = try await engine.runServerAPICommand(frame, as: user)
        return HTTPResponse(status: 204)
    }

    /// The reactions on `messages`, for their representations: as `viewer` sees them (without
    /// the reactions of users they block, SPEC §6.2), or all of them for the system (nil).
    func reactionSummaries(of messages: [MessageID], seenBy viewer: UserID?) async throws
        -> [MessageID: [String: ReactionSummaryObject]]
    {
        try await engine.reactionSummaries(of: messages, seenBy: viewer)
    }

    /// A reaction request's body: `key` (1 to 64 bytes of UTF-8, no control characters) and
    /// `action`, `"add"` (the default) or `"remove"`.
    static func reaction(_ body: [String: JSONValue]) throws(ServerAPIError) -> (String, ReactionOp) {
        guard let raw = body["key"] else { throw .missingProperty("key") }
        guard let key = raw.string else { throw .invalidProperty("key", "key must be a string") }
        do { try ReactionKey.validate(key) } catch { throw .invalidProperty("key", error.reason) }
        let action = body["action"].flatMap { $0.isNull ? nil : $0 }
        switch action.map({ $0.string }) ?? "add" {
        case "add": return (key, .add)
        case "remove": return (key, .remove)
        default: throw .invalidProperty("action", "action is \"add\" or \"remove\"")
        }
    }
}

extension ClientAPI {
    /// POST /messages/:id/reactions `{"key", "action": "add" | "remove"}` (a Lamina extension,
    /// SPEC §6.9): the user reacts to a message they can see, or takes the reaction back; 204.
    func react(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let body = try r.object()
        let (key, op) = try ServerAPI.reaction(body)
        let message = try await visibleMessage(try r.messageID(), for: user)
        let frame = Frame.react(
            React(requestID: UUID(), conversationID: message.conversationID, messageID: message.id, key: key, op: op))
        _ = try await engine.runServerAPICommand(frame, as: user)
        return HTTPResponse(status: 204)
    }

    /// The reactions on `messages`, for their representations: as `viewer` sees them (without
    /// the reactions of users they block, SPEC §6.2), or all of them for the system (nil).
    func reactionSummaries(of messages: [MessageID], seenBy viewer: UserID?) async throws
        -> [MessageID: [String: ReactionSummaryObject]]
    {
        try await engine.reactionSummaries(of: messages, seenBy: viewer)
    }
}
