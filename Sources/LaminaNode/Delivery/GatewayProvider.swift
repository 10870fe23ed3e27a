import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import NIOCore
import NIOHTTP1

/// The generic push gateway: one JSON POST per notification to the operator's URL, over the
/// node's HTTP/1.1 client. Body: `{"token", "provider": "gateway", "user_id", "device_id",
/// "expires_at", "notification": {alert, title, sound, category, data, badge, silent,
/// message_id, conversation_id, sender_id}}`. 2xx delivered; 404 and 410 mean the token is
/// gone; 408, 429 and 5xx are retried; other answers drop the push.
final class GatewayProvider: PushProvider {
    let kind = PushToken.Kind.gateway
    private let pool: HTTP1Pool
    private let path: String
    private let authorization: String?
    private let timeout: TimeAmount

    init(
        _ settings: PushSettings.Gateway, tls: TLSContext, group: EventLoopGroup, connectTimeout: TimeAmount,
        timeout: TimeAmount
    ) throws {
        (pool, path) = try HTTP1Pool.forURL(settings.url, tls: tls, group: group, connectTimeout: connectTimeout)
        authorization = settings.authorization
        self.timeout = timeout
    }

    static func body(_ push: QueuedPush, _ n: PushNotification) throws -> [UInt8] {
        let notification = GatewayRequest.Notification(
            data: n.data, badge: n.badge, silent: n.isSilent, message_id: n.messageID,
            conversation_id: n.conversationID,
            sender_id: n.sender, alert: n.alert, title: n.title, sound: n.sound, category: n.category)
        let request = GatewayRequest(
            token: push.token.tokenText, user_id: push.user.rawValue, device_id: push.device,
            expires_at: ServerAPIJSON.date(millisecondsSince1970: push.expiresAt.millisecondsSince1970),
            notification: notification)
        return Array(try ServerAPIJSON.encode(request))
    }

    func send(_ push: QueuedPush, _ notification: PushNotification) async -> PushOutcome {
        do {
            var headers: HeaderFields = [("content-type", "application/json"), ("user-agent", "lamina-push")]
            if let authorization { headers.append("authorization", authorization) }
            let response = try await pool.request(
                method: .POST, path: path, headers: headers, body: ByteBuffer(bytes: try Self.body(push, notification)),
                timeout: timeout)
            if response.status == 404 || response.status == 410 {
                return .unregistered("the gateway answered \(response.status)")
            }
            return .http(status: response.status, headers: response.headers, provider: "the gateway")
        } catch {
            return .retry("\(error)", after: nil)
        }
    }

    func shutdown() async { await pool.close() }
}
