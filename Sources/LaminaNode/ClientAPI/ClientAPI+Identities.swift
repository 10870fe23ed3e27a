import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire

extension ClientAPI {
    /// GET /identities/:user_id: the user's identity (what the Server API set, else the user
    /// id as display name), with its `presence` (status and `last_seen_at`) when the node knows it.
    func getIdentity(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let raw = r.parameters["user_id"] ?? ""
        let user: UserID
        do { user = try ServerAPIRepresentation.user(raw, property: "user_id") } catch {
            throw ServerAPIError.notFound("no identity \(raw)")
        }
        var shown = try await representation(r, users: [user])
        shown.presences = try await engine.displayedPresence(of: [user], as: shown.viewer)
        return ServerAPIJSON.response(200, shown.identity(user))
    }

    /// GET /identities: the identities the user follows, which are (as Layer followed them by
    /// default) everyone sharing a live conversation with them, by user id, `page_size` after
    /// `from_id`; `Layer-Count` is how many.
    func listIdentities(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let pageSize = try r.pageSize()
        var users = try await engine.store.read { reader in try reader.followedUsers(of: user) }
            .subtracting([user]).sorted()
        let total = users.count
        if let from = r.query["from_id"] {
            let id = try ServerAPIRepresentation.user(from, property: "from_id")
            users.removeFirst(users.firstIndex(where: { $0 > id }) ?? users.count)
        }
        let page = users.prefix(pageSize)
        var shown = try await representation(r, users: page)
        shown.presences = try await engine.displayedPresence(of: Array(page), as: user)
        return ServerAPIJSON.response(
            200, page.map { shown.identity($0) }, extraHeaders: [("layer-count", "\(total)")])
    }

    /// GET /announcements: the user's announcements, newest first (at most
    /// ``ClientAPILimits/maxAnnouncements``, or `page_size`); `Layer-Count` is how many.
    func listAnnouncements(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let pageSize = min(try r.pageSize(), ClientAPILimits.maxAnnouncements)
        let id = ServerAPI.announcementsConversation(of: user)
        let found = try await engine.store.read { reader -> ([Message], Int)? in
            guard let stored = try reader.conversation(id), stored.isLive,
                stored.conversation.participants.contains(user)
            else { return nil }
            return (
                try reader.history(of: id, for: user, .last(pageSize)),
                try reader.counts(of: id, for: user).messages
            )
        }
        guard let found else {
            return ServerAPIJSON.response(200, [ClientAnnouncementObject](), extraHeaders: [("layer-count", "0")])
        }
        let (messages, count) = found
        let shown = try await representation(r, users: Set(messages.map(\.sender)))
        return ServerAPIJSON.response(
            200, messages.reversed().map { shown.announcement($0) }, extraHeaders: [("layer-count", "\(count)")])
    }

    /// GET /announcements/:id.
    func getAnnouncement(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let message = try await announcement(r)
        return ServerAPIJSON.response(200, try await representation(r, users: [message.sender]).announcement(message))
    }

    /// DELETE /announcements/:id: gone from the user's devices (204).
    func deleteAnnouncement(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let user = try r.requireSession().user
        let message = try await announcement(r)
        let frame = Frame.deleteMessage(
            DeleteMessage(
                requestID: UUID(), conversationID: message.conversationID, messageID: message.id, mode: .myDevices))
        _ = try await engine.runServerAPICommand(frame, as: user)
        return HTTPResponse(status: 204)
    }

    /// The announcement named in the path, one of the user's (404 otherwise).
    private func announcement(_ r: ClientAPIRequest) async throws -> Message {
        let user = try r.requireSession().user
        let id = try r.messageID("announcement_id")
        let message = try await visibleMessage(id, for: user)
        guard message.conversationID == ServerAPI.announcementsConversation(of: user) else {
            throw ServerAPIError.notFound("no announcement \(ClientAPIRepresentation.announcementID(id))")
        }
        return message
    }

    /// POST /push_tokens `{"token", "type": "apns" | "fcm" | "gcm", "apns_bundle_id",
    /// "apns_environment"}`: the session's device gets its pushes there (204). A token of the
    /// wrong size, or of a provider the node does not deliver to, is refused (422).
    func registerPushToken(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let session = try r.requireSession()
        let body = try r.object()
        guard let token = body["token"]?.string else { throw ServerAPIError.missingProperty("token") }
        let pushToken: PushToken
        switch body["type"]?.string {
        case "apns"?:
            guard let topic = body["apns_bundle_id"]?.string else {
                throw ServerAPIError.missingProperty("apns_bundle_id")
            }
            guard token.utf8.count % 2 == 0, token.utf8.count <= 256, let bytes = Self.hexBytes(token) else {
                throw ServerAPIError.invalidProperty("token", "an APNs token is hex digits")
            }
            let environment: APNsEnvironment = body["apns_environment"]?.string == "sandbox" ? .sandbox : .production
            pushToken = .apns(token: bytes, topic: topic, environment: environment)
        case "fcm"?, "gcm"?: pushToken = .fcm(token: token)
        case nil: throw ServerAPIError.missingProperty("type")
        default: throw ServerAPIError.invalidProperty("type", "type must be apns, fcm or gcm")
        }
        do { try pushToken.validate() } catch { throw ServerAPIError.invalidProperty("token", error.reason) }
        guard engine.pushes.delivers(pushToken.kind) else {
            throw ServerAPIError.invalidProperty("type", "this node does not deliver \(pushToken.kind.name) pushes")
        }
        let auth = NodeSession.Auth(user: session.user, device: session.device, tokenHash: session.tokenHash)
        try await engine.store.write { [engine] tx in
            try tx.setPushToken(pushToken, user: auth.user, device: auth.device, at: .now())
            try engine.recordPushRegistration(of: auth, in: tx)
        }
        engine.replicationSignal.notify()
        return HTTPResponse(status: 204)
    }

    static func hexBytes(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        var high: UInt8?
        for c in text.utf8 {
            let v: UInt8
            switch c {
            case 48...57: v = c - 48
            case 97...102: v = c - 87
            case 65...70: v = c - 55
            default: return nil
            }
            if let h = high {
                out.append(h << 4 | v)
                high = nil
            } else {
                high = v
            }
        }
        return high == nil ? out : nil
    }
}
