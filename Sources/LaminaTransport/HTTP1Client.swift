import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A whole HTTP/1.1 response.
public struct HTTP1ClientResponse: Sendable {
    public var status: Int
    /// Header fields, names lower-cased.
    public var headers: HeaderFields
    public var body: ByteBuffer
}

/// An HTTP/1.1-over-TLS client connection (NIOHTTP1 behind ``TLSHandler``): one request at
/// a time, kept alive between requests unless the server closes. The node's outbound client
/// for webhooks. Thread-safe.
public final class HTTP1Connection: Sendable {
    private let channel: Channel
    private let handler: NIOLoopBound<HTTP1ClientHandler>
    /// The `host[:port]` sent as `Host`.
    public let authority: String

    private init(channel: Channel, handler: NIOLoopBound<HTTP1ClientHandler>, authority: String) {
        self.channel = channel
        self.handler = handler
        self.authority = authority
    }

    /// Connects to `address` (default: `host`) on `port` and completes once TLS is up, the
    /// certificate verified for `host` (`tls` must be a client context that
    /// ``TLSConfiguration/offersHTTP1``). Fails with `connect-failed`, `timeout` or a TLS code.
    public static func connect(
        host: String, address: String? = nil, port: Int, tls: TLSContext, group: EventLoopGroup,
        connectTimeout: TimeAmount
    ) async throws -> HTTP1Connection {
        guard tls.configuration.role == .client, tls.configuration.offersHTTP1 else {
            throw TransportError(.tlsConfiguration, "an HTTP/1.1 client needs a client TLS context offering http/1.1")
        }
        let eventLoop = group.next()
        let ready = eventLoop.makePromise(of: Void.self)
        let box = NIOLockedValueBox<NIOLoopBound<HTTP1ClientHandler>?>(nil)
        let channel: Channel
        do {
            channel = try await ClientBootstrap(group: eventLoop)
                .connectTimeout(connectTimeout)
                .channelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let handler = HTTP1ClientHandler(ready: ready)
                        box.withLockedValue { $0 = NIOLoopBound(handler, eventLoop: channel.eventLoop) }
                        try channel.pipeline.syncOperations.addHandler(TLSHandler(context: tls, serverHostname: host))
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(handler)
                    }
                }
                .connect(host: address ?? host, port: port).get()
        } catch {
            ready.fail(error)
            if case ChannelError.connectTimeout = error {
                throw TransportError(.timeout, "connecting to \(host):\(port) took longer than \(connectTimeout)")
            }
            throw TransportError(.connectFailed, "cannot connect to \(host):\(port): \(error)")
        }
        // The TLS handshake is bounded by the context's handshake timeout.
        do { try await ready.futureResult.get() } catch {
            channel.close(promise: nil)
            throw error
        }
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        return HTTP1Connection(channel: channel, handler: box.withLockedValue { $0 }!, authority: authority)
    }

    /// Whether the connection can take another request.
    public var isOpen: Bool { channel.isActive }

    /// Sends one request and returns the whole response. `timeout` bounds the wait from the
    /// request's first byte to the response's last; a response body over `maxResponseBytes`
    /// fails with `bad-response`. On any failure the connection is closed.
    public func request(
        method: HTTPMethod, path: String, headers: HeaderFields, body: ByteBuffer?, timeout: TimeAmount,
        maxResponseBytes: Int = 64 * 1024
    ) async throws -> HTTP1ClientResponse {
        let promise = channel.eventLoop.makePromise(of: HTTP1ClientResponse.self)
        let handler = self.handler
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: path)
        head.headers.add(name: "host", value: authority)
        for field in headers { head.headers.add(name: field.name, value: field.value) }
        if let body { head.headers.replaceOrAdd(name: "content-length", value: "\(body.readableBytes)") }
        let requestHead = head
        channel.eventLoop.execute {
            handler.value.send(
                head: requestHead, body: body, timeout: timeout, maxBytes: maxResponseBytes, promise: promise)
        }
        return try await promise.futureResult.get()
    }

    /// Closes the connection.
    public func close() async {
        try? await channel.close()
    }
}

/// The pipeline end of an ``HTTP1Connection``: one request in flight, its response collected.
final class HTTP1ClientHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private var ready: EventLoopPromise<Void>?
    private var context: ChannelHandlerContext?
    private struct Pending {
        var promise: EventLoopPromise<HTTP1ClientResponse>
        var maxBytes: Int
        var timer: Scheduled<Void>?
        var head: HTTPResponseHead?
        var body = ByteBuffer()
    }
    private var pending: Pending?

    init(ready: EventLoopPromise<Void>) {
        self.ready = ready
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        fail(TransportError(.connectionClosed, "the connection closed"))
        self.context = nil
    }

    func send(
        head: HTTPRequestHead, body: ByteBuffer?, timeout: TimeAmount, maxBytes: Int,
        promise: EventLoopPromise<HTTP1ClientResponse>
    ) {
        guard let context, context.channel.isActive else {
            promise.fail(TransportError(.connectionClosed, "the connection is closed"))
            return
        }
        guard pending == nil else {
            promise.fail(TransportError(.invalidState, "a request is already in flight on this connection"))
            return
        }
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let timer = context.eventLoop.scheduleTask(in: timeout) {
            bound.value.fail(TransportError(.timeout, "no complete response within \(timeout)"))
        }
        pending = Pending(promise: promise, maxBytes: maxBytes, timer: timer)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if let body, body.readableBytes > 0 { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is TLSHandshakeCompleted {
            ready?.succeed()
            ready = nil
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard pending != nil else { return }  // nothing asked: ignored (the server misbehaves)
        switch unwrapInboundIn(data) {
        case .head(let head):
            pending?.head = head
        case .body(var chunk):
            guard let current = pending else { return }
            if current.body.readableBytes + chunk.readableBytes > current.maxBytes {
                fail(TransportError(.badResponse, "the response body is larger than \(current.maxBytes) bytes"))
                return
            }
            pending?.body.writeBuffer(&chunk)
        case .end:
            guard let done = pending, let head = done.head else { return }
            pending = nil
            done.timer?.cancel()
            var fields = HeaderFields()
            for header in head.headers { fields.append(header.name.lowercased(), header.value) }
            done.promise.succeed(HTTP1ClientResponse(status: Int(head.status.code), headers: fields, body: done.body))
            if !head.isKeepAlive { context.close(promise: nil) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let failure = error as? TransportError ?? TransportError(.badResponse, "\(error)")
        fail(failure)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(TransportError(.connectionClosed, "the server closed the connection"))
        context.fireChannelInactive()
    }

    private func fail(_ error: TransportError) {
        ready?.fail(error)
        ready = nil
        guard let done = pending else { return }
        pending = nil
        done.timer?.cancel()
        done.promise.fail(error)
        context?.close(promise: nil)
    }
}
