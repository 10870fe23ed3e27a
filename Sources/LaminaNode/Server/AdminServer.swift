import NIOCore
import NIOHTTP1
import NIOPosix

/// The local admin port: plain HTTP/1.1 (NIOHTTP1) with `GET /metrics` (Prometheus text
/// format) and `GET /health` (200 "ok" while the node is healthy, else 503).
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

    /// Starts listening. `metrics` renders the exposition text; `healthy` decides /health.
    public static func start(
        host: String, port: Int, group: EventLoopGroup,
        metrics: @escaping @Sendable () -> String, healthy: @escaping @Sendable () -> Bool
    ) async throws -> AdminServer {
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(AdminHandler(metrics: metrics, healthy: healthy))
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

private final class AdminHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let metrics: @Sendable () -> String
    private let healthy: @Sendable () -> Bool
    private var request: HTTPRequestHead?

    init(metrics: @escaping @Sendable () -> String, healthy: @escaping @Sendable () -> Bool) {
        self.metrics = metrics
        self.healthy = healthy
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
        let (status, contentType, body): (HTTPResponseStatus, String, String)
        switch (head.method, path) {
        case (.GET, "/metrics"):
            (status, contentType, body) = (.ok, "text/plain; version=0.0.4; charset=utf-8", metrics())
        case (.GET, "/health"):
            (status, contentType, body) = healthy()
                ? (.ok, "text/plain", "ok\n") : (.serviceUnavailable, "text/plain", "unavailable\n")
        case (_, "/metrics"), (_, "/health"):
            (status, contentType, body) = (.methodNotAllowed, "text/plain", "method not allowed\n")
        default:
            (status, contentType, body) = (.notFound, "text/plain", "not found\n")
        }
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: contentType)
        headers.add(name: "content-length", value: "\(body.utf8.count)")
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let ctx = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.whenComplete { _ in ctx.value.close(promise: nil) }
        }
    }
}
