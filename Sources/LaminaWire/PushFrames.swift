import Foundation
import LaminaModel
import NIOCore

/// REGISTER_PUSH_TOKEN (0x000D), client -> node: the push token of the session's device
/// (SPEC §5.9), replacing the one it had; kind 0 removes it.
/// ```
/// +------------------+-----------+------------------------------------------------------------+
/// | requestID (uuid) | kind (u8) | kind 1 apns: token bytes(1024), topic string(255),         |
/// |                  |           |              environment (u8: 0 production, 1 sandbox)     |
/// |                  |           | kind 2 fcm, 3 gateway: token string(1024)                  |
/// |                  |           | kind 0 none: nothing                                       |
/// +------------------+-----------+------------------------------------------------------------+
/// ```
public struct RegisterPushToken: Hashable, Sendable {
    public var requestID: UUID
    /// The device's token; nil removes it.
    public var token: PushToken?

    public init(requestID: UUID, token: PushToken?) {
        self.requestID = requestID
        self.token = token
    }
}

extension RegisterPushToken {
    /// SPEC §5.9: the wire bounds of a token and a topic (a kind's own sizes are the node's check).
    static let maxTokenBytes = Limits.maxPushTokenBytes
    static let maxTopicBytes = Limits.maxPushTopicBytes

    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeUUID(requestID)
        switch token {
        case nil:
            b.writeInteger(0, as: UInt8.self)
        case .apns(let bytes, let topic, let environment)?:
            guard bytes.count <= Self.maxTokenBytes else {
                throw WireError(
                    .invalidPushToken, "a push token is at most \(Self.maxTokenBytes) bytes, this one is \(bytes.count)"
                )
            }
            b.writeInteger(PushToken.Kind.apns.rawValue, as: UInt8.self)
            b.writeLengthPrefixedBytes(bytes)
            try b.writeString(topic, max: Self.maxTopicBytes, "the APNs topic", code: .invalidPushToken)
            b.writeInteger(environment.rawValue, as: UInt8.self)
        case .fcm(let text)?, .gateway(let text)?:
            b.writeInteger(token!.kind.rawValue, as: UInt8.self)
            try b.writeString(text, max: Self.maxTokenBytes, "the push token", code: .invalidPushToken)
        }
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> RegisterPushToken {
        let id = try b.readUUID("the request id")
        let kind = try b.readU8("the push token kind")
        switch kind {
        case 0:
            return RegisterPushToken(requestID: id, token: nil)
        case PushToken.Kind.apns.rawValue:
            let length = try b.readCount(max: maxTokenBytes, "the APNs token's length", code: .invalidPushToken)
            guard let bytes = b.readBytes(length: length) else {
                throw WireError(.truncated, "the payload ends inside the APNs token")
            }
            let topic = try b.readString(max: maxTopicBytes, "the APNs topic", code: .invalidPushToken)
            let raw = try b.readU8("the APNs environment")
            guard let environment = APNsEnvironment(rawValue: raw) else {
                throw WireError(.malformed, "APNs environment \(raw) is not 0 (production) or 1 (sandbox)")
            }
            return RegisterPushToken(requestID: id, token: .apns(token: bytes, topic: topic, environment: environment))
        case PushToken.Kind.fcm.rawValue:
            return RegisterPushToken(
                requestID: id,
                token: .fcm(token: try b.readString(max: maxTokenBytes, "the FCM token", code: .invalidPushToken)))
        case PushToken.Kind.gateway.rawValue:
            return RegisterPushToken(
                requestID: id,
                token: .gateway(
                    token: try b.readString(max: maxTokenBytes, "the gateway token", code: .invalidPushToken)))
        default:
            throw WireError(.malformed, "push token kind \(kind) is not 0 (none), 1 (apns), 2 (fcm) or 3 (gateway)")
        }
    }
}
