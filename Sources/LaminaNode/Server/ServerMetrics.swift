import Metrics

/// The node server's metrics (swift-metrics), created from an explicit factory so several
/// nodes can live in one process (tests) without the global bootstrap.
public struct ServerMetrics: Sendable {
    public let sessionsOpened: Counter
    public let sessionsRefused: Counter
    public let sessionsActive: Meter
    public let framesIn: Counter
    public let bytesIn: Counter
    public let bytesOut: Counter
    public let decodeErrors: Counter
    public let slowConsumers: Counter
    public let idleTimeouts: Counter
    public let inboundPauses: Counter
    public let authenticationTimeouts: Counter
    public let clientErrors: Counter

    public init(factory: MetricsFactory) {
        sessionsOpened = Counter(label: "lamina_sessions_opened_total", factory: factory)
        sessionsRefused = Counter(label: "lamina_sessions_refused_total", factory: factory)
        sessionsActive = Meter(label: "lamina_sessions_active", factory: factory)
        framesIn = Counter(label: "lamina_frames_in_total", factory: factory)
        bytesIn = Counter(label: "lamina_sync_bytes_in_total", factory: factory)
        bytesOut = Counter(label: "lamina_sync_bytes_out_total", factory: factory)
        decodeErrors = Counter(label: "lamina_decode_errors_total", factory: factory)
        slowConsumers = Counter(label: "lamina_slow_consumer_disconnects_total", factory: factory)
        idleTimeouts = Counter(label: "lamina_idle_timeouts_total", factory: factory)
        inboundPauses = Counter(label: "lamina_inbound_pauses_total", factory: factory)
        authenticationTimeouts = Counter(label: "lamina_authentication_timeouts_total", factory: factory)
        clientErrors = Counter(label: "lamina_client_error_frames_total", factory: factory)
    }
}
