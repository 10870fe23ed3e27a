import LaminaLocalNode
import LaminaStore
import LaminaTransport
import LaminaWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Prometheus

/// How ``NodeServer/start(configuration:group:logger:registry:)`` makes and stops its parts.
extension NodeServer {
    /// `https://host:port`, the host bracketed when it is an IPv6 address.
    static func url(host: String, port: Int) -> String {
        "https://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }

    /// The configured ``NodeServerConfiguration/publicURL`` (without a trailing `/`), else the
    /// listener's URL (`localhost` for a wildcard host).
    static func publicURL(_ configuration: NodeServerConfiguration, port: Int) -> String {
        if let configured = configuration.publicURL {
            return configured.hasSuffix("/") ? String(configured.dropLast()) : configured
        }
        let wildcard = ["0.0.0.0", "::", "[::]", ""].contains(configuration.host)
        return url(host: wildcard ? "localhost" : configuration.host, port: port)
    }

    static func close(_ store: NodeStore, logger: Logger) {
        do { try store.close() } catch {
            logger.error("closing the store failed", metadata: ["error": "\(error)"])
        }
    }

    static func stop(_ transport: TransportServer, logger: Logger) async {
        do { try await transport.shutdown() } catch {
            logger.warning("transport shutdown", metadata: ["error": "\(error)"])
        }
    }

    /// The sync route, content, and the Server API when `credentials` are given.
    static func router(
        configuration: NodeServerConfiguration, engine: NodeEngine, content: ContentService, webhooks: WebhookDelivery,
        credentials: ServerAPICredentials?, devIdentity: DevIdentityProvider?, gate: SessionGate,
        admission: SessionAdmission, budget: NodeOutboundBudget, metrics: ServerMetrics, logger: Logger,
        origin: NIOLockedValueBox<String>, sharedCredentials: SharedServerAPICredentials? = nil
    ) -> TransportRouter {
        var router = TransportRouter()
        router.add(
            syncPath,
            SyncStreamBridge.handler(
                limits: configuration.limits, metrics: metrics, logger: logger, admission: admission, budget: budget
            ) {
                outbound in
                guard gate.admit() else { return nil }
                let session = engine.openSession(outbound: outbound)
                admission.track(session)
                return GatedSession(session, gate: gate)
            })
        router.add(ContentEndpoint.routePattern, ContentEndpoint.handler(service: content))
        if let credentials {
            let api = ServerAPI(
                engine: engine, credentials: credentials, settings: configuration.serverAPI, webhooks: webhooks,
                content: content, origin: origin, shared: sharedCredentials)
            // Requests without a valid token are answered before their body is read.
            let check: HTTPHeaderCheck = { api.refusalBeforeBody($0) }
            router.add(ServerAPI.routePattern, maxBodyBytes: ServerAPILimits.maxBodyBytes, headerCheck: check) {
                await api.handle($0)
            }
            // Uploads to a content's upload_url take chunks larger than a JSON body.
            router.add(
                ServerAPI.contentRoutePattern(appID: credentials.appID),
                maxBodyBytes: ServerAPILimits.maxUploadChunkBytes, headerCheck: check
            ) {
                await api.handle($0)
            }
        }
        if configuration.clientAPI.enabled {
            let api = ClientAPI(
                engine: engine, settings: configuration.clientAPI, appID: credentials?.appID,
                devIdentity: devIdentity, content: content,
                contentURLLifetimeSeconds: configuration.serverAPI.contentURLLifetimeSeconds, origin: origin)
            // A request with a body for a route that needs a session is answered 401 before
            // its body is read when the session token is not live (a store read).
            let sessionCheck: HTTPAwaitedHeaderCheck = { await api.refusalBeforeBody($0) }
            for pattern in ClientAPI.routePatterns {
                router.add(
                    pattern, maxBodyBytes: ClientAPILimits.maxBodyBytes, awaitedHeaderCheck: sessionCheck,
                    streamedBodyLimit: { api.streamedBodyLimit($0) }
                ) { await api.handle($0) }
            }
            // The Client API's WebSocket (HTTP/1.1 Upgrade); each socket drives a session.
            router.addWebSocket(
                WebSocketEndpoint.path, subprotocols: WebSocketEndpoint.subprotocols, settings: configuration.webSocket,
                WebSocketEndpoint.handler(
                    api: api, logger: logger, budget: budget, admit: { gate.admit() }, release: { gate.release() }))
            // The web chat page mints its users' tokens with the dev provider: served only with it.
            if devIdentity != nil { WebChatPage.register(on: &router) }
        }
        return router
    }

    /// Starts the sync listener: TLS (HTTP/1.1 offered for the Server API), HTTP/2.
    static func listen(
        _ configuration: NodeServerConfiguration, _ prepared: NodeBootstrap.Prepared, router: TransportRouter,
        group: EventLoopGroup,
        maxConnections: Int, engine: NodeEngine
    ) async throws -> TransportServer {
        var tlsConfiguration = TLSConfiguration.server(
            certificateChainFile: prepared.certificatePath, privateKeyFile: prepared.privateKeyPath)
        // HTTP/1.1 serves the Server API and the Client API (REST, and its WebSocket through
        // Upgrade); the sync stream and content stay HTTP/2 (505).
        let http1 = configuration.serverAPI.enabled || configuration.clientAPI.enabled
        tlsConfiguration.offersHTTP1 = http1
        return try await TransportServer.start(
            host: configuration.host, port: configuration.port, tls: try TLSContext(tlsConfiguration), router: router,
            settings: configuration.http2Settings, group: group, maxConnections: maxConnections,
            perAddress: AddressLimits(
                maxConnections: configuration.resources.maxConnectionsPerAddress,
                maxHandshakes: configuration.resources.maxHandshakesPerAddress),
            http1: http1 ? HTTP1Settings() : nil,
            connectionClosed: { [nonces = engine.nonces] in nonces.connectionClosed($0) })
    }

    /// Starts the admin listener: metrics, health (readiness), replication.
    static func startAdmin(
        _ configuration: NodeServerConfiguration, group: EventLoopGroup, registry: PrometheusCollectorRegistry,
        store: NodeStore,
        engine: NodeEngine, transport: TransportServer, peers: PeerService?, gate: SessionGate, maxConnections: Int,
        budget: NodeOutboundBudget, stopped: NIOLockedValueBox<Bool>
    ) async throws -> AdminServer {
        let health = NodeHealth(
            store: store, sessions: { gate.count }, maxSessions: configuration.maxSessions,
            connections: { transport.connectionCount }, maxConnections: maxConnections,
            stopping: { stopped.withLockedValue { $0 } })
        let peerMetrics = peers.map { PeerMetrics(registry: registry, engine: engine, peers: $0) }
        let sampler = NodeMetricsSampler(
            registry: registry, store: store, transport: transport, budget: budget, answers: engine.answers)
        let presence = PresenceMetrics(registry: registry, engine: engine)
        return try await AdminServer.start(
            host: configuration.adminHost, port: configuration.adminPort, group: group,
            metrics: { [peerMetrics] in
                sampler.sample()
                presence.sample()
                await peerMetrics?.sample()
                return registry.emitToString()
            },
            readiness: { await health.readiness() },
            replication: { [peers] in
                do {
                    return try await engine.convergenceDigest().json(
                        node: engine.configuration.nodeID, peers: peers?.links ?? [:])
                } catch {
                    return "{\"error\": \"cannot read the store\"}\n"
                }
            }, idleTimeout: .seconds(Int64(configuration.resources.adminIdleConnectionTimeoutSeconds)))
    }

    /// The health log over the listener's and the gate's counts.
    static func healthLog(
        _ configuration: NodeServerConfiguration, transport: TransportServer, gate: SessionGate, maxConnections: Int,
        logger: Logger
    ) -> NodeHealthLog {
        NodeHealthLog(logger: logger) { [maxSessions = configuration.maxSessions] in
            let limit = NodeResourceLimits.softFileDescriptorLimit()
            let counts = transport.counts
            return NodeHealthLog.Counts(
                descriptors: NodeHealth.openDescriptors().map { ($0, limit) },
                connections: (transport.connectionCount, maxConnections),
                sessions: (gate.count, maxSessions), refusedConnections: counts.refused,
                failedAccepts: counts.acceptFailed,
                refusedSessions: gate.refused)
        }
    }
}

extension NodeServerConfiguration {
    /// ``NodeResourceLimits/maxConnections`` under the soft file-descriptor limit, or a start-up
    /// error when the limit leaves no room for a connection.
    func maxConnections() throws -> Int {
        let softLimit = NodeResourceLimits.softFileDescriptorLimit()
        guard let maxConnections = resources.effectiveMaxConnections(softLimit: softLimit) else {
            throw NodeServerError.startup(
                "the file-descriptor limit (\(softLimit)) leaves no room for connections after the reserve of \(resources.fileDescriptorReserve)"
            )
        }
        return maxConnections
    }

    /// The engine's configuration: the prepared node id and providers, and this one's limits.
    func engineConfiguration(_ prepared: NodeBootstrap.Prepared) -> NodeEngineConfiguration {
        var engine = NodeEngineConfiguration(nodeID: prepared.nodeID, identityProviders: prepared.identityProviders)
        engine.maxFrameSize = min(limits.maxFrameSize, WireLimits.protocolMaxFrameSize)
        engine.commandBudget = resources.commandBudget
        engine.nonces = resources.nonces
        engine.answerBudgetBytes = resources.answerBudgetBytes
        engine.maxChannelMembers = resources.maxChannelMembers
        engine.sessionLifetime = .seconds(sessionLifetimeSeconds)
        engine.cluster = peers.cluster
        return engine
    }

    /// The sync listener's HTTP/2 settings.
    var http2Settings: HTTP2Settings {
        var settings = HTTP2Settings()
        settings.maxConcurrentStreams = maxStreamsPerConnection
        settings.drainTimeout = .seconds(Int64(drainTimeoutSeconds))
        settings.idleConnectionTimeout = .seconds(Int64(resources.idleConnectionTimeoutSeconds))
        settings.stalledWriteTimeout = .seconds(Int64(resources.stalledConnectionTimeoutSeconds))
        settings.liveness = HTTP2Liveness(
            pingAfterQuiet: .seconds(Int64(resources.clientPingAfterQuietSeconds)),
            ackDeadline: .seconds(Int64(resources.clientPingDeadlineSeconds)))
        settings.initialStreamWindow = Int32(resources.initialStreamWindowBytes)
        settings.openedStreamWindow = Int32(resources.streamWindowBytes)
        settings.maxUnproductiveFramesPerSecond = resources.maxUnproductiveFramesPerSecond
        return settings
    }
}
