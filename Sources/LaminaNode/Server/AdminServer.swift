import NIOCore
import NIOHTTP1
import NIOPosix

/// The local admin port: plain HTTP/1.1 (NIOHTTP1) with `GET /metrics` (Prometheus text
/// format), `GET /health/live` (200 while the process answers) and `GET /health/ready`
/// (200 when ready for traffic, else 503; each check on its own line; `/health` is the same).
/// A connection that neither sends nor receives for ``idleTimeout`` is closed.
public final class AdminServer: Sendable {
    /// Where it listens (the real port when started on port 0).
    public let localAddress: SocketAddress
    private let channel: Channel

    private init(channel: Channel) {
        self.channel = channel
        self.localAddress = channel.localAddress!
    }

    /// The listening port.
    public var port: Int { localAddress.port ?? 0 }

    /// How long an admin connection may stay without a byte either way (a scraper's keep-alive
    /// connection sees one every scrape interval, seconds apart).
    public static let idleTimeout: TimeAmount = .seconds(60)

    /// Starts listening. `metrics` renders the exposition text; `readiness` answers /health/ready.
    public static func start(
        host: String, port: Int, group: EventLoopGroup,
        metrics: @escaping @Sendable () async -> String, readiness: @escaping @Sendable () async -> NodeReadiness,
        replication: @escaping @Sendable () async -> String = { "{}\n" }, idleTimeout: TimeAmount = idleTimeout
    ) async throws -> AdminServer {
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(allTimeout: idleTimeout))
                    try channel.pipeline.syncOperations.addHandler(CloseWhenIdle())
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(
                        AdminHandler(metrics: metrics, readiness: readiness, replication: replication))
                }
            }
            .bind(host: host, port: port).get()
        return AdminServer(channel: channel)
    }

    /// Stops listening (open admin connections finish their request).
    public func shutdown() async {
        try? await channel.close()
    }
}

/// Closes the connection on ``IdleStateHandler``'s event.
private final class CloseWhenIdle: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}

private final class AdminHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let metrics: @Sendable () async -> String
    private let readiness: @Sendable () async -> NodeReadiness
    private let replication: @Sendable () async -> String
    private var request: HTTPRequestHead?

    init(
        metrics: @escaping @Sendable () async -> String, readiness: @escaping @Sendable () async -> NodeReadiness,
        replication: @escaping @Sendable () async -> String
    ) {
        self.metrics = metrics
        self.readiness = readiness
        self.replication = replication
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): request = head
        case .body: break  // no admin route takes a body; ignored
        case .end:
            guard let head = request else { return }
            request = nil
            respond(context: context, head: head)
        }
    }

    private func respond(context: ChannelHandlerContext, head: HTTPRequestHead) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        switch (head.method, path) {
        case (.GET, "/metrics"):
            let metrics = self.metrics
            let ctx = NIOLoopBound(context, eventLoop: context.eventLoop)
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            context.eventLoop.makeFutureWithTask { await metrics() }.whenSuccess { text in
                handler.value.write(
                    context: ctx.value, head: head, (.ok, "text/plain; version=0.0.4; charset=utf-8", text))
            }
        case (.GET, "/health/live"):
            write(context: context, head: head, (.ok, "text/plain", "ok\n"))
        case (.GET, "/health/ready"), (.GET, "/health"):
            let readiness = self.readiness
            let ctx = NIOLoopBound(context, eventLoop: context.eventLoop)
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            context.eventLoop.makeFutureWithTask { await readiness() }.whenSuccess { report in
                handler.value.write(
                    context: ctx.value, head: head,
                    (report.isReady ? .ok : .serviceUnavailable, "text/plain", report.text))
            }
        case (.GET, "/replication"):
            // The version vector, the convergence digest (overall and per conversation) and the peer links.
            let replication = self.replication
            let ctx = NIOLoopBound(context, eventLoop: context.eventLoop)
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            context.eventLoop.makeFutureWithTask { await replication() }.whenSuccess { json in
                handler.value.write(context: ctx.value, head: head, (.ok, "application/json", json))
            }
        case (_, "/metrics"), (_, "/health"), (_, "/health/live"), (_, "/health/ready"), (_, "/replication"):
            write(context: context, head: head, (.methodNotAllowed, "text/plain", "method not allowed\n"))
        default:
            write(context: context, head: head, (.notFound, "text/plain", "not found\n"))
        }
    }

    private func write(
        context: ChannelHandlerContext, head: HTTPRequestHead, _ response: (HTTPResponseStatus, String, String)
    ) {
        let (status, contentType, body) = response
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: contentType)
        headers.add(name: "content-length", value: "\(body.utf8.count)")
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))),
            promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let ctx = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.whenComplete { _ in ctx.value.close(promise: nil) }
        }
    }
}
