import Atomics
import NIOConcurrencyHelpers
import Prometheus

/// Presence's counters on `/metrics` (SPEC §6.6), copied from the engine at each render:
/// visible changes fanned out, updates addressed to online followers, users online here, and
/// the batched last-seen writes (the only storage presence does).
final class PresenceMetrics: Sendable {
    private let engine: NodeEngine
    private let visibleChanges: Counter
    private let followerUpdates: Counter
    private let lastSeenTransactions: Counter
    private let lastSeenRows: Counter
    private let online: Gauge
    private let followEdges: Gauge
    /// The counters' values at the last sample (the registry's counters only go up).
    private let last = NIOLockedValueBox([Int](repeating: 0, count: 4))

    init(registry: PrometheusCollectorRegistry, engine: NodeEngine) {
        self.engine = engine
        func counter(_ name: String, _ help: String) -> Counter {
            registry.makeCounter(
                descriptor: .init(namespace: "lamina", metricName: name, unitName: "total", helpText: help))
        }
        visibleChanges = counter(
            "presence_visible_changes", "Changes of what others see of a user, fanned out to online followers here")
        followerUpdates = counter(
            "presence_follower_updates", "presence-changed updates addressed to online followers (one per follower)")
        lastSeenTransactions = counter("last_seen_transactions", "Batched writes of last-seen times")
        lastSeenRows = counter("last_seen_rows", "Last-seen times written (one per user per batch)")
        online = registry.makeGauge(
            descriptor: .init(
                namespace: "lamina", metricName: "presence_online", unitName: "users",
                helpText: "Users with a session open on this node"))
        followEdges = registry.makeGauge(
            descriptor: .init(
                namespace: "lamina", metricName: "presence_follow_edges", unitName: "count",
                helpText: "Follow edges the presence fan-out holds (online follower and followed user)"))
    }

    func sample() {
        let counts = engine.presenceCounts
        let writes = engine.lastSeenWrites
        let now = [
            counts.visibleChanges.load(ordering: .relaxed), counts.followerUpdates.load(ordering: .relaxed),
            writes.transactions, writes.rows,
        ]
        let counters = [visibleChanges, followerUpdates, lastSeenTransactions, lastSeenRows]
        last.withLockedValue { last in
            for i in now.indices where now[i] > last[i] {
                counters[i].increment(by: Int64(now[i] - last[i]))
                last[i] = now[i]
            }
        }
        let (users, edges) = engine.presenceTable.withLockedValue { ($0.onlineCount, $0.followEdgeCount) }
        online.set(Int64(users))
        followEdges.set(Int64(edges))
    }
}
