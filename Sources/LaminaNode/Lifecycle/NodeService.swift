import Logging
import NIOCore
import Prometheus
import ServiceLifecycle

/// A node as a service of a swift-service-lifecycle `ServiceGroup`: `run()` starts it
/// (``NodeServer/start(configuration:group:logger:registry:)``, ordered, one rollback path),
/// serves until the group's graceful shutdown (e.g. on SIGTERM), then stops it (the same
/// stop path). The node's parts are not services of their own: a group starts its services
/// at once and stops them in the reverse of their order, while a part needs the ones before
/// it started and the node's stop order is not its reversed start order (``NodePart``).
public struct NodeService: Service {
    public let configuration: NodeServerConfiguration
    private let group: EventLoopGroup
    private let logger: Logger
    private let registry: PrometheusCollectorRegistry
    private let started: @Sendable (NodeServer) -> Void

    /// `started` is called once the node serves.
    public init(
        configuration: NodeServerConfiguration, group: EventLoopGroup, logger: Logger,
        registry: PrometheusCollectorRegistry,
        started: @escaping @Sendable (NodeServer) -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.group = group
        self.logger = logger
        self.registry = registry
        self.started = started
    }

    public func run() async throws {
        let server = try await NodeServer.start(
            configuration: configuration, group: group, logger: logger, registry: registry)
        started(server)
        // Returns on graceful shutdown; throws when the task is cancelled: the node stops either way.
        try? await gracefulShutdown()
        await server.shutdown()
    }
}
