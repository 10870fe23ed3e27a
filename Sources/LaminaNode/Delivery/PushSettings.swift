import Foundation
import LaminaModel

/// How the node delivers push notifications: the providers it is configured for (flags and
/// the `push` object of the config file). A device may register a token only for a provider
/// configured here. Credentials are parsed at start-up; one that does not parse stops the start
/// with the reason.
public struct PushSettings: Sendable, Hashable {
    /// APNs provider API (token-based authentication).
    public struct APNs: Sendable, Hashable, Decodable {
        /// The team id (the JWT's `iss`).
        public var teamID: String
        /// The signing key's id (the JWT's `kid`).
        public var keyID: String
        /// The `.p8` file: the team's P-256 private key (PEM).
        public var keyFile: String
        /// Where production tokens' pushes go (`https://host[:port]`).
        public var productionURL: String = "https://api.push.apple.com"
        /// Where sandbox tokens' pushes go.
        public var sandboxURL: String = "https://api.sandbox.push.apple.com"

        public init(teamID: String, keyID: String, keyFile: String) {
            self.teamID = teamID
            self.keyID = keyID
            self.keyFile = keyFile
        }

        enum CodingKeys: String, CodingKey { case teamID, keyID, keyFile, productionURL, sandboxURL }

        public init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            teamID = try c.decode(String.self, forKey: .teamID)
            keyID = try c.decode(String.self, forKey: .keyID)
            keyFile = try c.decode(String.self, forKey: .keyFile)
            if let v = try c.decodeIfPresent(String.self, forKey: .productionURL) { productionURL = v }
            if let v = try c.decodeIfPresent(String.self, forKey: .sandboxURL) { sandboxURL = v }
        }
    }

    /// FCM HTTP v1 with a service account.
    public struct FCM: Sendable, Hashable, Decodable {
        /// The service account's JSON key file (`client_email`, `private_key`, `token_uri`, `project_id`).
        public var serviceAccountFile: String
        /// The send endpoint; default `https://fcm.googleapis.com/v1/projects/<project_id>/messages:send`.
        public var sendURL: String?
        /// The token endpoint; default the key file's `token_uri`.
        public var tokenURL: String?

        public init(serviceAccountFile: String, sendURL: String? = nil, tokenURL: String? = nil) {
            self.serviceAccountFile = serviceAccountFile
            self.sendURL = sendURL
            self.tokenURL = tokenURL
        }
    }

    /// The operator's own gateway: one JSON POST per notification.
    public struct Gateway: Sendable, Hashable, Decodable {
        /// `https://host[:port]/path`.
        public var url: String
        /// Sent as the `authorization` header, if set (e.g. `Bearer <secret>`).
        public var authorization: String?
        /// Pushes in flight to the gateway at once (each on its own HTTP/1.1 connection);
        /// nil: ``PushSettings/defaultGatewayInFlight``.
        public var maxInFlight: Int?
        /// A PEM file of CAs the gateway's certificate chains to (an operator's gateway is often
        /// under the operator's own CA, as webhook targets are); nil: `push.caFile`, else
        /// `webhooks.caFile`, else the system's trust store (``PushSettings/gatewayTrust(webhooksCAFile:)``).
        public var caFile: String?

        public init(url: String, authorization: String? = nil, maxInFlight: Int? = nil, caFile: String? = nil) {
            self.url = url
            self.authorization = authorization
            self.maxInFlight = maxInFlight
            self.caFile = caFile
        }
    }

    public var apns: APNs?
    public var fcm: FCM?
    public var gateway: Gateway?
    /// A PEM file of CAs the providers' certificates must chain to; nil: the system's trust store.
    public var caFile: String?
    /// A push not delivered this long after its message is dropped (the notification is stale).
    public var expirationSeconds = 86_400
    /// The first retry's delay; each next one doubles (with jitter), up to ``maxBackoffSeconds``.
    public var initialBackoffMilliseconds = 1_000
    public var maxBackoffSeconds = 600
    public var connectTimeoutSeconds = 10
    public var responseTimeoutSeconds = 30
    /// Pushes in flight to APNs and to FCM at once (concurrent HTTP/2 streams). The gateway
    /// has its own bound (``Gateway/maxInFlight``): over HTTP/1.1 each is a connection.
    public var maxInFlightPerProvider = 200
    /// The gateway's bound when its configuration sets none.
    public static let defaultGatewayInFlight = 16

    /// How many pushes a provider's lane keeps in flight.
    func inFlightLimit(_ kind: PushToken.Kind) -> Int {
        kind == .gateway ? gateway?.maxInFlight ?? Self.defaultGatewayInFlight : maxInFlightPerProvider
    }
    /// HTTP/2 connections per APNs environment and to FCM: pushes are spread over them.
    public var connectionsPerProvider = 2

    public init() {}

    /// The CA file the gateway's certificate is checked against: its own, else the push
    /// providers' (`caFile`), else the one webhooks honour, else none (the system's).
    public func gatewayTrust(webhooksCAFile: String?) -> String? { gateway?.caFile ?? caFile ?? webhooksCAFile }

    /// Whether any provider is configured.
    public var isEnabled: Bool { apns != nil || fcm != nil || gateway != nil }

    /// Refuses values outside their ranges and files that cannot be read, with a reason.
    /// (Whether the credentials parse is checked when the node starts its push delivery.)
    public func validate() throws {
        func check(_ ok: Bool, _ reason: String) throws {
            if !ok { throw NodeServerError.configuration("push: \(reason)") }
        }
        try check((60...30 * 86_400).contains(expirationSeconds), "expirationSeconds must be 60...2592000")
        try check(
            (1...3_600_000).contains(initialBackoffMilliseconds), "initialBackoffMilliseconds must be 1...3600000")
        try check((1...86_400).contains(maxBackoffSeconds), "maxBackoffSeconds must be 1...86400")
        try check((1...300).contains(connectTimeoutSeconds), "connectTimeoutSeconds must be 1...300")
        try check((1...300).contains(responseTimeoutSeconds), "responseTimeoutSeconds must be 1...300")
        try check((1...1_000).contains(maxInFlightPerProvider), "maxInFlightPerProvider must be 1...1000")
        try check((1...16).contains(connectionsPerProvider), "connectionsPerProvider must be 1...16")
        let readable = { (path: String) in FileManager.default.isReadableFile(atPath: path) }
        if let caFile { try check(readable(caFile), "caFile \(caFile) cannot be read") }
        if let apns {
            try check(!apns.teamID.isEmpty && !apns.keyID.isEmpty, "apns needs teamID and keyID")
            try check(readable(apns.keyFile), "apns keyFile \(apns.keyFile) cannot be read")
        }
        if let fcm {
            try check(
                readable(fcm.serviceAccountFile), "fcm serviceAccountFile \(fcm.serviceAccountFile) cannot be read")
        }
        if let gateway {
            try check(gateway.url.hasPrefix("https://"), "gateway url must be an https:// URL")
            if let n = gateway.maxInFlight {
                try check((1...1_000).contains(n), "gateway maxInFlight must be 1...1000")
            }
            if let file = gateway.caFile { try check(readable(file), "gateway caFile \(file) cannot be read") }
        }
    }
}
