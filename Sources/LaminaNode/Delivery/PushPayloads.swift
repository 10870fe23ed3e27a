import Foundation

// The JSON the push providers are sent, as `Codable` types (written with
// `ServerAPIJSON.encode`: keys sorted, slashes not escaped). Properties are named as their
// JSON keys.

/// A key chosen at run time (an app's custom push data at the top level of an APNs payload).
struct DynamicKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ key: String) { stringValue = key }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// An APNs request body: `aps`, `layer` (the message's ids) and the custom data at the top
/// level (its keys `aps` and `layer` are left out).
struct APNsPayload: Encodable {
    struct Alert: Encodable {
        var title: String?
        var body: String?
    }

    struct APS: Encodable {
        var badge: Int
        var alert: Alert?
        var sound: String?
        var category: String?
        /// 1 for a silent push.
        var contentAvailable: Int?

        enum CodingKeys: String, CodingKey {
            case badge, alert, sound, category
            case contentAvailable = "content-available"
        }
    }

    struct Layer: Encodable {
        var message_identifier: String
        var conversation_identifier: String?
        var sender_id: String?
    }

    var aps: APS
    var layer: Layer
    var custom: [String: String]

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: DynamicKey.self)
        for (key, value) in custom where key != "aps" && key != "layer" { try c.encode(value, forKey: DynamicKey(key)) }
        try c.encode(aps, forKey: DynamicKey("aps"))
        try c.encode(layer, forKey: DynamicKey("layer"))
    }
}

/// An FCM HTTP v1 `messages:send` body.
struct FCMRequest: Encodable {
    struct Notification: Encodable {
        var title: String?
        var body: String?
    }

    struct AndroidNotification: Encodable {
        var notification_count: Int
        var sound: String?
        var click_action: String?
    }

    struct Android: Encodable {
        var collapse_key: String
        var ttl: String
        var priority: String
        var notification: AndroidNotification?
    }

    struct APNs: Encodable {
        struct Payload: Encodable { var aps: APNsPayload.APS }
        var payload: Payload
    }

    struct Message: Encodable {
        var token: String
        var data: [String: String]
        var notification: Notification?
        var android: Android
        var apns: APNs
    }

    var message: Message
}

/// A push gateway's request body.
struct GatewayRequest: Encodable {
    struct Notification: Encodable {
        var data: [String: String]
        var badge: Int
        var silent: Bool
        var message_id: String
        var conversation_id: String?
        var sender_id: String?
        var alert: String?
        var title: String?
        var sound: String?
        var category: String?
    }

    var token: String
    var provider = "gateway"
    var user_id: String
    var device_id: String
    var expires_at: String
    var notification: Notification
}

/// A JWT header.
struct JWTHeader: Encodable {
    var alg: String
    var kid: String?
    var typ: String?
}

/// An APNs provider token's claims.
struct APNsClaims: Encodable {
    var iss: String
    var iat: Int
}

/// An FCM service account's assertion claims.
struct FCMAssertionClaims: Encodable {
    var iss: String
    var scope: String
    var aud: String
    var iat: Int
    var exp: Int
}
