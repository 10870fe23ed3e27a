import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaTransport
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore

/// Layer's Client API (REST) for apps' clients: Layer's Web SDK and any HTTP client, on the
/// node's TLS port over HTTP/2 and HTTP/1.1, at the paths Layer served (`/nonces`,
/// `/sessions`, `/conversations`, `/messages`, …). Checks, in order: route (404/405),
/// `Accept` version (406), body size (413), session (401 with a fresh nonce), rate per
/// session (429); then the handler, which runs its commands through the engine as the
/// session's user, like a sync session's. Errors are Layer's error objects
/// (``ClientErrorObject``); every route is in ``routes`` (kept in step with
/// `Protocol/CLIENT-API.yaml`).
public final class ClientAPI: Sendable {
    /// The router patterns (exact paths and prefixes) the Client API answers.
    public static let routePatterns = [
        "/ping", "/nonces", "/sessions", "/sessions/*", "/conversations", "/conversations/*", "/messages",
        "/messages/*",
        "/identities",
        "/identities/*", "/following/users", "/following/users/*",
        "/announcements", "/announcements/*", "/push_tokens", "/dev/identity_tokens", "/content", "/content/*",
        "/channels", "/channels/*",
    ]

    let engine: NodeEngine
    /// Nonces and session tokens (shared with the WebSocket half).
    public let sessions: ClientAPISessions
    /// The app id `POST /sessions` must name (the Server API's); nil: any.
    let appID: String?
    /// Mints dev identity tokens for `POST /dev/identity_tokens` (nil: that route answers 404).
    let devIdentity: DevIdentityProvider?
    /// Requests per session.
    let limiter: TokenBuckets<[UInt8]>
    /// The content store, whose signer signs content download URLs (nil: content parts are
    /// shown without one).
    let content: ContentService?
    let contentURLLifetime: Int64
    /// The node's public URL (`https://host:port`, from configuration, never from the request):
    /// the start of every URL in an answer.
    let origin: NIOLockedValueBox<String>

    init(
        engine: NodeEngine, settings: ClientAPISettings, appID: String?, devIdentity: DevIdentityProvider?,
        content: ContentService? = nil, contentURLLifetimeSeconds: Int = 3600, origin: NIOLockedValueBox<String>? = nil
    ) {
        self.engine = engine
        self.origin = origin ?? NIOLockedValueBox("https://localhost")
        self.sessions = ClientAPISessions(engine: engine)
        self.appID = appID
        self.devIdentity = devIdentity
        self.limiter = TokenBuckets(rates: [settings.requestsPerSecond], bursts: [settings.burst])
        self.content = content
        self.contentURLLifetime = Int64(contentURLLifetimeSeconds)
    }

    /// The Client API over `engine` outside a ``NodeServer`` (the fuzz target, tests).
    public convenience init(
        engine: NodeEngine, appID: String?, devIdentity: DevIdentityProvider? = nil,
        settings: ClientAPISettings = ClientAPISettings()
    ) {
        self.init(engine: engine, settings: settings, appID: appID, devIdentity: devIdentity, content: nil)
    }

    /// One served operation: method and path template (`{name}` segments).
    public typealias Route = ServerAPI.Route

    typealias Handler = @Sendable (ClientAPI, ClientAPIRequest) async throws -> HTTPResponse

    /// Routes with `authenticated` false need no session.
    static let table: [(Route, Bool, Handler)] = coreTable + channelTable

    /// The routes besides channels'.
    static let coreTable: [(Route, Bool, Handler)] = [
        // The Web SDK's online check (`HEAD /ping?client=<version>`): 204, no session needed.
        (Route(method: "HEAD", template: "/ping"), false, { _, _ in HTTPResponse(status: 204) }),
        (Route(method: "GET", template: "/ping"), false, { _, _ in HTTPResponse(status: 204) }),
        (Route(method: "POST", template: "/nonces"), false, { try await $0.createNonce($1) }),
        (Route(method: "POST", template: "/sessions"), false, { try await $0.createSession($1) }),
        (Route(method: "DELETE", template: "/sessions/{session_token}"), true, { try await $0.deleteSession($1) }),
        (Route(method: "POST", template: "/dev/identity_tokens"), false, { try await $0.mintDevIdentityToken($1) }),
        (Route(method: "GET", template: "/conversations"), true, { try await $0.listConversations($1) }),
        (Route(method: "POST", template: "/conversations"), true, { try await $0.createConversation($1) }),
        (
            Route(method: "GET", template: "/conversations/{conversation_id}"), true,
            { try await $0.getConversation($1) }
        ),
        (
            Route(method: "PATCH", template: "/conversations/{conversation_id}"), true,
            { try await $0.patchConversation($1) }
        ),
        (
            Route(method: "DELETE", template: "/conversations/{conversation_id}"), true,
            { try await $0.deleteConversation($1) }
        ),
        (
            Route(method: "POST", template: "/conversations/{conversation_id}/mark_all_read"), true,
            { try await $0.markAllRead($1) }
        ),
        (
            Route(method: "GET", template: "/conversations/{conversation_id}/messages"), true,
            { try await $0.listMessages($1) }
        ),
        (
            Route(method: "POST", template: "/conversations/{conversation_id}/messages"), true,
            { try await $0.sendMessage($1) }
        ),
        (
            Route(method: "GET", template: "/conversations/{conversation_id}/notification_level"), true,
            { try await $0.getNotificationLevel($1) }
        ),
        (
            Route(method: "PUT", template: "/conversations/{conversation_id}/notification_level"), true,
            { try await $0.putNotificationLevel($1) }
        ),
        (Route(method: "GET", template: "/messages"), true, { try await $0.searchMessages($1) }),
        (Route(method: "GET", template: "/messages/{message_id}"), true, { try await $0.getMessage($1) }),
        (
            Route(method: "POST", template: "/messages/{message_id}/reactions"), true,
            { try await $0.react($1) }
        ),
        (Route(method: "DELETE", template: "/messages/{message_id}"), true, { try await $0.deleteMessage($1) }),
        (Route(method: "PATCH", template: "/messages/{message_id}"), true, { try await $0.editMessage($1) }),
        (
            Route(method: "POST", template: "/messages/{message_id}/receipts"), true,
            { try await $0.sendReceipt($1) }
        ),
        (Route(method: "GET", template: "/identities"), true, { try await $0.listIdentities($1) }),
        (Route(method: "GET", template: "/identities/{user_id}"), true, { try await $0.getIdentity($1) }),
        (Route(method: "GET", template: "/following/users"), true, { try await $0.listFollowing($1) }),
        (Route(method: "PUT", template: "/following/users/{user_id}"), true, { try await $0.follow($1) }),
        (Route(method: "DELETE", template: "/following/users/{user_id}"), true, { try await $0.unfollow($1) }),
        (Route(method: "GET", template: "/announcements"), true, { try await $0.listAnnouncements($1) }),
        (
            Route(method: "GET", template: "/announcements/{announcement_id}"), true,
            { try await $0.getAnnouncement($1) }
        ),
        (
            Route(method: "DELETE", template: "/announcements/{announcement_id}"), true,
            { try await $0.deleteAnnouncement($1) }
        ),
        (Route(method: "POST", template: "/push_tokens"), true, { try await $0.registerPushToken($1) }),
    ]

    /// The channel routes (ClientAPI+Channels.swift).
    static let channelTable: [(Route, Bool, Handler)] = [
        (Route(method: "GET", template: "/channels"), true, { try await $0.listChannels($1) }),
        (Route(method: "POST", template: "/channels"), true, { try await $0.createChannel($1) }),
        (Route(method: "GET", template: "/channels/{channel_id}"), true, { try await $0.getChannel($1) }),
        (Route(method: "DELETE", template: "/channels/{channel_id}"), true, { try await $0.deleteChannel($1) }),
        (
            Route(method: "GET", template: "/channels/{channel_id}/members"), true,
            { try await $0.listChannelMembers($1) }
        ),
        (
            Route(method: "GET", template: "/channels/{channel_id}/members/{user_id}"), true,
            { try await $0.getChannelMember($1) }
        ),
        (
            Route(method: "PUT", template: "/channels/{channel_id}/members/{user_id}"), true,
            { try await $0.joinChannel($1) }
        ),
        (
            Route(method: "DELETE", template: "/channels/{channel_id}/members/{user_id}"), true,
            { try await $0.leaveChannel($1) }
        ),
        (
            Route(method: "GET", template: "/channels/{channel_id}/messages"), true,
            { try await $0.listChannelMessages($1) }
        ),
        (
            Route(method: "POST", template: "/channels/{channel_id}/messages"), true,
            { try await $0.sendChannelMessage($1) }
        ),
        (
            Route(method: "GET", template: "/channels/{channel_id}/messages/{message_id}"), true,
            { try await $0.getChannelMessage($1) }
        ),
    ]

    /// Every operation served.
    public static var routes: [Route] { served.map(\.0) }

    /// The table and the content routes (ClientAPI+Content.swift).
    static let served = table + contentTable

    /// Answers one request (the route handler for ``routePatterns``).
    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let base = origin.withLockedValue { $0 }
        var response: HTTPResponse
        do {
            response = try await dispatch(request, base: base)
        } catch {
            response = Self.apiError(error).response(base: base)
        }
        return Self.answeredAsJSON(response)
    }

    /// The Client API answers `application/json` (what Layer's Client API sent and the Web SDK
    /// parses: its XHR reads a body as JSON only under that type), not the Platform API's
    /// `application/vnd.layer+json` that the shared encoders write.
    static func answeredAsJSON(_ response: HTTPResponse) -> HTTPResponse {
        var response = response
        for i in response.headers.indices where response.headers[i].0 == "content-type" {
            if response.headers[i].1 == ServerAPIJSON.contentType { response.headers[i].1 = jsonContentType }
        }
        return response
    }

    /// The media type of every JSON answer.
    static let jsonContentType = "application/json; charset=utf-8"

    /// Any failure as Layer's error: the engine's refusals as the Server API maps them.
    static func apiError(_ error: any Error) -> ServerAPIError { ServerAPI.apiError(error) }

    private func dispatch(_ request: HTTPRequest, base: String) async throws -> HTTPResponse {
        let bare = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
        let segments = bare.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        var methodsForPath: [String] = []
        for (route, authenticated, handler) in Self.served {
            guard let parameters = ServerAPI.match(route.template, segments) else { continue }
            methodsForPath.append(route.method)
            guard route.method == request.method else { continue }
            if !Self.takesAnyAccept(route) { try Self.checkAccept(request.headers["accept"]) }
            if request.bodyTooLarge, request.method != "PUT" || !Self.takesAnyAccept(route) {
                throw ServerAPIError.requestTooLarge(ClientAPILimits.maxBodyBytes)
            }
            var context = ClientAPIRequest(
                http: request, parameters: parameters, query: ServerAPI.query(request.path), base: base)
            if authenticated {
                let session = try await authenticate(request)
                if let wait = limiter.take([1], for: session.tokenHash) {
                    let seconds = Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18
                    throw ServerAPIError.rateLimitExceeded(max(1, Int(seconds.rounded(.up))))
                }
                context.session = session
            }
            return try await handler(self, context)
        }
        if !methodsForPath.isEmpty {
            var error = ServerAPIError.methodNotAllowed("\(request.method) is not served on \(bare)")
            error.headers = [("allow", methodsForPath.joined(separator: ", "))]
            throw error
        }
        throw ServerAPIError.invalidEndpoint("no such endpoint \(bare)")
    }

    /// `Accept: application/vnd.layer+json; version=2.0` (or 3.0); 406 otherwise.
    static func checkAccept(_ accept: String?) throws(ServerAPIError) {
        guard let accept else {
            throw .invalidHeader(
                406, "Accept", "an `Accept: application/vnd.layer+json; version=2.0` header is required")
        }
        let items = accept.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard items.first?.lowercased() == "application/vnd.layer+json" else {
            throw .invalidHeader(406, "Accept", "the Accept media type must be application/vnd.layer+json")
        }
        guard let parameter = items.dropFirst().first(where: { $0.lowercased().hasPrefix("version=") }) else {
            throw .invalidHeader(406, "Accept", "the Accept header must name a version (2.0 or 3.0)")
        }
        let value = String(parameter.dropFirst("version=".count)).trimmingCharacters(
            in: CharacterSet(charactersIn: "\""))
        guard ClientAPILimits.versions.contains(value) else {
            throw .invalidHeader(406, "Accept", "version \(value) is not served (2.0 and 3.0 are)")
        }
    }

    /// The session of `Authorization: Layer session-token="…"`; 401 with a fresh nonce
    /// (`data.nonce`) when it is missing, malformed, unknown, expired or revoked.
    func authenticate(_ request: HTTPRequest) async throws -> ClientAPISession {
        guard let header = request.headers["authorization"], let token = Self.sessionToken(header) else {
            throw authenticationRequired(
                "an `Authorization: Layer session-token=\"…\"` header is required", address: request.remoteAddress)
        }
        do {
            return try await sessions.session(forToken: token)
        } catch {
            let reason: String
            switch error.code {
            case .sessionRevoked: reason = "the session was revoked"
            case .sessionExpired: reason = "the session expired or is unknown"
            default: throw error
            }
            throw authenticationRequired(reason, address: request.remoteAddress, code: error.code)
        }
    }

    /// The token of `Layer session-token="…"` (quotes optional).
    static func sessionToken(_ header: String) -> String? {
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("layer ") else { return nil }
        let rest = trimmed.dropFirst("layer ".count).trimmingCharacters(in: .whitespaces)
        guard rest.lowercased().hasPrefix("session-token=") else { return nil }
        let value = rest.dropFirst("session-token=".count).trimmingCharacters(
            in: CharacterSet(charactersIn: "\" "))
        return value.isEmpty ? nil : value
    }

    /// Layer's 401: `authentication_required` carrying a fresh nonce for the client's address
    /// (none when the address holds all it may; the client asks `POST /nonces` later).
    func authenticationRequired(_ message: String, address: SocketAddress?, code: WireError.Code? = nil)
        -> ServerAPIError
    {
        var data: [String: JSONValue] = [:]
        if case .success(let nonce) = sessions.issueNonce(for: address) { data["nonce"] = .string(nonce) }
        if let code { data["reason"] = .string(code.name) }
        return ServerAPIError(401, "authentication_required", 4, message, data: data)
    }

    /// How objects are shown to `session`'s user, with the identities of `users`.
    func representation(_ r: ClientAPIRequest, users: some Sequence<UserID>) async throws -> ClientAPIRepresentation {
        let session = try r.requireSession()
        let wanted = Set(users).filter { $0.systemSenderName == nil }
        var out = ClientAPIRepresentation(base: r.base, viewer: session.user)
        if !wanted.isEmpty {
            out.identities = try await engine.store.read { reader in try reader.identities(of: wanted) }
        }
        out.content = contentURLs(r)
        return out
    }
}

/// One matched Client API request.
struct ClientAPIRequest: Sendable {
    var http: HTTPRequest
    var parameters: [String: String]
    var query: [String: String]
    /// `https://host:port`.
    var base: String
    /// The caller's session (routes that need one).
    var session: ClientAPISession?

    func requireSession() throws(ServerAPIError) -> ClientAPISession {
        guard let session else { throw .authenticationRequired("this request needs a session") }
        return session
    }

    /// The `conversation_id` path parameter (a UUID, or its Layer id percent-encoded).
    func conversationID() throws(ServerAPIError) -> ConversationID {
        guard let raw = parameters["conversation_id"], let id = ClientAPIRepresentation.conversation(raw) else {
            throw .notFound("no conversation \(parameters["conversation_id"] ?? "")")
        }
        return id
    }

    func messageID(_ name: String = "message_id") throws(ServerAPIError) -> MessageID {
        guard let raw = parameters[name],
            let id = name == "announcement_id"
                ? ClientAPIRepresentation.announcement(raw) : ClientAPIRepresentation.message(raw)
        else {
            throw .notFound("no \(name == "announcement_id" ? "announcement" : "message") \(parameters[name] ?? "")")
        }
        return id
    }

    /// `page_size` (1…``ClientAPILimits/maxPageSize``).
    func pageSize() throws(ServerAPIError) -> Int {
        guard let raw = query["page_size"] else { return ClientAPILimits.defaultPageSize }
        guard let n = Int(raw), (1...ClientAPILimits.maxPageSize).contains(n) else {
            throw .invalidProperty("page_size", "page_size must be 1...\(ClientAPILimits.maxPageSize)")
        }
        return n
    }

    /// The request's JSON object body.
    func object() throws(ServerAPIError) -> [String: JSONValue] { try ServerAPIJSON.object(http.body) }
}

extension ClientAPI {
    /// The context of an operation asked for outside REST (the WebSocket's `request`
    /// packets: `Conversation.create`, `Message.create`): the caller's session and the
    /// `https://host:port` its objects are shown under. With it, the WebSocket half runs
    /// ``createConversation(_:body:)`` and ``sendMessage(_:conversation:body:)``, and builds
    /// objects with ``conversationObject(_:_:)`` and ``representation(_:users:)``, exactly as REST does.
    func context(session: ClientAPISession, base: String) -> ClientAPIRequest {
        ClientAPIRequest(
            http: HTTPRequest(
                method: "POST", path: "/", headers: HeaderFields(), body: ByteBuffer(), httpVersion: "1.1"),
            parameters: [:], query: [:], base: base, session: session)
    }
}
