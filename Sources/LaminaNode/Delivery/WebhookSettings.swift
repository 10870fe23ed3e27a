import Foundation

/// The webhooks' limits, declared once (enforced where a management request enters).
public enum WebhookLimits {
    /// A secret's length in UTF-8 bytes (HMAC-SHA1 keys shorter than 16 bytes are weak).
    public static let secretBytes = 16...256
    /// The most webhooks one node holds.
    public static let maxWebhooks = 100
    /// The longest `target_url`, in bytes.
    public static let maxTargetURLBytes = 2_048
    /// The largest `config` object, in bytes of JSON.
    public static let maxConfigBytes = 4_096
    /// The largest response body a target may send (read, then ignored; the verification
    /// challenge is compared against it).
    public static let maxResponseBytes = 64 * 1_024
}

/// How the node delivers webhooks: the operator's settings (flags and the `webhooks` object
/// of the config file).
public struct WebhookSettings: Sendable, Hashable {
    /// Targets on loopback, private, link-local or unique-local addresses are refused unless
    /// this is set (a node must not be a tool to reach internal services).
    public var allowPrivateTargets = false
    /// A PEM file of CAs the targets' certificates must chain to; nil: the system's trust store.
    public var caFile: String?
    /// How long an event is retried before its webhook is marked unhealthy and deactivated.
    public var retryPeriodSeconds = 86_400
    /// The first retry's delay; each next one doubles (with jitter), up to ``maxBackoffSeconds``.
    public var initialBackoffMilliseconds = 1_000
    public var maxBackoffSeconds = 3_600
    /// Connecting (TCP and TLS) to a target.
    public var connectTimeoutSeconds = 10
    /// From a request's first byte to its response's last.
    public var responseTimeoutSeconds = 30
    /// Requests in flight to one target (`host:port`) over all its webhooks, and to each
    /// webhook: its events start in commit order, up to this many at once; a failed one is
    /// retried alone before anything later starts.
    public var maxInFlightPerTarget = 4

    public init() {}

    /// Refuses values outside their ranges, with a reason.
    public func validate() throws {
        func check(_ ok: Bool, _ reason: String) throws {
            if !ok { throw NodeServerError.configuration("webhooks: \(reason)") }
        }
        try check((1...30 * 86_400).contains(retryPeriodSeconds), "retryPeriodSeconds must be 1...2592000")
        try check(
            (1...3_600_000).contains(initialBackoffMilliseconds), "initialBackoffMilliseconds must be 1...3600000")
        try check((1...86_400).contains(maxBackoffSeconds), "maxBackoffSeconds must be 1...86400")
        try check((1...300).contains(connectTimeoutSeconds), "connectTimeoutSeconds must be 1...300")
        try check((1...300).contains(responseTimeoutSeconds), "responseTimeoutSeconds must be 1...300")
        try check((1...64).contains(maxInFlightPerTarget), "maxInFlightPerTarget must be 1...64")
        if let caFile {
            try check(FileManager.default.isReadableFile(atPath: caFile), "caFile \(caFile) cannot be read")
        }
    }
}
