import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import NIOCore

/// The APNs provider API over HTTP/2 (the transport's client role), token-based: an ES256 JWT
/// (`kid` the key id, `iss` the team id, `iat`) signed with the team's key, made again every
/// 50 minutes (APNs refuses tokens older than an hour, and new ones more often than every 20
/// minutes) and at once after `ExpiredProviderToken`. ``PushSettings/connectionsPerProvider``
/// HTTP/2 connections per environment (``HTTP2Pool``), each carrying many pushes at once.
///
/// `POST /3/device/<hex token>` with `apns-topic`, `apns-push-type` (`alert`, or `background`
/// for a silent push), `apns-priority` (10, or 5 for background), `apns-expiration` (the
/// push's expiry, Unix seconds) and `apns-collapse-id` (the message id). 200 delivered; 410
/// `Unregistered` and 400 `BadDeviceToken` / `DeviceTokenNotForTopic` remove the token; 429
/// and 5xx are retried; anything else drops the push.
final class APNsProvider: PushProvider {
    let kind = PushToken.Kind.apns
    /// A provider token is made again after this long.
    static let tokenLifetime: Duration = .seconds(50 * 60)

    private let settings: PushSettings.APNs
    private let signer: ES256Signer
    private let timeout: TimeAmount
    private let token = CachedToken()
    /// The connections per environment: concurrent pushes share them.
    private let pools: [APNsEnvironment: HTTP2Pool]

    /// Loads the team's key; a key that does not parse is a start-up error with the reason.
    init(
        _ settings: PushSettings.APNs, connections: Int, tls: TLSContext, group: EventLoopGroup,
        connectTimeout: TimeAmount, timeout: TimeAmount
    ) throws {
        let pem: String
        do { pem = try String(contentsOfFile: settings.keyFile, encoding: .utf8) } catch {
            throw NodeServerError.configuration("push: apns keyFile \(settings.keyFile) cannot be read: \(error)")
        }
        do { signer = try ES256Signer(privateKeyPEM: pem) } catch {
            throw NodeServerError.configuration(
                "push: apns keyFile \(settings.keyFile) is not a P-256 private key in PEM (.p8): \(error)")
        }
        for url in [settings.productionURL, settings.sandboxURL] where !url.hasPrefix("https://") {
            throw NodeServerError.configuration("push: apns URL \(url) is not an https:// URL")
        }
        self.settings = settings
        self.timeout = timeout
        pools = [
            .production: HTTP2Pool(
                url: settings.productionURL, count: connections, tls: tls, group: group, connectTimeout: connectTimeout),
            .sandbox: HTTP2Pool(
                url: settings.sandboxURL, count: connections, tls: tls, group: group, connectTimeout: connectTimeout),
        ]
    }

    /// The provider token (cached, made again before it is too old).
    func providerToken() throws -> String {
        if let current = token.current { return current }
        let jwt = try ProviderJWT.make(
            header: JWTHeader(alg: "ES256", kid: settings.keyID),
            claims: APNsClaims(iss: settings.teamID, iat: Int(Date().timeIntervalSince1970)),
            sign: signer.sign)
        token.set(jwt, validFor: Self.tokenLifetime)
        return jwt
    }

    /// The request body: `aps` (alert with title and body, sound, badge, category; or
    /// `content-available` when silent), the custom data at the top level, and `layer` with the
    /// message and conversation ids.
    static func payload(_ n: PushNotification) throws -> [UInt8] {
        var aps = APNsPayload.APS(badge: n.badge, category: n.category)
        if n.isSilent {
            aps.contentAvailable = 1
        } else {
            if n.title != nil || n.alert != nil { aps.alert = APNsPayload.Alert(title: n.title, body: n.alert) }
            aps.sound = n.sound
        }
        let layer = APNsPayload.Layer(
            message_identifier: n.messageID, conversation_identifier: n.conversationID, sender_id: n.sender)
        return Array(try ServerAPIJSON.encode(APNsPayload(aps: aps, layer: layer, custom: n.data)))
    }

    static func headers(_ push: QueuedPush, _ n: PushNotification, bearer: String) -> HeaderFields {
        guard case .apns(_, let topic, _) = push.token else { return [] }
        return [
            ("authorization", "bearer \(bearer)"), ("apns-topic", topic),
            ("apns-push-type", n.isSilent ? "background" : "alert"),
            ("apns-priority", n.isSilent ? "5" : "10"),
            ("apns-expiration", "\(push.expiresAt.millisecondsSince1970 / 1_000)"),
            ("apns-collapse-id", push.message.uuid.uuidString.lowercased()), ("content-type", "application/json"),
        ]
    }

    func send(_ push: QueuedPush, _ notification: PushNotification) async -> PushOutcome {
        guard case .apns(_, _, let environment) = push.token else { return .refused("not an APNs token") }
        do {
            let body = ByteBuffer(bytes: try Self.payload(notification))
            let path = "/3/device/\(push.token.tokenText)"
            guard let pool = pools[environment] else {
                return .refused("no connection for APNs environment \(environment)")
            }
            let response = try await pool.request(
                method: "POST", path: path, headers: Self.headers(push, notification, bearer: try providerToken()),
                body: body,
                timeout: timeout, maxResponseBytes: 16 * 1024)
            return outcome(response)
        } catch {
            return .retry("\(error)", after: nil)
        }
    }

    func outcome(_ response: HTTP2ClientResponse) -> PushOutcome {
        let reason = ServerAPIJSON.value(Data(response.body.readableBytesView))?.object?["reason"]?.string ?? ""
        switch (response.status, reason) {
        case (200, _): return .delivered
        case (410, _), (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"):
            return .unregistered("APNs answered \(response.status) \(reason)")
        case (403, "ExpiredProviderToken"), (403, "InvalidProviderToken"):
            token.invalidate()
            return .retry("APNs answered 403 \(reason)", after: nil)
        default:
            switch PushOutcome.http(status: response.status, headers: response.headers, provider: "APNs") {
            case .retry(let why, let after): return .retry("\(why) \(reason)", after: after)
            case .refused(let why): return .refused("\(why) \(reason)")
            case let other: return other
            }
        }
    }

    func shutdown() async {
        for pool in pools.values { await pool.close() }
    }
}
