import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// The Client API's WebSocket route (`wss://host/websocket?session_token=…`, subprotocols
/// `layer-2.0` and `layer-3.0`): checks the session token before the upgrade and opens a
/// ``WebSocketSession`` on the socket.
///
/// Refusals are Layer error objects: no or an unknown, expired or revoked `session_token` →
/// 401 `authentication_required`; a subprotocol offered but none of Layer's → 400
/// `invalid_header`; more than ``maxSocketsPerSession`` sockets of one session → 429; the
/// node's session slots all taken → 503. The node-wide bound on sockets is the transport's
/// (``WebSocketSettings/maxConnections``).
public enum WebSocketEndpoint {
    public static let path = "/websocket"
    /// What the route speaks, in the order it prefers them when a client offers both.
    public static let subprotocols = ["layer-3.0", "layer-2.0"]
    /// The most sockets open at once on one session token.
    public static let maxSocketsPerSession = 8

    /// Sockets open per session (SHA-256 of the token, hex).
    final class OpenSockets: Sendable {
        private let counts = NIOLockedValueBox([String: Int]())

        func count(_ key: String) -> Int { counts.withLockedValue { $0[key] ?? 0 } }

        func take(_ key: String) -> Bool {
            counts.withLockedValue { counts in
                let now = counts[key] ?? 0
                guard now < WebSocketEndpoint.maxSocketsPerSession else { return false }
                counts[key] = now + 1
                return true
            }
        }

        func give(_ key: String) {
            counts.withLockedValue { counts in
                let now = (counts[key] ?? 1) - 1
                counts[key] = now > 0 ? now : nil
            }
        }
    }

    /// The upgrade decision for the route. `admit`/`release` take and give back one of the
    /// node's session slots (the socket drives a session); `budget` counts the socket's queued
    /// outbound bytes with the sync streams' (``NodeOutboundBudget``).
    static func handler(
        api: ClientAPI, logger: Logger, budget: NodeOutboundBudget? = nil, admit: @escaping @Sendable () -> Bool,
        release: @escaping @Sendable () -> Void
    ) -> WebSocketUpgradeHandler {
        let sockets = OpenSockets()
        return { request in
            await decide(
                request, api: api, sockets: sockets, logger: logger, budget: budget, admit: admit, release: release)
        }
    }

    private static func decide(
        _ request: WebSocketUpgradeRequest, api: ClientAPI, sockets: OpenSockets, logger: Logger,
        budget: NodeOutboundBudget?, admit: @escaping @Sendable () -> Bool, release: @escaping @Sendable () -> Void
    ) async -> WebSocketUpgradeDecision {
        let origin = "https://\(request.headers["host"] ?? "localhost")"
        func refuse(_ error: ServerAPIError) -> WebSocketUpgradeDecision {
            .refuse(error.response(base: origin))
        }
        if !request.offeredSubprotocols.isEmpty, request.subprotocol == nil {
            return refuse(
                .invalidHeader(
                    400, "Sec-WebSocket-Protocol",
                    "the WebSocket speaks \(subprotocols.joined(separator: " and ")), offered: \(request.offeredSubprotocols.joined(separator: ", ").prefix(200))"
                ))
        }
        guard let token = request.query["session_token"], !token.isEmpty else {
            return refuse(
                api.authenticationRequired(
                    "the WebSocket URL needs ?session_token=<a session token>", address: request.remoteAddress))
        }
        let session: ClientAPISession
        let head: UInt64
        let identities: [UserID: StoredIdentity]
        do {
            session = try await api.sessions.session(forToken: token)
            // Where the feed stands, and the identities of the users the socket will show.
            (head, identities) = try await api.engine.store.read { [user = session.user] r in
                let audience = try r.identityAudience(of: user).sorted().prefix(WebSocketSession.maxKnownIdentities)
                return (try r.feedHead(of: user), try r.identities(of: audience))
            }
        } catch let error as WireError where [WireError.Code.sessionExpired, .sessionRevoked].contains(error.code) {
            let reason = error.code == .sessionRevoked ? "the session was revoked" : "the session expired or is unknown"
            return refuse(api.authenticationRequired(reason, address: request.remoteAddress, code: error.code))
        } catch {
            logger.warning("WebSocket upgrade: reading the session failed", metadata: ["error": "\(error)"])
            return refuse(.serviceUnavailable("the session could not be read; retry"))
        }
        guard let device = UUID(uuidString: session.device) else {
            return refuse(
                api.authenticationRequired(
                    "this session's device id is not a UUID; sign in again", address: request.remoteAddress))
        }
        let key = session.tokenHash.map { String(format: "%02x", $0) }.joined()
        guard sockets.count(key) < maxSocketsPerSession else {
            return refuse(
                .init(429, "rate_limit_exceeded", 7, "at most \(maxSocketsPerSession) WebSockets per session"))
        }
        let credentials = WebSocketSession.Credentials(user: session.user, device: device, token: token, head: head)
        let representation = ClientAPIRepresentation(base: origin, viewer: session.user, identities: identities)
        var socketLogger = logger
        socketLogger[metadataKey: "user"] = "\(session.user)"
        let sessionLogger = socketLogger
        let engine = api.engine
        return .accept(
            subprotocol: request.subprotocol,
            opened: { connection in
                guard sockets.take(key) else {
                    return connection.close(code: .policyViolation, reason: "too many WebSockets for this session")
                }
                guard admit() else {
                    sockets.give(key)
                    return connection.close(code: .init(codeNumber: 1013), reason: "the node is at its session limit")
                }
                if let budget { connection.account(with: NodeOutboundBudget.WebSocketAccount(opening: budget)) }
                let session = WebSocketSession(
                    connection: connection, engine: engine, credentials: credentials, representation: representation,
                    logger: sessionLogger,
                    released: {
                        sockets.give(key)
                        release()
                    })
                session.start()
            })
    }
}
