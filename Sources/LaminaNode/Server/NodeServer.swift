import Foundation
import LaminaStore
import LaminaTransport
import LaminaWire
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Prometheus

/// A running node: its parts (``NodePart``: store, engine, content, deliveries, the sync
/// listener (TLS + HTTP/2, `POST /v1/sync`), peers, the admin listener, pruner, health log).
/// Start with ``start(configuration:group:logger:registry:)``; stop with ``shutdown()``; in a
/// `ServiceGroup`, run a ``NodeService``.
public final class NodeServer: Sendable {
    /// The request path of the client sync stream (SPEC §1).
    public static let syncPath = "/v1/sync"

    public let configuration: NodeServerConfiguration
    public let prepared: NodeBootstrap.Prepared
    public let engine: NodeEngine
    package let store: NodeStore
    /// Rich content: uploads, downloads, collection (`/v1/content/<uuid>`).
    public let content: ContentService
    /// The sync listener (its real port when configured with port 0).
    public let transport: TransportServer
    /// The admin listener, unless disabled.
    public let admin: AdminServer?
    private let logger: Logger
    private let gate: SessionGate
    private let stopped: NIOLockedValueBox<Bool>
    /// Unauthenticated sessions per connection, address and node; live bridges and sessions.
    public let admission: SessionAdmission
    /// Bytes queued for clients over every sync stream, against the node's outbound budget.
    public let outboundBudget: NodeOutboundBudget
    /// Deletes expired nonces (the engine's table) and sessions and old idempotency records on a schedule.
    public let pruner: StoragePruner
    /// The Server API's app id and tokens (nil when the Server API is disabled).
    public let serverAPICredentials: ServerAPICredentials?
    /// Logs descriptors, connections and session slots running out, and refusals.
    let healthLog: NodeHealthLog
    /// Peering (listener, dialers, links), when configured.
    public let peers: PeerService?
    /// Webhook delivery from the outbox.
    let webhooks: WebhookDelivery
    /// Push delivery from the push outbox.
    let pushes: PushDelivery

    /// `https://host:port` of the sync listener.
    public var url: String { Self.url(host: configuration.host, port: transport.port) }

    /// Starts and stops the parts.
    private let parts: NodeLifecycle

    private init(
        configuration: NodeServerConfiguration, prepared: NodeBootstrap.Prepared, parts: NodeLifecycle,
        engine: NodeEngine,
        store: NodeStore, content: ContentService, transport: TransportServer, admin: AdminServer?, logger: Logger,
        gate: SessionGate, stopped: NIOLockedValueBox<Bool>, admission: SessionAdmission,
        outboundBudget: NodeOutboundBudget,
        pruner: StoragePruner, serverAPICredentials: ServerAPICredentials?, peers: PeerService?,
        webhooks: WebhookDelivery,
        pushes: PushDelivery, healthLog: NodeHealthLog
    ) {
        self.parts = parts
        self.healthLog = healthLog
        self.webhooks = webhooks
        self.pushes = pushes
        self.peers = peers
        self.outboundBudget = outboundBudget
        self.pruner = pruner
        self.serverAPICredentials = serverAPICredentials
        self.stopped = stopped
        self.admission = admission
        self.configuration = configuration
        self.prepared = prepared
        self.engine = engine
        self.store = store
        self.content = content
        self.transport = transport
        self.admin = admin
        self.logger = logger
        self.gate = gate
    }

    /// Prepares the data directory (``NodeBootstrap``), then starts the parts in
    /// ``NodePart/startOrder``; a part that fails stops those started (the one stop path,
    /// ``NodeLifecycle``) and the error names it. Metrics go to `registry` (rendered on the
    /// admin port's `/metrics`).
    public static func start(
        configuration: NodeServerConfiguration, group: EventLoopGroup, logger: Logger,
        registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()
    ) async throws -> NodeServer {
        try configuration.validate()
        let maxConnections = try configuration.maxConnections()
        let prepared = try NodeBootstrap.prepare(configuration)
        let parts = NodeLifecycle(logger: logger)
        let store: NodeStore = try await parts.start(.store, "cannot open the store at \(prepared.storePath)") {
            let store = try NodeStore(location: prepared.storeLocation, configuration: configuration.storage)
            return (store, { Self.close(store, logger: logger) })
        }
        let engine: NodeEngine = try await parts.start(.engine, nil) {
            let engine = try NodeEngine(store: store, configuration: configuration.engineConfiguration(prepared))
            return (engine, { await engine.shutdown() })
        }
        let content: ContentService = try await parts.start(.content, "cannot prepare the content files") {
            let content = try ContentService(
                store: store, dataDirectory: prepared.dataDirectory, settings: configuration.content, logger: logger,
                arrivals: ContentArrivals { engine.contentSignal.notify() })
            return (content, { await content.shutdown() })
        }
        try await parts.step(.content, "cannot repair the content records") {
            try await content.start(sweepingOn: group.next())
        }
        let webhooks: WebhookDelivery = try await parts.start(
            .webhooks, "cannot prepare webhook delivery (TLS trust, stored webhooks)"
        ) {
            let webhooks = try WebhookDelivery(
                store: store, outbox: engine.webhooks, settings: configuration.webhooks, group: group, logger: logger,
                metrics: WebhookMetrics(registry: registry))
            try webhooks.prepare()
            return (webhooks, { await webhooks.shutdown() })
        }
        let pushes: PushDelivery = try await parts.start(.pushes, "cannot prepare push delivery") {
            let pushes = try PushDelivery(
                store: store, outbox: engine.pushes, settings: configuration.push, group: group, logger: logger,
                metrics: PushMetrics(registry: registry), webhooksCAFile: configuration.webhooks.caFile)
            pushes.prepare()
            return (pushes, { await pushes.shutdown() })
        }
        let gate = SessionGate(limit: configuration.maxSessions)
        let admission = SessionAdmission(limits: configuration.resources, maxSessions: configuration.maxSessions)
        let outboundBudget = NodeOutboundBudget(
            limit: configuration.resources.nodeOutboundBudgetBytes,
            minimumShare: configuration.resources.minimumOutboundShareBytes)
        var loadedCredentials: ServerAPICredentials? = try await parts.step(
            .transport, "cannot prepare the Server API credentials"
        ) {
            try configuration.serverAPI.enabled ? ServerAPICredentials.loadOrCreate(in: prepared.dataDirectory) : nil
        }
        // Several nodes on one PostgreSQL store: one app id, every node's tokens good everywhere.
        var shared: SharedServerAPICredentials?
        if var loaded = loadedCredentials {
            shared = try await parts.step(.transport, "cannot share the Server API credentials") {
                try await SharedServerAPICredentials.start(&loaded, store: store, node: prepared.nodeID.rawValue)
            }
            loadedCredentials = loaded
        }
        let credentials = loadedCredentials
        let sharedCredentials = shared  // a constant: the pruner's stop closure takes it
        // The Server API's URLs start with the public URL, known once the listener's port is.
        let origin = NIOLockedValueBox(configuration.publicURL ?? "https://localhost")
        let router = Self.router(
            configuration: configuration, engine: engine, content: content, webhooks: webhooks,
            credentials: credentials,
            devIdentity: configuration.devIdentityProvider ? prepared.devIdentityProvider : nil,
            gate: gate,
            admission: admission, budget: outboundBudget,
            metrics: ServerMetrics(factory: PrometheusMetricsFactory(registry: registry)),
            logger: logger, origin: origin, sharedCredentials: sharedCredentials)
        let transport: TransportServer = try await parts.start(
            .transport, "cannot listen on \(configuration.host):\(configuration.port)"
        ) {
            let transport = try await Self.listen(
                configuration, prepared, router: router, group: group, maxConnections: maxConnections, engine: engine)
            return (transport, { await Self.stop(transport, logger: logger) })
        }
        var peers: PeerService?
        if configuration.peers.enabled {
            let started: PeerService = try await parts.start(
                .peers, "cannot start peering on \(configuration.peers.host):\(configuration.peers.port)"
            ) {
                let peers = try await PeerService.start(
                    engine: engine, content: content, settings: configuration.peers, group: group, logger: logger)
                return (peers, { await peers.shutdown() })
            }
            peers = started
        }
        let stopped = NIOLockedValueBox(false)
        var admin: AdminServer?
        if configuration.adminPort >= 0 {
            let started: AdminServer = try await parts.start(
                .admin, "cannot listen (admin) on \(configuration.adminHost):\(configuration.adminPort)"
            ) {
                let admin = try await Self.startAdmin(
                    configuration, group: group, registry: registry, store: store, engine: engine, transport: transport,
                    peers: peers,
                    gate: gate, maxConnections: maxConnections, budget: outboundBudget, stopped: stopped)
                return (admin, { await admin.shutdown() })
            }
            admin = started
        }
        let url = Self.url(host: configuration.host, port: transport.port)
        let publicURL = Self.publicURL(configuration, port: transport.port)
        origin.withLockedValue { $0 = publicURL }
        try await parts.step(.webhooks, "cannot start webhook delivery") {
            try await webhooks.start(base: "\(publicURL)/apps/\(credentials?.appID ?? "none")")
        }
        try await parts.step(.pushes, "cannot start push delivery") { try await pushes.start() }
        let pruner: StoragePruner = try await parts.start(.pruner, nil) {
            let pruner = StoragePruner(store: store, nonces: engine.nonces, logger: logger)
            pruner.start(every: .seconds(Int64(configuration.resources.pruneIntervalSeconds)))
            return (
                pruner,
                {
                    sharedCredentials?.stop()
                    await pruner.stop()
                }
            )
        }
        let healthLog: NodeHealthLog = try await parts.start(.healthLog, nil) {
            let healthLog = Self.healthLog(
                configuration, transport: transport, gate: gate, maxConnections: maxConnections, logger: logger)
            healthLog.start()
            return (healthLog, { healthLog.stop() })
        }
        logger.info(
            "node started",
            metadata: [
                "url": "\(url)", "node": "\(prepared.nodeID)", "admin": "\(admin.map { "\($0.port)" } ?? "off")",
                "maxConnections": "\(maxConnections)",
            ])
        return NodeServer(
            configuration: configuration, prepared: prepared, parts: parts, engine: engine, store: store,
            content: content,
            transport: transport, admin: admin, logger: logger, gate: gate, stopped: stopped, admission: admission,
            outboundBudget: outboundBudget, pruner: pruner, serverAPICredentials: credentials, peers: peers,
            webhooks: webhooks,
            pushes: pushes, healthLog: healthLog)
    }

    /// Sessions currently open.
    public var sessionCount: Int { gate.count }

    /// The parts started and not yet stopped.
    public var runningParts: Set<NodePart> { parts.running }

    /// Graceful stop: refuse new sessions, then stop the parts in ``NodePart/stopOrder``
    /// (GOAWAY every connection and let streams drain (bounded), let the engine finish
    /// in-flight commands, close the store, stop the admin listener). Idempotent.
    public func shutdown() async {
        let already = stopped.withLockedValue { value -> Bool in
            defer { value = true }
            return value
        }
        guard !already else { return }
        logger.info("shutting down: GOAWAY, draining")
        gate.close()
        await parts.stopAll()
        logger.info("stopped")
    }
}

/// Counts open sessions against the configured maximum; closed during shutdown.
final class SessionGate: Sendable {
    private let state: NIOLockedValueBox<(count: Int, closed: Bool, refused: Int)>
    private let limit: Int

    init(limit: Int) {
        self.limit = limit
        self.state = NIOLockedValueBox((0, false, 0))
    }

    var count: Int { state.withLockedValue { $0.count } }
    /// Sessions refused so far because every slot was taken.
    var refused: Int { state.withLockedValue { $0.refused } }

    func admit() -> Bool {
        state.withLockedValue { s in
            guard !s.closed else { return false }
            guard s.count < limit else {
                s.refused += 1
                return false
            }
            s.count += 1
            return true
        }
    }

    func release() { state.withLockedValue { $0.count -= 1 } }
    func close() { state.withLockedValue { $0.closed = true } }
}

/// A session that gives its slot back to the gate when the transport closes.
final class GatedSession: SyncSessionEndpoint {
    private let session: NodeSession
    private let gate: SessionGate
    private let released = NIOLockedValueBox(false)

    init(_ session: NodeSession, gate: SessionGate) {
        self.session = session
        self.gate = gate
    }

    func receive(_ frame: Frame) { session.receive(frame) }
    func receiveFailed(_ error: WireError) { session.receiveFailed(error) }
    func closed() {
        let first = released.withLockedValue { value -> Bool in
            defer { value = true }
            return !value
        }
        if first { gate.release() }
        session.closed()
    }
}
