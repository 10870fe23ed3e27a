import NIOCore
import NIOHTTP1
import NIOWebSocket

/// Upgrades an HTTP/1.1 connection to a WebSocket for a route of the router. One per
/// connection (made by ``ALPNSwitch``); its state lives on the connection's event loop.
///
/// NIOWebSocket's own upgrader checks the handshake (`Sec-WebSocket-Key`, version 13) and
/// computes `Sec-WebSocket-Accept`; this one adds the route's decision and installs
/// NIOWebSocket's frame codec, its protocol-error handler and frame aggregator, and a
/// ``WebSocketConnection``, in place of the HTTP/1.1 handler (before the idle HTTP/2 handler,
/// which never sees a byte of the socket).
final class WebSocketUpgrader: HTTPServerProtocolUpgrader, @unchecked Sendable {
    let supportedProtocol = "websocket"
    let requiredUpgradeHeaders: [String] = []

    private let router: TransportRouter
    /// The connection's HTTP/1.1 handler: it answers a refused upgrade (event loop only).
    weak var http1: HTTP1ServerHandler?
    /// The accepted upgrade, between the 101 and the pipeline change (event loop only).
    private var accepted:
        (
            route: WebSocketRoute, request: WebSocketUpgradeRequest, subprotocol: String?,
            opened: @Sendable (WebSocketConnection) -> Void
        )?

    init(router: TransportRouter) {
        self.router = router
    }

    func buildUpgradeResponse(
        channel: Channel, upgradeRequest: HTTPRequestHead, initialResponseHeaders: HTTPHeaders
    ) -> EventLoopFuture<HTTPHeaders> {
        guard let route = router.webSocketRoute(for: upgradeRequest.uri) else {
            return channel.eventLoop.makeFailedFuture(NIOWebSocketUpgradeError.unsupportedWebSocketTarget)
        }
        let handshake = NIOWebSocketServerUpgrader(
            maxFrameSize: route.settings.maxFrameBytes, automaticErrorHandling: true,
            shouldUpgrade: { channel, head in self.decide(route: route, channel: channel, head: head) },
            upgradePipelineHandler: { channel, _ in channel.eventLoop.makeSucceededVoidFuture() })
        return handshake.buildUpgradeResponse(
            channel: channel, upgradeRequest: upgradeRequest, initialResponseHeaders: initialResponseHeaders)
    }

    /// Asks the route (off the event loop); nil refuses, after handing the refusal's response
    /// to the HTTP/1.1 handler that the request then goes to.
    private func decide(route: WebSocketRoute, channel: Channel, head: HTTPRequestHead) -> EventLoopFuture<HTTPHeaders?>
    {
        let loop = channel.eventLoop
        let offered = head.headers["sec-websocket-protocol"].flatMap { $0.split(separator: ",") }.map {
            String($0.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
        }
        var headers = HeaderFields()
        for (name, value) in head.headers { headers.append(name, value) }
        let bare = head.uri.firstIndex(of: "?").map { String(head.uri[..<$0]) } ?? head.uri
        let request = WebSocketUpgradeRequest(
            path: bare, query: WebSocketUpgradeRequest.queryParameters(of: head.uri), headers: headers,
            offeredSubprotocols: offered, subprotocol: offered.first { route.subprotocols.contains($0) },
            remoteAddress: channel.remoteAddress)
        guard route.reserve() else {
            refuse(
                HTTPResponse(
                    status: 503, headers: [("content-type", "text/plain"), ("retry-after", "1")],
                    body: ByteBuffer(string: "too many WebSockets open (\(route.settings.maxConnections))\n")))
            return loop.makeSucceededFuture(nil)
        }
        let promise = loop.makePromise(of: HTTPHeaders?.self)
        let bound = NIOLoopBound(self, eventLoop: loop)
        Task {
            let decision = await route.decide(request)
            loop.execute {
                let upgrader = bound.value
                switch decision {
                case .accept(let subprotocol, let opened):
                    upgrader.accepted = (route, request, subprotocol, opened)
                    var response = HTTPHeaders()
                    if let subprotocol { response.add(name: "Sec-WebSocket-Protocol", value: subprotocol) }
                    promise.succeed(response)
                case .refuse(let response):
                    route.release()
                    upgrader.refuse(response)
                    promise.succeed(nil)
                }
            }
        }
        return promise.futureResult
    }

    private func refuse(_ response: HTTPResponse) {
        http1?.refusal = response
    }

    func upgrade(context: ChannelHandlerContext, upgradeRequest: HTTPRequestHead) -> EventLoopFuture<Void> {
        guard let accepted else {
            return context.eventLoop.makeFailedFuture(NIOWebSocketUpgradeError.unsupportedWebSocketTarget)
        }
        self.accepted = nil
        let (route, request, subprotocol, opened) = accepted
        let channel = context.channel
        channel.closeFuture.whenComplete { _ in route.release() }
        return context.eventLoop.makeCompletedFuture {
            let sync = channel.pipeline.syncOperations
            if let http1 { _ = sync.removeHandler(http1) }
            let settings = route.settings
            let connection = WebSocketConnection(
                request: request, subprotocol: subprotocol, settings: settings, eventLoop: channel.eventLoop)
            let tail = try sync.handler(type: HTTP2ConnectionHandler.self)
            try sync.addHandlers(
                [
                    WebSocketFrameEncoder(),
                    ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: settings.maxFrameBytes)),
                    WebSocketProtocolErrorHandler(),
                    NIOWebSocketFrameAggregator(
                        minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: settings.maxFragments,
                        maxAccumulatedFrameSize: settings.maxMessageBytes),
                    connection,
                ], position: .before(tail))
            opened(connection)
        }
    }
}
