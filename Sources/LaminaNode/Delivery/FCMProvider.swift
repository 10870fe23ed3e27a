import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import NIOCore
import NIOHTTP1

/// FCM HTTP v1 with a service account: an RS256 JWT assertion (`iss` the account's email,
/// `scope` firebase.messaging, `aud` the token endpoint, one hour) is exchanged at the token
/// endpoint (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`) for an access token,
/// cached until a minute before it expires (and dropped after a 401); the exchange goes over
/// HTTP/1.1. Each push is `POST /v1/projects/<project>/messages:send` over HTTP/2 (many pushes
/// at once on ``PushSettings/connectionsPerProvider`` connections, as for APNs) with `{"message": {token, notification, data,
/// android, apns}}`. 200 delivered; 404 `UNREGISTERED` and 400 `INVALID_ARGUMENT` about the
/// token remove it; 429 and 5xx are retried; anything else drops the push.
final class FCMProvider: PushProvider {
    let kind = PushToken.Kind.fcm
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    struct ServiceAccount: Decodable {
        var client_email: String
        var private_key: String
        var token_uri: String
        var project_id: String
    }

    private let account: ServiceAccount
    private let signer: RS256Signer
    private let tokenPool: HTTP1Pool
    private let tokenPath: String
    private let tokenURL: String
    private let sendPool: HTTP2Pool
    private let sendPath: String
    private let timeout: TimeAmount
    private let accessToken = CachedToken()

    /// Loads the service account; a key file that does not parse is a start-up error with the reason.
    /// `tls` offers HTTP/1.1 (the token exchange), `h2` HTTP/2 (the sends).
    init(
        _ settings: PushSettings.FCM, connections: Int, tls: TLSContext, h2: TLSContext, group: EventLoopGroup,
        connectTimeout: TimeAmount,
        timeout: TimeAmount
    ) throws {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: settings.serviceAccountFile)) } catch {
            throw NodeServerError.configuration(
                "push: fcm serviceAccountFile \(settings.serviceAccountFile) cannot be read: \(error)")
        }
        do { account = try JSONDecoder().decode(ServiceAccount.self, from: data) } catch {
            throw NodeServerError.configuration(
                "push: fcm serviceAccountFile \(settings.serviceAccountFile) is not a service account key (client_email, private_key, token_uri, project_id): \(error)"
            )
        }
        do { signer = try RS256Signer(privateKeyPEM: account.private_key) } catch {
            throw NodeServerError.configuration(
                "push: the private_key of \(settings.serviceAccountFile) is not an RSA key in PEM: \(error)")
        }
        tokenURL = settings.tokenURL ?? account.token_uri
        (tokenPool, tokenPath) = try HTTP1Pool.forURL(tokenURL, tls: tls, group: group, connectTimeout: connectTimeout)
        let send = settings.sendURL ?? "https://fcm.googleapis.com/v1/projects/\(account.project_id)/messages:send"
        (sendPool, sendPath) = try HTTP2Pool.forURL(
            send, count: connections, tls: h2, group: group, connectTimeout: connectTimeout)
        self.timeout = timeout
    }

    /// The signed assertion exchanged for an access token.
    func assertion(now: Date = Date()) throws -> String {
        let iat = Int(now.timeIntervalSince1970)
        return try ProviderJWT.make(
            header: JWTHeader(alg: "RS256", typ: "JWT"),
            claims: FCMAssertionClaims(
                iss: account.client_email, scope: Self.scope, aud: tokenURL, iat: iat, exp: iat + 3_600),
            sign: signer.sign)
    }

    /// The access token (cached until a minute before it expires).
    func bearer() async throws -> String {
        if let current = accessToken.current { return current }
        let form =
            "grant_type=\("urn:ietf:params:oauth:grant-type:jwt-bearer".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&assertion=\(try assertion())"
        let response = try await tokenPool.request(
            method: .POST, path: tokenPath, headers: [("content-type", "application/x-www-form-urlencoded")],
            body: ByteBuffer(string: form),
            timeout: timeout)
        guard response.status == 200,
            let object = ServerAPIJSON.value(Data(response.body.readableBytesView))?.object,
            let token = object["access_token"]?.string
        else {
            throw TransportError(
                .badResponse,
                "the FCM token endpoint answered \(response.status): \(String(buffer: response.body).prefix(200))")
        }
        let lifetime = object["expires_in"]?.exactInteger.flatMap { Int(exactly: $0) } ?? 3_600
        accessToken.set(token, validFor: .seconds(max(0, lifetime - 60)))
        return token
    }

    /// The request body of one push.
    static func body(_ push: QueuedPush, _ n: PushNotification) throws -> [UInt8] {
        var data = n.data
        data["layer_message_id"] = n.messageID
        data["layer_conversation_id"] = n.conversationID
        data["layer_sender_id"] = n.sender
        data["badge"] = "\(n.badge)"
        let ttl = max(0, (push.expiresAt.millisecondsSince1970 - Timestamp.now().millisecondsSince1970) / 1_000)
        var android = FCMRequest.Android(
            collapse_key: push.message.uuid.uuidString.lowercased(), ttl: "\(ttl)s",
            priority: n.isSilent ? "normal" : "high")
        var notification: FCMRequest.Notification?
        if !n.isSilent {
            if n.title != nil || n.alert != nil {
                notification = FCMRequest.Notification(title: n.title, body: n.alert)
            }
            android.notification = FCMRequest.AndroidNotification(
                notification_count: n.badge, sound: n.sound, click_action: n.category)
        }
        let aps = APNsPayload.APS(badge: n.badge, contentAvailable: n.isSilent ? 1 : nil)
        let message = FCMRequest.Message(
            token: push.token.tokenText, data: data, notification: notification, android: android,
            apns: .init(payload: .init(aps: aps)))
        return Array(try ServerAPIJSON.encode(FCMRequest(message: message)))
    }

    func send(_ push: QueuedPush, _ notification: PushNotification) async -> PushOutcome {
        do {
            let bearer = try await bearer()
            let response = try await sendPool.request(
                method: "POST", path: sendPath,
                headers: [("authorization", "Bearer \(bearer)"), ("content-type", "application/json")],
                body: ByteBuffer(bytes: try Self.body(push, notification)), timeout: timeout,
                maxResponseBytes: 64 * 1024)
            return outcome(response.status, response.headers, response.body)
        } catch {
            return .retry("\(error)", after: nil)
        }
    }

    func outcome(_ status: Int, _ headers: HeaderFields, _ body: ByteBuffer) -> PushOutcome {
        let text = String(buffer: body)
        switch status {
        case 404 where text.contains("UNREGISTERED") || text.contains("NOT_FOUND"):
            return .unregistered("FCM answered 404 (the token is unregistered)")
        case 400 where text.contains("INVALID_ARGUMENT") && text.lowercased().contains("token"):
            return .unregistered("FCM answered 400 (not a valid registration token)")
        case 401:
            accessToken.invalidate()
            return .retry("FCM answered 401 (the access token was refused)", after: nil)
        default:
            return .http(status: status, headers: headers, provider: "FCM")
        }
    }

    func shutdown() async {
        await tokenPool.close()
        await sendPool.close()
    }
}
