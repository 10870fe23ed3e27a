import LaminaModel
import NIOConcurrencyHelpers
import Prometheus

/// The peering figures on `/metrics`, sampled when it is rendered: links up, per peer the
/// operations it has not acknowledged and for how long it has lacked some, per origin the
/// counter this node holds (its version vector); operations parked until their conversation
/// arrives, and those given up (``ParkingLimits``); rich content of replicated messages still to
/// fetch, and fetched so far.
final class PeerMetrics: Sendable {
    private let registry: PrometheusCollectorRegistry
    private let engine: NodeEngine
    private let peers: PeerService
    private let links: Gauge
    private let parked: Gauge
    private let abandoned: Gauge
    private let contentPending: Gauge
    private let contentFetched: Gauge
    /// Gauges by label value, made on first sight (peers and origins are few).
    private let labelled = NIOLockedValueBox([String: Gauge]())

    init(registry: PrometheusCollectorRegistry, engine: NodeEngine, peers: PeerService) {
        self.registry = registry
        self.engine = engine
        self.peers = peers
        links = registry.makeGauge(descriptor: Self.named("lamina_peer_links", "Peer sessions up"))
        parked = registry.makeGauge(
            descriptor: Self.named(
                "lamina_replication_parked_operations",
                "Replicated operations waiting for the creation of their conversation"))
        abandoned = registry.makeGauge(
            descriptor: Self.named(
                "lamina_replication_parked_abandoned",
                "Parked operations given up since the start (over the parking bounds or parked too long)"))
        contentPending = registry.makeGauge(
            descriptor: Self.named(
                "lamina_peer_content_pending",
                "Rich content of replicated messages this node still fetches (up to 1000 counted)"))
        contentFetched = registry.makeGauge(
            descriptor: Self.named("lamina_peer_content_fetched", "Rich content fetched from peers since the start"))
    }

    /// A gauge called exactly `name` (Prometheus drops the empty unit from the name).
    private static func named(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    private func gauge(_ name: String, _ label: String, _ value: String, help: String) -> Gauge {
        labelled.withLockedValue { gauges in
            let key = "\(name){\(label)=\(value)}"
            if let gauge = gauges[key] { return gauge }
            let gauge = registry.makeGauge(descriptor: Self.named(name, help), labels: [(label, value)])
            gauges[key] = gauge
            return gauge
        }
    }

    /// Copies the current values into the registry.
    func sample() async {
        let lags = peers.lags
        links.set(Int64(lags.count))
        for (node, lag) in lags {
            let peer = String(node.rawValue, radix: 16)
            gauge(
                "lamina_peer_lag_operations", "peer", peer,
                help: "Operations this node holds that the peer has not acknowledged"
            )
            .set(Int64(clamping: lag.operations))
            gauge(
                "lamina_peer_lag_seconds", "peer", peer,
                help: "How long the peer has lacked operations this node holds (0: caught up)"
            )
            .set(lag.seconds)
        }
        contentFetched.set(Int64(peers.contentFetched))
        abandoned.set(Int64(engine.abandonedParkedOperations))
        if let (waiting, pending) = try? await engine.store.read({ r in
            (try r.parkedOperationCount(), try r.contentToFetch(limit: 1000).count)
        }) {
            parked.set(Int64(waiting))
            contentPending.set(Int64(pending))
        }
        if let vector = try? await engine.versionVector() {
            for (origin, counter) in vector.counters {
                gauge(
                    "lamina_replication_counter", "origin", String(origin.rawValue, radix: 16),
                    help: "The highest operation counter of each origin this node holds (its version vector)"
                )
                .set(Int64(clamping: counter))
            }
        }
    }
}
