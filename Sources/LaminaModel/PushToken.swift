/// Where a device receives push notifications: the token its platform gave the app, and the
/// provider that delivers to it. One per device; the node pushes to devices without a live session.
public enum PushToken: Hashable, Sendable {
    /// Apple Push Notification service: the device token's bytes, the app's topic (bundle id)
    /// and which APNs environment issued the token.
    case apns(token: [UInt8], topic: String, environment: APNsEnvironment)
    /// Firebase Cloud Messaging (HTTP v1): the registration token.
    case fcm(token: String)
    /// The operator's own push gateway: an opaque token it understands.
    case gateway(token: String)

    /// The provider's name: `apns`, `fcm`, `gateway`.
    public var kind: Kind {
        switch self {
        case .apns: .apns
        case .fcm: .fcm
        case .gateway: .gateway
        }
    }

    /// The providers, with their numbers on the wire (SPEC §5.9).
    public enum Kind: UInt8, CaseIterable, Hashable, Sendable {
        case apns = 1
        case fcm = 2
        case gateway = 3

        public var name: String {
            switch self {
            case .apns: "apns"
            case .fcm: "fcm"
            case .gateway: "gateway"
            }
        }
    }

    /// Checks sizes and characters: an APNs token of 32…100 bytes with a topic of 1…255
    /// printable ASCII bytes; an FCM or gateway token of 1…1,024 printable ASCII bytes
    /// (`invalid-push-token` otherwise).
    public func validate() throws(ModelError) {
        switch self {
        case .apns(let token, let topic, _):
            guard Limits.apnsTokenBytes.contains(token.count) else {
                throw ModelError(
                    .invalidPushToken,
                    "an APNs device token is \(Limits.apnsTokenBytes) bytes, this one is \(token.count)")
            }
            guard (1...Limits.maxPushTopicBytes).contains(topic.utf8.count), Self.isPrintableASCII(topic) else {
                throw ModelError(
                    .invalidPushToken, "an APNs topic is 1...\(Limits.maxPushTopicBytes) printable ASCII bytes")
            }
        case .fcm(let token), .gateway(let token):
            guard (1...Limits.maxPushTokenBytes).contains(token.utf8.count), Self.isPrintableASCII(token) else {
                throw ModelError(
                    .invalidPushToken,
                    "a \(kind.name) token is 1...\(Limits.maxPushTokenBytes) printable ASCII bytes without spaces")
            }
        }
    }

    /// The token as text: lowercase hex for APNs (what its API takes), else as given.
    public var tokenText: String {
        switch self {
        case .apns(let token, _, _):
            token.map { byte in
                let digits = Array("0123456789abcdef")
                return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]])
            }.joined()
        case .fcm(let token), .gateway(let token): token
        }
    }

    private static func isPrintableASCII(_ s: String) -> Bool {
        s.utf8.allSatisfy { (0x21...0x7e).contains($0) }
    }
}

/// The APNs environment that issued a device token (a development build's tokens work only
/// with the sandbox).
public enum APNsEnvironment: UInt8, CaseIterable, Hashable, Sendable {
    case production = 0
    case sandbox = 1

    public var name: String {
        switch self {
        case .production: "production"
        case .sandbox: "sandbox"
        }
    }
}
