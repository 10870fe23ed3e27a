import Foundation
import Prometheus

/// Webhook metrics on `/metrics`, labelled by webhook id: queue depth, deliveries, retries,
/// failures (events dropped on a definitive refusal) and deactivations for failing too long.
final class WebhookMetrics: Sendable {
    private let registry: PrometheusCollectorRegistry

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    private func labels(_ id: UUID) -> [(String, String)] { [("webhook", id.uuidString.lowercased())] }

    private func count(_ name: String, _ help: String, _ id: UUID) {
        registry.makeCounter(
            descriptor: .init(namespace: "lamina", metricName: name, unitName: "total", helpText: help),
            labels: labels(id)
        )
        .increment()
    }

    func queueDepth(_ id: UUID) -> Gauge {
        registry.makeGauge(
            descriptor: .init(
                namespace: "lamina", metricName: "webhook_queue_depth", unitName: "events",
                helpText: "Events queued for the webhook, not yet delivered"),
            labels: labels(id))
    }

    /// The active webhooks this node's commands queue events for (every node's, PostgreSQL).
    func subscribed(_ count: Int) {
        registry.makeGauge(
            descriptor: .init(
                namespace: "lamina", metricName: "webhook_subscriptions", unitName: "active",
                helpText: "Active webhooks this node's commands queue events for")
        )
        .set(Int64(count))
    }

    func delivered(_ id: UUID) { count("webhook_deliveries", "Events the webhook's target acknowledged (2xx)", id) }

    func retried(_ id: UUID) {
        count(
            "webhook_retries", "Failed attempts that will be retried (timeouts, connection errors, 408, 429, 5xx)", id)
    }

    func failed(_ id: UUID) {
        count(
            "webhook_failures", "Events dropped because the target refused them for good (4xx other than 408 and 429)",
            id)
    }

    func deactivated(_ id: UUID) {
        count(
            "webhook_deactivations",
            "Times the webhook was marked unhealthy and deactivated after failing for the retry period", id)
    }
}
