import Foundation
import LaminaModel
import Prometheus

/// Push metrics on `/metrics`, labelled by provider (`apns`, `fcm`, `gateway`): queue depth,
/// deliveries, retries, failures (refused or expired), and tokens removed on the provider's word.
final class PushMetrics: Sendable {
    private let registry: PrometheusCollectorRegistry

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    private func labels(_ kind: PushToken.Kind) -> [(String, String)] { [("provider", kind.name)] }

    private func count(_ name: String, _ help: String, _ kind: PushToken.Kind, _ extra: [(String, String)] = []) {
        registry.makeCounter(
            descriptor: .init(namespace: "lamina", metricName: name, unitName: "total", helpText: help),
            labels: labels(kind) + extra
        ).increment()
    }

    func queueDepth(_ kind: PushToken.Kind) -> Gauge {
        registry.makeGauge(
            descriptor: .init(
                namespace: "lamina", metricName: "push_queue_depth", unitName: "pushes",
                helpText: "Pushes queued for the provider, not yet sent"),
            labels: labels(kind))
    }

    func delivered(_ kind: PushToken.Kind) { count("push_deliveries", "Pushes the provider accepted", kind) }

    func retried(_ kind: PushToken.Kind) {
        count("push_retries", "Failed attempts that will be retried (timeouts, connection errors, 429, 5xx)", kind)
    }

    /// `reason`: `refused` (the provider refused the push for good), `expired` (undelivered
    /// before its expiration), `unregistered` (the token is gone; it was removed).
    func failed(_ kind: PushToken.Kind, reason: String) {
        count(
            "push_failures", "Pushes dropped: refused for good, expired, or to a token the provider no longer knows",
            kind, [("reason", reason)])
    }

    func tokenRemoved(_ kind: PushToken.Kind) {
        count("push_tokens_removed", "Device tokens removed because the provider said they are no longer valid", kind)
    }
}
