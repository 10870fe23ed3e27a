import Foundation
import LaminaModel
import LaminaWire

/// Layer's presence requests on the Client API WebSocket (CLIENT-API-WEBSOCKET.md, SPEC §6.6),
/// as Layer's Web SDK sends them: `Presence.subscribe` (then presence changes come as `change`
/// packets), `Presence.update` (the user's status) and `Presence.sync` (the presence of the
/// users the socket's user follows, as a changes array).
extension WebSocketSession {
    /// The most ids one `Presence.sync {ids}` may name.
    static let maxPresenceSyncIDs = 500

    /// `Presence.subscribe`: from now on presence changes of followed users (and the user's own)
    /// are sent as `change` packets. Answered with `null`.
    func subscribePresence(_ request: WebSocketRequest) {
        markPresenceSubscribed()
        respond(to: request.requestID, data: JSONValue.null)
    }

    /// `Presence.update [{operation: set, property: status, value}]`: `available`, `away`,
    /// `busy`, `invisible`; `offline` means invisible (the Web SDK sends it for invisible) and
    /// `auto` available. Carried out as SET_PRESENCE; answered with `null` once applied.
    func updatePresence(_ request: WebSocketRequest) throws {
        guard let operations = request.data?.array else { throw ServerAPIError.missingProperty("data") }
        guard operations.count == 1, let operation = operations[0].object else {
            throw ServerAPIError.invalidProperty(
                "data", "data is one operation: {operation: set, property: status, value}")
        }
        guard operation["operation"]?.string == "set", operation["property"]?.string == "status" else {
            throw ServerAPIError.invalidProperty("data[0]", "the one property Presence.update sets is status")
        }
        guard let value = operation["value"]?.string else { throw ServerAPIError.missingProperty("data[0].value") }
        let status: PresenceStatus
        switch value {
        case "auto", "available": status = .available
        case "offline", "invisible": status = .invisible
        case "away": status = .away
        case "busy": status = .busy
        default:
            throw ServerAPIError.invalidProperty(
                "data[0].value", "status is available, away, busy, invisible, offline or auto")
        }
        let id = UUID()
        expect(id, .presence(requestID: request.requestID))
        requestStarted()
        submit(.setPresence(SetPresence(requestID: id, status: status)))
    }

    /// `Presence.sync {since}` or `{ids}`: `{changes: [...]}`, an `update` of each followed
    /// user's `presence.status` and `presence.last_seen_at` that the node knows (with `ids`, of
    /// those of them named; presence is soft state, so `since` changes nothing: the current
    /// presence is every change since any time).
    func syncPresence(_ request: WebSocketRequest) throws {
        var named: Set<UserID>?
        if let ids = request.data?.object?["ids"] {
            guard let list = ids.array else { throw ServerAPIError.invalidProperty("data.ids", "ids is an array") }
            guard list.count <= Self.maxPresenceSyncIDs else {
                throw ServerAPIError.invalidProperty(
                    "data.ids", "at most \(Self.maxPresenceSyncIDs) ids (got \(list.count))")
            }
            var users: Set<UserID> = []
            for (index, item) in list.enumerated() {
                users.insert(try ServerAPIRepresentation.user(item, property: "data.ids[\(index)]"))
            }
            named = users
        }
        let updates = engine.presenceOfFollowed(by: user, among: named)
        let changes = updates.map(presenceChange)
        respond(to: request.requestID, data: WebSocketPresenceChanges(changes: changes))
    }

    /// One user's presence as a Layer `change` body: an `update` of the Identity.
    func presenceChange(_ changed: PresenceChanged) -> WebSocketChangeBody<[WebSocketPatchOperation]> {
        let presence = changed.presence
        return WebSocketChangeBody(
            operation: "update",
            object: WebSocketObjectReference(
                type: "Identity", id: ClientAPIRepresentation.identityID(changed.user),
                url: "\(representation.base)/identities/\(ClientAPIRepresentation.pathSegment(changed.user.rawValue))"),
            data: [
                WebSocketPatchOperation(
                    operation: "set", property: "presence.status", value: .string(presence.status.name)),
                WebSocketPatchOperation(
                    operation: "set", property: "presence.last_seen_at",
                    value: presence.lastSeenAt.map { .string(ClientAPIRepresentation.date($0)) } ?? .null),
            ])
    }
}

/// `Presence.sync`'s answer: the changes to apply, as the Web SDK's changes arrays are.
struct WebSocketPresenceChanges: Encodable {
    var changes: [WebSocketChangeBody<[WebSocketPatchOperation]>]
}
