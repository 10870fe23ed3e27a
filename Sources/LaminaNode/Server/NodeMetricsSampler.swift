import LaminaTransport
import NIOConcurrencyHelpers
import Prometheus

/// Metrics read from counters the transport and the store keep themselves (connections,
/// storage errors, descriptors), copied into the registry each time `/metrics` is rendered.
final class NodeMetricsSampler: Sendable {
    private let store: NodeStore
    private let transport: TransportServer
    private let budget: NodeOutboundBudget
    private let outboundQueued: Gauge
    private let outboundBudgetResets: Counter
    private let connectionsOpen: Gauge
    private let descriptorsOpen: Gauge
    private let connectionsRefused: Counter
    private let connectionsClosedIdle: Counter
    private let connectionsClosedForFlood: Counter
    private let connectionsClosedStalled: Counter
    private let acceptsFailed: Counter
    private let storageErrors: Counter
    private let storageCommitFailures: Counter
    private let storageCommandsRefused: Counter
    /// The counters' values at the last sample (the registry's counters only go up).
    private let last = NIOLockedValueBox([Int](repeating: 0, count: 9))

    init(registry: PrometheusCollectorRegistry, store: NodeStore, transport: TransportServer, budget: NodeOutboundBudget) {
        self.store = store
        self.transport = transport
        self.budget = budget
        outboundQueued = registry.makeGauge(descriptor: .init(namespace: "lamina", metricName: "outbound_queued", unitName: "bytes", helpText: "Bytes queued for clients over every sync stream (the node's outbound budget counts these)"))
        outboundBudgetResets = registry.makeCounter(descriptor: .init(namespace: "lamina", metricName: "outbound_budget_resets", unitName: "total", helpText: "Streams reset for holding more than their share while the node was over its outbound budget"))
        connectionsOpen = registry.makeGauge(descriptor: .init(namespace: "lamina", metricName: "connections", unitName: "open", helpText: "TLS connections open (handshaking included)"))
        descriptorsOpen = registry.makeGauge(descriptor: .init(namespace: "lamina", metricName: "file_descriptors", unitName: "open", helpText: "File descriptors the node has open"))
        connectionsRefused = registry.makeCounter(descriptor: .init(namespace: "lamina", metricName: "connections_refused", unitName: "total", helpText: "Connections closed at once because maxConnections were open"))
        connectionsClosedIdle = registry.makeCounter(descriptor: .init(namespace: "lamina", metricName: "connections_closed_idle", unitName: "total", helpText: "Connections closed after the idle timeout without a stream"))
        connectionsClosedForFlood = registry.makeCounter(descriptor: .init(namespace: "lamina", metricName: "connections_closed_flood", unitName: "total", helpText: "Connections ended with GOAWAY ENHANCE_YOUR_CALM for a frame flood"))
        connectionsClosedStalled = registry.makeCounter(descriptor: .init(namespace: "lamina", metricName: "connections_closed_stalled", unitName: "total", helpText: "Connections closed because the client read nothing for the stalled-connection timeout"))
        acceptsFailed = registry.makeCounter(descriptor: .init(namespace: "lamina", metricName: "connections_accept_failed", unitName: "total", helpText: "Accepts that failed (no file descriptor left or another socket error), each also logged"))
        storageErrors = registry.makeCounter(descriptor: .init(namespace: "lamina", metricName: "storage_errors", unitName: "total", helpText: "Errors SQLite reported (disk full, I/O, damage), each also logged"))
        storageCommitFailures = registry.makeCounter(descriptor: .init(namespace: "lamina", metricName: "storage_commit_failures", unitName: "total", helpText: "Group commits whose transaction failed"))
        storageCommandsRefused = registry.makeCounter(descriptor: .init(namespace: "lamina", metricName: "storage_commands_refused", unitName: "total", helpText: "Commands refused because the write queue was full"))
    }

    /// Copies the current values into the registry.
    func sample() {
        let counts = transport.counts
        let storage = store.writerStatistics
        let now = [counts.refused, counts.closedIdle, counts.closedForFlood, counts.closedStalled,
                   storage.databaseErrors, storage.failedCommits, storage.refusedCommands, budget.resets, counts.acceptFailed]
        let counters = [connectionsRefused, connectionsClosedIdle, connectionsClosedForFlood, connectionsClosedStalled,
                        storageErrors, storageCommitFailures, storageCommandsRefused, outboundBudgetResets, acceptsFailed]
        last.withLockedValue { last in
            for i in now.indices where now[i] > last[i] {
                counters[i].increment(by: Int64(now[i] - last[i]))
                last[i] = now[i]
            }
        }
        connectionsOpen.set(Int64(transport.connectionCount))
        outboundQueued.set(Int64(budget.total))
        if let open = NodeHealth.openDescriptors() { descriptorsOpen.set(Int64(open)) }
    }
}
