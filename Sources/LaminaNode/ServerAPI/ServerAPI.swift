import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore

/// Layer's Platform API (the "Server API") for app backends, under `/apps/<app id>/…` on the
/// node's TLS port, over HTTP/2 and HTTP/1.1. Checks, in order: bearer token (401), rate
/// (429), app id (404), `Accept` version (406), route (404/405), body size (413); then the
/// resource handler, which runs its commands through the engine like a sync session's.
/// Every route is listed in ``routes`` (kept in step with `Protocol/SERVER-API.yaml`).
public final class ServerAPI: Sendable {
    /// The router pattern.
    public static let routePattern = "/apps/*"
    /// The router pattern of the content resources (uploads take chunks of up to
    /// ``ServerAPILimits/maxUploadChunkBytes``).
    public static func contentRoutePattern(appID: String) -> String { "/apps/\(appID)/content/*" }

    let engine: NodeEngine
    private let tokenSource: ServerAPITokenSource
    /// The app id and the tokens in use (the tokens file re-read when it changes).
    var credentials: ServerAPICredentials { tokenSource.current }
    /// Requests per token: ``ServerAPISettings/burst`` at once, refilled at ``ServerAPISettings/requestsPerSecond``.
    let limiter: TokenBuckets<Int>
    /// The webhooks' delivery (nil: the webhooks API answers 503).
    let webhooks: WebhookDelivery?

    /// The node's content store (nil: the content routes answer 503).
    let content: ContentService?
    /// How long the content URLs handed out stay good, in seconds.
    let contentURLLifetime: Int64
    /// Where the URLs in answers point (`https://host[:port]`): the node's public URL from its
    /// configuration, never a request's Host. Set once the listener's port is known.
    let origin: NIOLockedValueBox<String>
    /// Wrong tokens per remote address (``ServerAPISettings/failedTokensPerSecond``).
    let failedTokens: TokenBuckets<String>

    init(
        engine: NodeEngine, credentials: ServerAPICredentials, settings: ServerAPISettings,
        webhooks: WebhookDelivery? = nil,
        content: ContentService? = nil, origin: NIOLockedValueBox<String>? = nil,
        shared: SharedServerAPICredentials? = nil
    ) {
        self.webhooks = webhooks
        self.content = content
        self.contentURLLifetime = Int64(settings.contentURLLifetimeSeconds)
        self.engine = engine
        self.tokenSource = ServerAPITokenSource(credentials, shared: shared)
        self.limiter = TokenBuckets(rates: [settings.requestsPerSecond], bursts: [Double(settings.burst)])
        self.origin = origin ?? NIOLockedValueBox("https://localhost")
        self.failedTokens = TokenBuckets(
            rates: [settings.failedTokensPerSecond], bursts: [Double(settings.failedTokenBurst)])
    }

    /// The Server API over `engine` without webhook delivery (the webhooks API answers 503),
    /// outside a ``NodeServer``: for the fuzz target and tests that call ``handle(_:)`` directly.
    public convenience init(engine: NodeEngine, credentials: ServerAPICredentials, settings: ServerAPISettings) {
        self.init(engine: engine, credentials: credentials, settings: settings, webhooks: nil)
    }

    /// One served operation: method and path template (`{name}` segments).
    public struct Route: Sendable, Hashable {
        public var method: String
        public var template: String
    }

    typealias Handler = @Sendable (ServerAPI, ServerAPIRequest) async throws -> HTTPResponse

    static let table: [(Route, Handler)] = [
        (Route(method: "POST", template: "/apps/{app_id}/conversations"), { try await $0.createConversation($1) }),
        (Route(method: "POST", template: "/apps/{app_id}/channels"), { try await $0.createChannel($1) }),
        (Route(method: "GET", template: "/apps/{app_id}/channels/{channel_id}"), { try await $0.getChannel($1) }),
        (Route(method: "DELETE", template: "/apps/{app_id}/channels/{channel_id}"), { try await $0.deleteChannel($1) }),
        (
            Route(method: "GET", template: "/apps/{app_id}/channels/{channel_id}/members"),
            { try await $0.listChannelMembers($1) }
        ),
        (
            Route(method: "PUT", template: "/apps/{app_id}/channels/{channel_id}/members/{user_id}"),
            { try await $0.addChannelMember($1) }
        ),
        (
            Route(method: "DELETE", template: "/apps/{app_id}/channels/{channel_id}/members/{user_id}"),
            { try await $0.removeChannelMember($1) }
        ),
        (
            Route(method: "POST", template: "/apps/{app_id}/channels/{channel_id}/messages"),
            { try await $0.sendChannelMessage($1) }
        ),
        (
            Route(method: "GET", template: "/apps/{app_id}/conversations/{conversation_id}"),
            { try await $0.getConversation($1) }
        ),
        (
            Route(method: "PATCH", template: "/apps/{app_id}/conversations/{conversation_id}"),
            { try await $0.patchConversation($1) }
        ),
        (
            Route(method: "DELETE", template: "/apps/{app_id}/conversations/{conversation_id}"),
            { try await $0.deleteConversation($1) }
        ),
        (
            Route(method: "GET", template: "/apps/{app_id}/users/{user_id}/conversations"),
            { try await $0.listConversations($1) }
        ),
        (
            Route(method: "POST", template: "/apps/{app_id}/conversations/{conversation_id}/messages"),
            { try await $0.sendMessage($1) }
        ),
        (
            Route(method: "GET", template: "/apps/{app_id}/conversations/{conversation_id}/messages"),
            { try await $0.listMessages($1, asUser: false) }
        ),
        (
            Route(method: "GET", template: "/apps/{app_id}/conversations/{conversation_id}/messages/{message_id}"),
            { try await $0.getMessage($1) }
        ),
        (
            Route(method: "DELETE", template: "/apps/{app_id}/conversations/{conversation_id}/messages/{message_id}"),
            { try await $0.deleteMessage($1) }
        ),
        (
            Route(
                method: "POST", template: "/apps/{app_id}/conversations/{conversation_id}/messages/{message_id}/parts"),
            { try await $0.addPart($1) }
        ),
        (
            Route(
                method: "GET", template: "/apps/{app_id}/conversations/{conversation_id}/messages/{message_id}/parts"),
            { try await $0.listParts($1) }
        ),
        (
            Route(
                method: "PUT", template: "/apps/{app_id}/conversations/{conversation_id}/messages/{message_id}/parts"),
            { try await $0.replaceParts($1) }
        ),
        (
            Route(
                method: "GET",
                template: "/apps/{app_id}/conversations/{conversation_id}/messages/{message_id}/parts/{part_id}"),
            { try await $0.getPart($1) }
        ),
        (
            Route(
                method: "PUT",
                template: "/apps/{app_id}/conversations/{conversation_id}/messages/{message_id}/parts/{part_id}"),
            { try await $0.replacePart($1) }
        ),
        (
            Route(method: "GET", template: "/apps/{app_id}/users/{user_id}/messages/{message_id}"),
            { try await $0.getUserMessage($1) }
        ),
        (
            Route(method: "POST", template: "/apps/{app_id}/users/{user_id}/messages/{message_id}/reactions"),
            { try await $0.react($1) }
        ),
        (
            Route(method: "GET", template: "/apps/{app_id}/users/{user_id}/messages"),
            { try await $0.searchUserMessages($1) }
        ),
        (Route(method: "PATCH", template: "/apps/{app_id}/users/{user_id}"), { try await $0.patchUser($1) }),
        (Route(method: "GET", template: "/apps/{app_id}/users/{user_id}"), { try await $0.getUser($1) }),
        (
            Route(
                method: "DELETE",
                template: "/apps/{app_id}/conversations/{conversation_id}/messages/{message_id}/parts/{part_id}"),
            { try await $0.deletePart($1) }
        ),
        (
            Route(method: "GET", template: "/apps/{app_id}/users/{user_id}/conversations/{conversation_id}/messages"),
            { try await $0.listMessages($1, asUser: true) }
        ),
        (
            Route(
                method: "POST", template: "/apps/{app_id}/users/{user_id}/conversations/{conversation_id}/mark_all_read"
            ), { try await $0.markAllRead($1) }
        ),
        (Route(method: "GET", template: "/apps/{app_id}/users/{user_id}/identity"), { try await $0.getIdentity($1) }),
        (
            Route(method: "POST", template: "/apps/{app_id}/users/{user_id}/identity"),
            { try await $0.createIdentity($1) }
        ),
        (
            Route(method: "PUT", template: "/apps/{app_id}/users/{user_id}/identity"),
            { try await $0.replaceIdentity($1) }
        ),
        (
            Route(method: "PATCH", template: "/apps/{app_id}/users/{user_id}/identity"),
            { try await $0.patchIdentity($1) }
        ),
        (
            Route(method: "DELETE", template: "/apps/{app_id}/users/{user_id}/identity"),
            { try await $0.deleteIdentity($1) }
        ),
        (
            Route(method: "DELETE", template: "/apps/{app_id}/users/{user_id}/sessions"),
            { try await $0.revokeSessions($1) }
        ),
        (Route(method: "POST", template: "/apps/{app_id}/announcements"), { try await $0.sendAnnouncement($1) }),
        (Route(method: "POST", template: "/apps/{app_id}/notifications"), { try await $0.sendNotification($1) }),
        (
            Route(method: "GET", template: "/apps/{app_id}/users/{user_id}/identities"),
            { try await $0.listFollowed($1) }
        ),
        (
            Route(method: "PUT", template: "/apps/{app_id}/users/{user_id}/identities/{followed_id}"),
            { try await $0.follow($1) }
        ),
        (
            Route(method: "DELETE", template: "/apps/{app_id}/users/{user_id}/identities/{followed_id}"),
            { try await $0.unfollow($1) }
        ),
        (Route(method: "GET", template: "/apps/{app_id}/users/{user_id}/blocks"), { try await $0.listBlocks($1) }),
        (Route(method: "POST", template: "/apps/{app_id}/users/{user_id}/blocks"), { try await $0.addBlock($1) }),
        (
            Route(method: "DELETE", template: "/apps/{app_id}/users/{user_id}/blocks/{blocked_id}"),
            { try await $0.removeBlock($1) }
        ),
        (Route(method: "GET", template: "/apps/{app_id}/users/{user_id}/badge"), { try await $0.getBadge($1) }),
        (
            Route(
                method: "GET",
                template: "/apps/{app_id}/users/{user_id}/conversations/{conversation_id}/notification_level"),
            { try await $0.getNotificationLevel($1) }
        ),
        (
            Route(
                method: "PUT",
                template: "/apps/{app_id}/users/{user_id}/conversations/{conversation_id}/notification_level"),
            { try await $0.putNotificationLevel($1) }
        ),
        (Route(method: "POST", template: "/apps/{app_id}/content"), { try await $0.createContent($1) }),
        (Route(method: "GET", template: "/apps/{app_id}/content/{content_id}"), { try await $0.getContent($1) }),
        (Route(method: "PUT", template: "/apps/{app_id}/content/{content_id}"), { try await $0.uploadContent($1) }),
        (
            Route(method: "GET", template: "/apps/{app_id}/content/{content_id}/data"),
            { try await $0.downloadContent($1) }
        ),
        (Route(method: "PUT", template: "/apps/{app_id}/users/{user_id}/badge"), { try await $0.putBadge($1) }),
    ]

    /// Every operation served (the Platform API's and the webhooks API's).
    public static var routes: [Route] { (table + webhookTable).map(\.0) }

    /// Answers one request (the route handler for ``routePattern``).
    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let base = "\(origin.withLockedValue { $0 })/apps/\(credentials.appID)"
        do {
            if let refusal = refusalBeforeBody(request) { return refusal }
            return try await dispatch(try Self.applyingMethodOverride(request), base: base)
        } catch {
            let webhooks = request.path.hasPrefix("/apps/\(credentials.appID)/webhooks")
            return Self.apiError(error).response(
                base: base, contentType: webhooks ? Self.webhooksContentType : ServerAPIJSON.contentType)
        }
    }

    static func apiError(_ error: any Error) -> ServerAPIError {
        if let e = error as? ServerAPIError { return e }
        if let e = error as? DistinctConflict {
            return .conflict(
                "a distinct conversation with these participants exists with other metadata",
                data: ["id": .string(ServerAPIRepresentation.conversationID(e.existing))])
        }
        return .from(EngineErrors.wire(error))
    }

    private func dispatch(_ request: HTTPRequest, base: String) async throws -> HTTPResponse {
        let target = Target(request)
        let (segments, bare, isUpload, isDownload) = (target.segments, target.bare, target.isUpload, target.isDownload)
        if !isSigned(request, target) {
            // Authentication first (also checked before the body: ``refusalBeforeBody(_:)``).
            guard let token = try validToken(request) else {
                throw ServerAPIError.authenticationRequired(
                    "a valid `Authorization: Bearer <token>` header is required")
            }
            if let wait = limiter.take([1], for: token) {
                throw ServerAPIError.rateLimitExceeded(Self.seconds(wait))
            }
        }

        guard segments.count >= 2, segments[0] == "apps" else {
            throw ServerAPIError.invalidEndpoint("no such endpoint \(bare)")
        }
        guard segments[1] == credentials.appID else {
            throw ServerAPIError.invalidAppID("no app \(segments[1]) on this node")
        }

        // The webhooks API has its own media type (ServerAPI+Webhooks.swift).
        let isWebhooks = segments.count >= 3 && segments[2] == "webhooks"
        let version: ServerAPIVersion
        if isUpload || isDownload {
            // The bytes of an upload need no Accept (curl sends `*/*`): the answer is 3.0's
            // content object unless a Layer media type names 1.0.
            version = (try? Self.version(request.headers["accept"])) ?? .v3
        } else if isWebhooks {
            try Self.webhooksVersion(request.headers["accept"])
            version = .v3
        } else {
            version = try Self.version(request.headers["accept"])
        }
        var methodsForPath: [String] = []
        for (route, handler) in isWebhooks ? Self.webhookTable : Self.table {
            guard let parameters = Self.match(route.template, segments) else { continue }
            methodsForPath.append(route.method)
            guard route.method == request.method else { continue }
            if request.bodyTooLarge {
                throw ServerAPIError.requestTooLarge(
                    isUpload ? ServerAPILimits.maxUploadChunkBytes : ServerAPILimits.maxBodyBytes)
            }
            var representation = ServerAPIRepresentation(base: base, version: version)
            representation.contentURLs = content?.urls
            representation.contentURLExpires = Timestamp.now().millisecondsSince1970 / 1000 + contentURLLifetime
            let context = ServerAPIRequest(
                http: request, parameters: parameters, query: Self.query(request.path), representation: representation)
            return try await handler(self, context)
        }
        if !methodsForPath.isEmpty {
            var error = ServerAPIError.methodNotAllowed("\(request.method) is not served on \(bare)")
            error.headers = [("allow", methodsForPath.joined(separator: ", "))]
            throw error
        }
        throw ServerAPIError.invalidEndpoint("no such endpoint \(bare)")
    }

    /// The version named by `Accept: application/vnd.layer+json; version=X` (406 otherwise).
    static func version(_ accept: String?) throws(ServerAPIError) -> ServerAPIVersion {
        guard let accept else {
            throw .invalidHeader(
                406, "Accept", "an `Accept: application/vnd.layer+json; version=3.0` header is required")
        }
        let items = accept.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard items.first?.lowercased() == "application/vnd.layer+json" else {
            throw .invalidHeader(406, "Accept", "the Accept media type must be application/vnd.layer+json")
        }
        guard let parameter = items.dropFirst().first(where: { $0.lowercased().hasPrefix("version=") }) else {
            throw .invalidHeader(
                406, "Accept", "the Accept header must name a version (\(ServerAPIVersion.servedList))")
        }
        let value = String(parameter.dropFirst("version=".count))
        guard let version = ServerAPIVersion(rawValue: value) else {
            throw .invalidHeader(
                406, "Accept", "version \(value) is not served (\(ServerAPIVersion.servedList) are)")
        }
        return version
    }

    static func match(_ template: String, _ segments: [String]) -> [String: String]? {
        let parts = template.split(separator: "/").map(String.init)
        guard parts.count == segments.count else { return nil }
        var parameters: [String: String] = [:]
        for (part, segment) in zip(parts, segments) {
            if part.hasPrefix("{") {
                guard !segment.isEmpty else { return nil }
                let value = segment.removingPercentEncoding ?? segment
                // No id holds a control character: `%00` and the like name nothing (404).
                guard !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
                    return nil
                }
                parameters[String(part.dropFirst().dropLast())] = value
            } else if part != segment {
                return nil
            }
        }
        return parameters
    }

    static func query(_ path: String) -> [String: String] {
        guard let q = path.split(separator: "?", maxSplits: 1).dropFirst().first else { return [:] }
        var out: [String: String] = [:]
        for pair in q.split(separator: "&") {
            // Empty pieces kept: `=` alone is an empty name with an empty value (omitting them
            // left no name at all, and `?=` trapped the node; the input is in Fuzz/FailCases).
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                .map { String($0).removingPercentEncoding ?? String($0) }
            out[kv[0]] = kv.count > 1 ? kv[1] : ""
        }
        return out
    }
}

/// One matched request: the HTTP request, path parameters, query, and how to represent objects.
struct ServerAPIRequest: Sendable {
    var http: HTTPRequest
    var parameters: [String: String]
    var query: [String: String]
    var representation: ServerAPIRepresentation

    func conversationID() throws(ServerAPIError) -> ConversationID {
        guard let raw = parameters["conversation_id"], let uuid = UUID(uuidString: raw) else {
            throw .notFound("no conversation \(parameters["conversation_id"] ?? "")")
        }
        return ConversationID(uuid: uuid)
    }

    func messageID() throws(ServerAPIError) -> MessageID {
        guard let raw = parameters["message_id"], let uuid = UUID(uuidString: raw) else {
            throw .notFound("no message \(parameters["message_id"] ?? "")")
        }
        return MessageID(uuid: uuid)
    }

    /// The `part_id` path parameter: the part's UUID.
    func partID() throws(ServerAPIError) -> UUID {
        guard let raw = parameters["part_id"], let uuid = UUID(uuidString: raw) else {
            throw .notFound("no part \(parameters["part_id"] ?? "")")
        }
        return uuid
    }

    func userID() throws(ServerAPIError) -> UserID {
        do {
            let user = try UserID(parameters["user_id"] ?? "")
            try user.checkIsUser()
            return user
        } catch { throw .notFound("no user \(parameters["user_id"] ?? "")") }
    }

    /// The `If-None-Match` request id (a UUID), if sent: the id of what the request creates,
    /// so a repeated request finds the first one's result.
    func requestID() throws(ServerAPIError) -> UUID? {
        guard var value = http.headers["if-none-match"] else { return nil }
        value = value.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
        guard let uuid = UUID(uuidString: value) else {
            throw .invalidHeader(400, "If-None-Match", "If-None-Match must hold a UUID")
        }
        return uuid
    }

    /// `page_size` (1…``ServerAPILimits/maxPageSize``).
    func pageSize() throws(ServerAPIError) -> Int {
        guard let raw = query["page_size"] else { return ServerAPILimits.defaultPageSize }
        guard let n = Int(raw), (1...ServerAPILimits.maxPageSize).contains(n) else {
            throw .invalidProperty("page_size", "page_size must be 1...\(ServerAPILimits.maxPageSize)")
        }
        return n
    }
}
