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

/// A running node: store, engine, the sync listener (TLS + HTTP/2, `POST /v1/sync`) and the
/// admin listener. Start with ``start(configuration:group:logger:registry:)``; stop with
/// ``shutdown()``.
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
    public var url: String {
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return "https://\(host):\(transport.port)"
    }

    private init(
        configuration: NodeServerConfiguration, prepared: NodeBootstrap.Prepared, engine: NodeEngine, store: NodeStore,
        content: ContentService, transport: TransportServer, admin: AdminServer?, logger: Logger, gate: SessionGate, stopped: NIOLockedValueBox<Bool>,
        admission: SessionAdmission, outboundBudget: NodeOutboundBudget, pruner: StoragePruner,
        serverAPICredentials: ServerAPICredentials?, peers: PeerService?, webhooks: WebhookDelivery, pushes: PushDelivery,
        healthLog: NodeHealthLog
    ) {
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

    /// Prepares the data directory (``NodeBootstrap``), opens the store, starts the engine and
    /// both listeners. Metrics go to `registry` (rendered on the admin port's `/metrics`).
    public static func start(
        configuration: NodeServerConfiguration, group: EventLoopGroup, logger: Logger,
        registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()
    ) async throws -> NodeServer {
        try configuration.validate()
        let softLimit = NodeResourceLimits.softFileDescriptorLimit()
        guard let maxConnections = configuration.resources.effectiveMaxConnections(softLimit: softLimit) else {
            throw NodeServerError.startup(
                "the file-descriptor limit (\(softLimit)) leaves no room for connections after the reserve of \(configuration.resources.fileDescriptorReserve)")
        }
        let prepared = try NodeBootstrap.prepare(configuration)
        let store: NodeStore
        do { store = try NodeStore(location: prepared.storeLocation, configuration: configuration.storage) } catch {
            throw NodeServerError.startup("cannot open the store at \(prepared.storePath): \(error)")
        }
        var engineConfiguration = NodeEngineConfiguration(nodeID: prepared.nodeID, identityProviders: prepared.identityProviders)
        engineConfiguration.maxFrameSize = min(configuration.limits.maxFrameSize, WireLimits.protocolMaxFrameSize)
        engineConfiguration.commandBudget = configuration.resources.commandBudget
        engineConfiguration.nonces = configuration.resources.nonces
        engineConfiguration.cluster = configuration.peers.cluster
        let engine = try NodeEngine(store: store, configuration: engineConfiguration)
        let content: ContentService
        do {
            content = try ContentService(
                store: store, dataDirectory: prepared.dataDirectory, settings: configuration.content, logger: logger,
                arrivals: ContentArrivals { engine.contentSignal.notify() })
        } catch {
            await engine.shutdown()
            try? store.close()
            throw NodeServerError.startup("cannot prepare the content files: \(error)")
        }
        do { try await content.start(sweepingOn: group.next()) } catch {
            await content.shutdown()
            await engine.shutdown()
            try? store.close()
            throw NodeServerError.startup("cannot repair the content records: \(error)")
        }
        let metrics = ServerMetrics(factory: PrometheusMetricsFactory(registry: registry))
        let webhooks: WebhookDelivery
        do {
            webhooks = try WebhookDelivery(
                store: store, outbox: engine.webhooks, settings: configuration.webhooks, group: group, logger: logger,
                metrics: WebhookMetrics(registry: registry))
            try webhooks.prepare()
        } catch {
            await content.shutdown()
            await engine.shutdown()
            try? store.close()
            throw NodeServerError.startup("cannot prepare webhook delivery (TLS trust, stored webhooks): \(error)")
        }
        let pushes: PushDelivery
        do {
            pushes = try PushDelivery(
                store: store, outbox: engine.pushes, settings: configuration.push, group: group, logger: logger,
                metrics: PushMetrics(registry: registry))
            pushes.prepare()
        } catch {
            await content.shutdown()
            await engine.shutdown()
            try? store.close()
            throw NodeServerError.startup("cannot prepare push delivery: \(error)")
        }
        let gate = SessionGate(limit: configuration.maxSessions)
        let admission = SessionAdmission(limits: configuration.resources, maxSessions: configuration.maxSessions)
        let outboundBudget = NodeOutboundBudget(
            limit: configuration.resources.nodeOutboundBudgetBytes, minimumShare: configuration.resources.minimumOutboundShareBytes)

        var router = TransportRouter()
        router.add(
            syncPath,
            SyncStreamBridge.handler(
                limits: configuration.limits, metrics: metrics, logger: logger, admission: admission, budget: outboundBudget
            ) { outbound in
                guard gate.admit() else { return nil }
                let session = engine.openSession(outbound: outbound)
                admission.track(session)
                return GatedSession(session, gate: gate)
            })
        router.add(ContentEndpoint.routePattern, ContentEndpoint.handler(service: content))
        var serverAPICredentials: ServerAPICredentials?
        if configuration.serverAPI.enabled {
            do {
                let credentials = try ServerAPICredentials.loadOrCreate(in: prepared.dataDirectory)
                serverAPICredentials = credentials
                let api = ServerAPI(engine: engine, credentials: credentials, settings: configuration.serverAPI, webhooks: webhooks, content: content)
                router.add(ServerAPI.routePattern, maxBodyBytes: ServerAPILimits.maxBodyBytes) { await api.handle($0) }
                // Uploads to a content's upload_url take chunks larger than a JSON body.
                router.add(ServerAPI.contentRoutePattern(appID: credentials.appID), maxBodyBytes: ServerAPILimits.maxUploadChunkBytes) {
                    await api.handle($0)
                }
            } catch {
                await content.shutdown()
                await engine.shutdown()
                try? store.close()
                throw NodeServerError.startup("cannot prepare the Server API credentials: \(error)")
            }
        }
        var settings = HTTP2Settings()
        settings.maxConcurrentStreams = configuration.maxStreamsPerConnection
        settings.drainTimeout = .seconds(Int64(configuration.drainTimeoutSeconds))
        settings.idleConnectionTimeout = .seconds(Int64(configuration.resources.idleConnectionTimeoutSeconds))
        settings.stalledWriteTimeout = .seconds(Int64(configuration.resources.stalledConnectionTimeoutSeconds))
        settings.liveness = HTTP2Liveness(
            pingAfterQuiet: .seconds(Int64(configuration.resources.clientPingAfterQuietSeconds)),
            ackDeadline: .seconds(Int64(configuration.resources.clientPingDeadlineSeconds)))
        settings.initialStreamWindow = Int32(configuration.resources.initialStreamWindowBytes)
        settings.openedStreamWindow = Int32(configuration.resources.streamWindowBytes)
        settings.maxUnproductiveFramesPerSecond = configuration.resources.maxUnproductiveFramesPerSecond

        let transport: TransportServer
        do {
            var tlsConfiguration = TLSConfiguration.server(
                certificateChainFile: prepared.certificatePath, privateKeyFile: prepared.privateKeyPath)
            // HTTP/1.1 serves the Server API; the sync stream and content stay HTTP/2 (505).
            tlsConfiguration.offersHTTP1 = configuration.serverAPI.enabled
            let tls = try TLSContext(tlsConfiguration)
            transport = try await TransportServer.start(
                host: configuration.host, port: configuration.port, tls: tls, router: router, settings: settings,
                group: group, maxConnections: maxConnections,
                http1: configuration.serverAPI.enabled ? HTTP1Settings() : nil,
                connectionClosed: { [nonces = engine.nonces] in nonces.connectionClosed($0) })
        } catch {
            await content.shutdown()
            await engine.shutdown()
            try? store.close()
            throw NodeServerError.startup("cannot listen on \(configuration.host):\(configuration.port): \(error)")
        }

        var peers: PeerService?
        if configuration.peers.enabled {
            do {
                peers = try await PeerService.start(engine: engine, content: content, settings: configuration.peers, group: group, logger: logger)
            } catch {
                await peers?.shutdown()
                try? await transport.shutdown()
                await content.shutdown()
                await engine.shutdown()
                try? store.close()
                throw NodeServerError.startup("cannot start peering on \(configuration.peers.host):\(configuration.peers.port): \(error)")
            }
        }
        var admin: AdminServer?
        let stoppedBox = NIOLockedValueBox(false)
        let health = NodeHealth(
            store: store, sessions: { gate.count }, maxSessions: configuration.maxSessions,
            connections: { transport.connectionCount }, maxConnections: maxConnections,
            stopping: { stoppedBox.withLockedValue { $0 } })
        let healthLog = NodeHealthLog(logger: logger) { [maxSessions = configuration.maxSessions] in
            let limit = NodeResourceLimits.softFileDescriptorLimit()
            let counts = transport.counts
            return NodeHealthLog.Counts(
                descriptors: NodeHealth.openDescriptors().map { ($0, limit) }, connections: (transport.connectionCount, maxConnections),
                sessions: (gate.count, maxSessions), refusedConnections: counts.refused, failedAccepts: counts.acceptFailed,
                refusedSessions: gate.refused)
        }
        let peerMetrics = peers.map { PeerMetrics(registry: registry, engine: engine, peers: $0) }
        let sampler = NodeMetricsSampler(registry: registry, store: store, transport: transport, budget: outboundBudget)
        if configuration.adminPort >= 0 {
            do {
                admin = try await AdminServer.start(
                    host: configuration.adminHost, port: configuration.adminPort, group: group,
                    metrics: { [peerMetrics] in
                        sampler.sample()
                        await peerMetrics?.sample()
                        return registry.emitToString()
                    },
                    readiness: { await health.readiness() },
                    replication: { [peers] in
                        do {
                            return try await engine.convergenceDigest().json(node: engine.configuration.nodeID, peers: peers?.links ?? [:])
                        } catch {
                            return "{\"error\": \"cannot read the store\"}\n"
                        }
                    })
            } catch {
                try? await transport.shutdown()
                await content.shutdown()
                await engine.shutdown()
                try? store.close()
                throw NodeServerError.startup(
                    "cannot listen (admin) on \(configuration.adminHost):\(configuration.adminPort): \(error)")
            }
        }
        let server = NodeServer(
            configuration: configuration, prepared: prepared, engine: engine, store: store, content: content,
            transport: transport, admin: admin, logger: logger, gate: gate, stopped: stoppedBox, admission: admission,
            outboundBudget: outboundBudget, pruner: StoragePruner(store: store, nonces: engine.nonces, logger: logger), serverAPICredentials: serverAPICredentials,
            peers: peers, webhooks: webhooks, pushes: pushes, healthLog: healthLog)
        do {
            try await webhooks.start(base: "\(server.url)/apps/\(serverAPICredentials?.appID ?? "none")")
        } catch {
            await server.shutdown()
            throw NodeServerError.startup("cannot start webhook delivery: \(error)")
        }
        do { try await pushes.start() } catch {
            await server.shutdown()
            throw NodeServerError.startup("cannot start push delivery: \(error)")
        }
        server.pruner.start(every: .seconds(Int64(configuration.resources.pruneIntervalSeconds)))
        healthLog.start()
        logger.info(
            "node started",
            metadata: [
                "url": "\(server.url)", "node": "\(prepared.nodeID)", "admin": "\(admin.map { "\($0.port)" } ?? "off")",
                "maxConnections": "\(maxConnections)",
            ])
        return server
    }

    /// Sessions currently open.
    public var sessionCount: Int { gate.count }

    /// Graceful stop: refuse new sessions, GOAWAY every connection and let streams drain
    /// (bounded), let the engine finish in-flight commands, close the store, stop the admin
    /// listener. Idempotent.
    public func shutdown() async {
        let already = stopped.withLockedValue { value -> Bool in
            defer { value = true }
            return value
        }
        guard !already else { return }
        logger.info("shutting down: GOAWAY, draining")
        gate.close()
        healthLog.stop()
        await peers?.shutdown()
        await pruner.stop()
        await engine.shutdown()
        await webhooks.shutdown()
        await pushes.shutdown()
        do { try await transport.shutdown() } catch {
            logger.warning("transport shutdown", metadata: ["error": "\(error)"])
        }
        await content.shutdown()
        do { try store.close() } catch {
            logger.error("closing the store failed", metadata: ["error": "\(error)"])
        }
        await admin?.shutdown()
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
