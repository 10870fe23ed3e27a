/// How the node serves the Server API (Layer's Platform API) on its TLS port.
public struct ServerAPISettings: Sendable, Hashable {
    /// Serve `/apps/<app id>/…` (and offer ALPN `http/1.1` for it).
    public var enabled = true
    /// Requests per second each token may make, on average.
    public var requestsPerSecond = 200.0
    /// Requests a token may make at once above the average (the bucket's size).
    public var burst = 400.0
    /// How long a content `upload_url` or `download_url` the Server API hands out stays good.
    public var contentURLLifetimeSeconds = 3600
    /// Wrong tokens one remote address may present at once before further wrong ones are
    /// answered 429 instead of 401 (refilled at ``failedTokensPerSecond``).
    public var failedTokenBurst = 20
    /// Wrong tokens per second one remote address may present on average.
    public var failedTokensPerSecond = 1.0

    public init() {}
}
