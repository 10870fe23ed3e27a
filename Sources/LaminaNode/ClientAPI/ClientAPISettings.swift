import LaminaModel

/// How the node serves Layer's Client API (REST) on its TLS port.
public struct ClientAPISettings: Sendable, Hashable {
    /// Serve `/nonces`, `/sessions`, `/conversations`, … (and offer ALPN `http/1.1` for them).
    public var enabled = true
    /// Requests per second each session may make, on average.
    public var requestsPerSecond = 50.0
    /// Requests a session may make at once above the average (the bucket's size).
    public var burst = 100.0

    public init() {}
}

/// The Client API's limits, declared once and enforced where a request enters (``ClientAPI``);
/// participant, part and metadata limits are the model's own.
public enum ClientAPILimits {
    /// The largest JSON request body, in bytes (as the Server API's).
    public static let maxBodyBytes = ServerAPILimits.maxBodyBytes
    /// The most conversations or messages one list request returns (`page_size`).
    public static let maxPageSize = 100
    /// The page size when a list request names none.
    public static let defaultPageSize = 50
    /// The most announcements a list shows (the newest).
    public static let maxAnnouncements = 100
    /// The bytes of a user id in a path or a dev identity token request (the model's limit).
    public static let maxUserIDBytes = Limits.maxUserIDBytes
    /// The Accept versions served.
    public static let versions: Set<String> = ["2.0", "3.0"]
}
