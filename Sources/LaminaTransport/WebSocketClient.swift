import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// A WebSocket client over TLS: HTTP/1.1 Upgrade (NIOHTTP1's client upgrade handler and
/// NIOWebSocket's client upgrader, which checks `Sec-WebSocket-Accept`), then RFC 6455 framing
/// by NIOWebSocket. For load generators and tests of the node's WebSocket routes.
///
/// Text (and binary) messages go to `onText` on the connection's event loop, fragments joined
/// (up to `maxMessageBytes`); PINGs are answered; a CLOSE from the server is echoed and the
/// socket closed. Outbound messages are masked, as RFC 6455 requires of a client. Thread-safe.
public final class WebSocketClient: Sendable {
    /// The socket's channel.
    public let channel: Channel
    /// The subprotocol the server chose (`Sec-WebSocket-Protocol` of its 101), if any.
    public let subprotocol: String?

    private init(channel: Channel, subprotocol: String?) {
        self.channel = channel
        self.subprotocol = subprotocol
    }

    /// The loop `onText` and `onClose` run on.
    public var eventLoop: EventLoop { channel.eventLoop }

    /// Whether the socket is open.
    public var isOpen: Bool { channel.isActive }

    /// Connects to `address` (default: `host`) on `port`, verifies the certificate for `host`
    /// (`tls`: a client context that ``TLSConfiguration/offersHTTP1``) and upgrades `path`
    /// (with its query) offering `subprotocols`. Throws `connect-failed`, `timeout`, a TLS code,
    /// or `bad-response` with the status when the server answers the upgrade with anything but 101.
    public static func connect(
        host: String, address: String? = nil, port: Int, path: String, subprotocols: [String] = [],
        tls: TLSContext, group: EventLoopGroup, connectTimeout: TimeAmount = .seconds(10),
        maxMessageBytes: Int = 16 * 1024 * 1024,
        onText: @escaping @Sendable (ByteBuffer) -> Void,
        onClose: @escaping @Sendable (WebSocketErrorCode?) -> Void = { _ in }
    ) async throws -> WebSocketClient {
        guard tls.configuration.role == .client, tls.configuration.offersHTTP1 else {
            throw TransportError(.tlsConfiguration, "a WebSocket client needs a client TLS context offering http/1.1")
        }
        let eventLoop = group.next()
        let upgraded = eventLoop.makePromise(of: String?.self)
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path)
        head.headers.add(name: "host", value: host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)")
        head.headers.add(name: "content-length", value: "0")
        if !subprotocols.isEmpty {
            head.headers.add(name: "sec-websocket-protocol", value: subprotocols.joined(separator: ", "))
        }
        let request = head
        let channel: Channel
        do {
            channel = try await ClientBootstrap(group: eventLoop)
                .connectTimeout(connectTimeout)
                .channelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let starter = WebSocketUpgradeStarter(request: request, upgraded: upgraded)
                        let frames = WebSocketClientFrames(onText: onText, onClose: onClose)
                        let upgrader = NIOWebSocketClientUpgrader(
                            maxFrameSize: maxMessageBytes, automaticErrorHandling: true,
                            upgradePipelineHandler: { channel, response in
                                channel.eventLoop.makeCompletedFuture {
                                    try channel.pipeline.syncOperations.addHandlers([
                                        NIOWebSocketFrameAggregator(
                                            minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 4096,
                                            maxAccumulatedFrameSize: maxMessageBytes),
                                        frames,
                                    ])
                                    starter.upgraded(
                                        subprotocol: response.headers.first(name: "sec-websocket-protocol"))
                                }
                            })
                        let sync = channel.pipeline.syncOperations
                        try sync.addHandler(TLSHandler(context: tls, serverHostname: host))
                        try sync.addHTTPClientHandlers(
                            withClientUpgrade: (
                                upgraders: [upgrader],
                                completionHandler: { context in
                                    _ = context.pipeline.syncOperations.removeHandler(starter)
                                }
                            ))
                        try sync.addHandler(starter)
                    }
                }
                .connect(host: address ?? host, port: port).get()
        } catch {
            upgraded.fail(error)
            if case ChannelError.connectTimeout = error {
                throw TransportError(.timeout, "connecting to \(host):\(port) took longer than \(connectTimeout)")
            }
            throw TransportError(.connectFailed, "cannot connect to \(host):\(port): \(error)")
        }
        do {
            let subprotocol = try await upgraded.futureResult.get()
            return WebSocketClient(channel: channel, subprotocol: subprotocol)
        } catch {
            channel.close(promise: nil)
            throw error
        }
    }

    /// Sends a text message (one masked frame).
    public func send(text: String) {
        send(ByteBuffer(string: text))
    }

    /// Sends `buffer` (UTF-8) as a text message (one masked frame).
    public func send(_ buffer: ByteBuffer) {
        let frame = WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: buffer)
        channel.writeAndFlush(frame, promise: nil)
    }

    /// Sends CLOSE (1000) and closes the socket once the server answers (or after `grace`).
    public func close(grace: TimeAmount = .seconds(2)) async {
        var payload = ByteBuffer()
        payload.write(webSocketErrorCode: .normalClosure)
        let frame = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: payload)
        channel.writeAndFlush(frame, promise: nil)
        let channel = self.channel
        let timer = channel.eventLoop.scheduleTask(in: grace) { channel.close(promise: nil) }
        try? await channel.closeFuture.get()
        timer.cancel()
    }
}

/// Sends the upgrade request once TLS is up; answers the connection's promise with the
/// upgrade's outcome (a non-101 response, or the socket closing first, fails it).
private final class WebSocketUpgradeStarter: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let request: HTTPRequestHead
    // Event loop only.
    private var promise: EventLoopPromise<String?>?

    init(request: HTTPRequestHead, upgraded: EventLoopPromise<String?>) {
        self.request = request
        self.promise = upgraded
    }

    func upgraded(subprotocol: String?) {
        promise?.succeed(subprotocol)
        promise = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is TLSHandshakeCompleted {
            context.write(wrapOutboundOut(.head(request)), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) {
            fail(TransportError(.badResponse, "the upgrade was answered \(head.status.code)"))
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        fail(error as? TransportError ?? TransportError(.badResponse, "\(error)"))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(TransportError(.connectionClosed, "the connection closed before the upgrade"))
        context.fireChannelInactive()
    }

    private func fail(_ error: Error) {
        promise?.fail(error)
        promise = nil
    }
}

/// The client's frames after the upgrade: messages to `onText`, PING answered, CLOSE echoed.
private final class WebSocketClientFrames: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let onText: @Sendable (ByteBuffer) -> Void
    private let onClose: @Sendable (WebSocketErrorCode?) -> Void
    // Event loop only.
    private var closeCode: WebSocketErrorCode?
    private var closeSeen = false
    private var notified = false

    init(onText: @escaping @Sendable (ByteBuffer) -> Void, onClose: @escaping @Sendable (WebSocketErrorCode?) -> Void) {
        self.onText = onText
        self.onClose = onClose
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary:
            onText(frame.unmaskedData)
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .connectionClose:
            guard !closeSeen else { return }
            closeSeen = true
            var payload = frame.unmaskedData
            closeCode = payload.readWebSocketErrorCode()
            var echo = ByteBuffer()
            if let closeCode { echo.write(webSocketErrorCode: closeCode) }
            let channel = context.channel
            context.writeAndFlush(
                wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: echo))
            ).whenComplete { _ in channel.close(promise: nil) }
        default:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !notified {
            notified = true
            onClose(closeCode)
        }
        context.fireChannelInactive()
    }
}
