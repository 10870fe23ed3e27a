import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// An HTTP/2-over-TLS server: one listening socket, a ``TransportRouter`` of handlers.
/// Each accepted connection runs TLS then HTTP/2 in its channel pipeline on one event loop.
/// With ``HTTP1Settings`` (and a TLS context that ``TLSConfiguration/offersHTTP1``), a
/// connection that agrees on ALPN `http/1.1` is served by NIOHTTP1 instead, with the same
/// router's request-level routes.
public final class TransportServer: Sendable {
    /// Where the server listens (with the real port when started on port 0).
    public let localAddress: SocketAddress
    private let listener: Channel
    private let connections = NIOLockedValueBox<[ObjectIdentifier: (Channel, HTTP2ConnectionHandler)]>([:])
    fileprivate let statistics: Statistics

    /// The listening port.
    public var port: Int { localAddress.port ?? 0 }

    /// Connections currently open (handshaking ones included).
    public var connectionCount: Int { connections.withLockedValue { $0.count } }

    /// What the server's limits have done so far.
    public struct Counts: Sendable, Hashable {
        /// Connections accepted and closed at once because ``maxConnections`` were open.
        public var refused = 0
        /// Connections accepted and closed at once because their address was at its
        /// ``AddressLimits`` (connections open or handshakes in flight).
        public var refusedForAddress = 0
        /// Connections closed after ``HTTP2Settings/idleConnectionTimeout`` without a stream.
        public var closedIdle = 0
        /// Connections ended with GOAWAY ENHANCE_YOUR_CALM for a frame flood.
        public var closedForFlood = 0
        /// Connections closed because the peer read nothing for ``HTTP2Settings/stalledWriteTimeout``.
        public var closedStalled = 0
        /// Connections closed because a PING went unanswered (``HTTP2Settings/liveness``).
        public var closedUnanswered = 0
        /// Accepts that failed (no file descriptor left, EMFILE/ENFILE, or another socket
        /// error); NIO backs off and tries again.
        public var acceptFailed = 0
    }

    /// Counts of the limits' actions (for metrics and tests).
    public var counts: Counts { statistics.counts.withLockedValue { $0 } }

    /// Inbound body bytes held by the server's streams and not yet taken by their handlers
    /// (streams whose handler paused reading): what clients make the server buffer, each
    /// stream at most its receive window.
    public struct InboundHeld: Sendable, Hashable {
        /// Over every open connection.
        public var bytes = 0
        /// The most one stream holds.
        public var largestStream = 0
        /// The most one stream of an open connection has held at any moment (not sampled).
        public var largestStreamEver = 0
    }

    /// What the open connections' streams hold now (asks each connection on its event loop).
    public func inboundHeld() async -> InboundHeld {
        let open = connections.withLockedValue { Array($0.values) }
        var total = InboundHeld()
        for (channel, handler) in open {
            guard let held = try? await channel.eventLoop.submit({ handler.inboundHeld }).get() else { continue }
            total.bytes += held.bytes
            total.largestStream = max(total.largestStream, held.largest)
            total.largestStreamEver = max(total.largestStreamEver, held.peak)
        }
        return total
    }

    /// Outbound body bytes the server's streams have queued and HTTP/2 framing has not yet
    /// taken (waiting for the client's flow-control windows or its socket): what a client
    /// that reads slowly, or not at all, makes the server hold.
    public struct OutboundHeld: Sendable, Hashable {
        /// Over every open connection.
        public var bytes = 0
        /// The most one stream queues now.
        public var largestStream = 0
        /// The most one stream of an open connection has queued at any moment (not sampled).
        public var largestStreamEver = 0
    }

    /// What the open connections' streams have queued now (asks each connection on its event loop).
    public func outboundHeld() async -> OutboundHeld {
        let open = connections.withLockedValue { Array($0.values) }
        var total = OutboundHeld()
        for (channel, handler) in open {
            guard let held = try? await channel.eventLoop.submit({ handler.outboundHeld }).get() else { continue }
            total.bytes += held.bytes
            total.largestStream = max(total.largestStream, held.largest)
            total.largestStreamEver = max(total.largestStreamEver, held.peak)
        }
        return total
    }

    /// The most connections open at once (nil: no limit).
    public let maxConnections: Int?

    private init(listener: Channel, statistics: Statistics, maxConnections: Int?) {
        self.listener = listener
        self.localAddress = listener.localAddress!
        self.statistics = statistics
        self.maxConnections = maxConnections
    }

    /// Starts listening on `host:port` (port 0 picks a free one). With `maxConnections`, a
    /// connection accepted while that many are open is closed at once, before TLS (it costs
    /// its file descriptor for that moment only). `connectionClosed` is told the
    /// ``TransportStream/connectionID`` of each connection that closes (per-connection state
    /// kept above the transport goes with it).
    /// With `perAddress`, one remote address is held to its own share of connections and of TLS
    /// handshakes in flight (refused the same way), so it cannot take every slot.
    public static func start(
        host: String, port: Int, tls: TLSContext, router: TransportRouter, settings: HTTP2Settings = HTTP2Settings(),
        group: EventLoopGroup, backlog: Int32 = 4096, maxConnections: Int? = nil, perAddress: AddressLimits? = nil,
        http1: HTTP1Settings? = nil, connectionClosed: (@Sendable (UInt64) -> Void)? = nil
    ) -> EventLoopFuture<TransportServer> {
        guard tls.configuration.role == .server else {
            return group.next().makeFailedFuture(
                TransportError(.tlsConfiguration, "a server needs a server TLS context"))
        }
        guard (http1 != nil) == tls.configuration.offersHTTP1 else {
            return group.next().makeFailedFuture(
                TransportError(.tlsConfiguration, "HTTP/1.1 settings and the TLS context's offersHTTP1 must agree"))
        }
        let registry = Registry()
        let statistics = Statistics()
        return ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: backlog)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptFailures(statistics: statistics))
                }
            }
            .childChannelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard statistics.admit(limit: maxConnections) else {
                        try channel.pipeline.syncOperations.addHandler(CloseOnActive())
                        return
                    }
                    channel.closeFuture.whenComplete { _ in statistics.release() }
                    var handshakeDone: (@Sendable () -> Void)? = nil
                    if let perAddress, let address = channel.remoteAddress?.ipAddress {
                        guard let ticket = statistics.addresses.admit(address, limits: perAddress) else {
                            statistics.counts.withLockedValue { $0.refusedForAddress += 1 }
                            try channel.pipeline.syncOperations.addHandler(CloseOnActive())
                            return
                        }
                        channel.closeFuture.whenComplete { _ in ticket.closed() }
                        handshakeDone = { ticket.handshakeDone() }
                    }
                    let handler = HTTP2ConnectionHandler(
                        role: .server(router), settings: settings, readyPromise: channel.eventLoop.makePromise())
                    handler.readyPromise.futureResult.whenFailure { _ in }
                    if let connectionClosed {
                        let id = handler.connectionID
                        channel.closeFuture.whenComplete { _ in connectionClosed(id) }
                    }
                    try channel.pipeline.syncOperations.addHandler(TLSHandler(context: tls))
                    if let handshakeDone {
                        try channel.pipeline.syncOperations.addHandler(HandshakeObserver(done: handshakeDone))
                    }
                    if let http1 {
                        try channel.pipeline.syncOperations.addHandler(ALPNSwitch(router: router, settings: http1))
                    }
                    try channel.pipeline.syncOperations.addHandler(handler)
                    registry.add(channel, handler)
                }
            }
            .bind(host: host, port: port)
            .map { listener in
                let server = TransportServer(listener: listener, statistics: statistics, maxConnections: maxConnections)
                registry.attach(server)
                return server
            }
    }

    /// Async form of ``start(host:port:tls:router:settings:group:backlog:)``.
    public static func start(
        host: String, port: Int, tls: TLSContext, router: TransportRouter, settings: HTTP2Settings = HTTP2Settings(),
        group: EventLoopGroup, maxConnections: Int? = nil, perAddress: AddressLimits? = nil,
        http1: HTTP1Settings? = nil, connectionClosed: (@Sendable (UInt64) -> Void)? = nil
    ) async throws -> TransportServer {
        try await start(
            host: host, port: port, tls: tls, router: router, settings: settings, group: group, backlog: 4096,
            maxConnections: maxConnections, perAddress: perAddress, http1: http1, connectionClosed: connectionClosed
        ).get()
    }

    fileprivate func track(_ channel: Channel, _ handler: HTTP2ConnectionHandler) {
        let key = ObjectIdentifier(channel)
        connections.withLockedValue { $0[key] = (channel, handler) }
        let statistics = self.statistics
        channel.closeFuture.whenComplete { _ in
            _ = self.connections.withLockedValue { $0.removeValue(forKey: key) }
            // On the channel's event loop: the handler's own counters.
            let idle = handler.idleClosures
            let flood = handler.floodTerminations
            let stalled = handler.stalledWriteClosures
            let unanswered = handler.livenessClosures
            if idle + flood + stalled + unanswered > 0 {
                statistics.counts.withLockedValue {
                    $0.closedIdle += idle
                    $0.closedForFlood += flood
                    $0.closedStalled += stalled
                    $0.closedUnanswered += unanswered
                }
            }
        }
    }

    /// Stops accepting, sends GOAWAY on every connection and waits for them to drain
    /// (each bounded by its ``HTTP2Settings/drainTimeout``).
    public func shutdown() -> EventLoopFuture<Void> {
        let open = connections.withLockedValue { Array($0.values) }
        let eventLoop = listener.eventLoop
        return listener.close().flatMapError { _ in eventLoop.makeSucceededVoidFuture() }.flatMap {
            let closed = open.map { channel, handler -> EventLoopFuture<Void> in
                channel.eventLoop.execute { handler.initiateGracefulShutdown() }
                return channel.closeFuture
            }
            return EventLoopFuture.andAllComplete(closed, on: eventLoop)
        }
    }

    /// Async form of ``shutdown()``.
    public func shutdown() async throws {
        try await shutdown().get()
    }
}

/// Open connections against ``TransportServer/maxConnections``, and the limits' counts.
private final class Statistics: Sendable {
    let open = NIOLockedValueBox(0)
    let addresses = AddressTable()
    let counts = NIOLockedValueBox(TransportServer.Counts())

    func admit(limit: Int?) -> Bool {
        let admitted = open.withLockedValue { open -> Bool in
            if let limit, open >= limit { return false }
            open += 1
            return true
        }
        if !admitted { counts.withLockedValue { $0.refused += 1 } }
        return admitted
    }

    func release() { open.withLockedValue { $0 -= 1 } }
}

/// Counts the listener's accept failures (``TransportServer/Counts/acceptFailed``).
private final class AcceptFailures: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny
    let statistics: Statistics
    init(statistics: Statistics) { self.statistics = statistics }
    func errorCaught(context: ChannelHandlerContext, error: Error) {
        statistics.counts.withLockedValue { $0.acceptFailed += 1 }
        context.fireErrorCaught(error)
    }
}

/// Closes a connection refused by ``TransportServer/maxConnections`` as soon as it is active.
private final class CloseOnActive: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny
    func channelActive(context: ChannelHandlerContext) { context.close(promise: nil) }
    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { context.close(promise: nil) }
    }
}

/// Holds connections accepted before the bind future has produced the server object.
private final class Registry: @unchecked Sendable {
    private let lock = NIOLock()
    private var server: TransportServer?
    private var early: [(Channel, HTTP2ConnectionHandler)] = []

    func add(_ channel: Channel, _ handler: HTTP2ConnectionHandler) {
        let server: TransportServer? = lock.withLock {
            if self.server == nil { early.append((channel, handler)) }
            return self.server
        }
        server?.track(channel, handler)
    }

    func attach(_ server: TransportServer) {
        let pending: [(Channel, HTTP2ConnectionHandler)] = lock.withLock {
            self.server = server
            defer { early.removeAll() }
            return early
        }
        for (channel, handler) in pending { server.track(channel, handler) }
    }
}
