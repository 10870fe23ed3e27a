import NIOCore
import NIOHTTP1
import NIOWebSocket

/// Sits between ``TLSHandler`` and the HTTP/2 handler on a server that offers HTTP/1.1:
/// when the handshake agreed on `http/1.1`, inserts NIOHTTP1's codec and an
/// ``HTTP1ServerHandler`` after itself (they consume the connection; the HTTP/2 handler
/// stays idle behind them), else hands the handshake on to HTTP/2. Then leaves.
final class ALPNSwitch: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let router: TransportRouter
    private let settings: HTTP1Settings

    init(router: TransportRouter, settings: HTTP1Settings) {
        self.router = router
        self.settings = settings
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let handshake = event as? TLSHandshakeCompleted else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        if handshake.info.alpn == "h2" {
            context.fireUserInboundEventTriggered(event)
        } else {
            do {
                var limits = NIOHTTPDecoderLimitConfiguration()
                limits.maxHeaderFieldSize = settings.maxHeaderFieldSize
                limits.maxHeaderListSize = settings.maxHeaderListSize
                limits.maxHeaderFieldCount = settings.maxHeaderFieldCount
                let sync = context.pipeline.syncOperations
                let handler = HTTP1ServerHandler(router: router, settings: settings)
                try sync.addHandler(handler, position: .after(self))
                // WebSocket routes: the first request of a connection may upgrade (NIO's
                // upgrade handler leaves the pipeline after the first request).
                var upgrade: NIOHTTPServerUpgradeConfiguration?
                if router.hasWebSocketRoutes {
                    let upgrader = WebSocketUpgrader(router: router)
                    upgrader.http1 = handler
                    upgrade = (upgraders: [upgrader], completionHandler: { _ in })
                }
                try sync.configureHTTPServerPipeline(
                    position: .after(self), withPipeliningAssistance: true, withServerUpgrade: upgrade,
                    withErrorHandling: true,
                    withOutboundHeaderValidation: true, withEncoderConfiguration: HTTPResponseEncoder.Configuration(),
                    withDecoderLimitConfiguration: limits)
            } catch {
                context.fireErrorCaught(error)
                context.close(promise: nil)
                return
            }
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}

/// Serves HTTP/1.1 requests with keep-alive: request-level routes of the router run as on
/// HTTP/2; stream routes (sync, content) answer 505 (they need HTTP/2); unknown paths 404.
/// One request at a time (NIOHTTP1's pipelining handler queues the next). A WebSocket route's
/// path answers a plain request 426, and a refused upgrade with the route's refusal.
final class HTTP1ServerHandler: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let router: TransportRouter
    private let settings: HTTP1Settings
    private var head: HTTPRequestHead?
    private var route: HTTPRequestRoute?
    private var body = ByteBuffer()
    private var tooLarge = false
    /// The request was answered before its body (refused, or too large): the rest of it is not
    /// read until the answer is out, then only discarded (bounded) before the connection closes.
    private var answeredEarly = false
    /// After an early answer: body bytes discarded while the connection lingers (below).
    private var discarded = 0
    private var lingering = false
    private var requestTimer: Scheduled<Void>?
    private var idleTimer: Scheduled<Void>?
    private var context: ChannelHandlerContext?
    /// The response to a refused WebSocket upgrade, set by ``WebSocketUpgrader`` before the
    /// request comes here (event loop only).
    var refusal: HTTPResponse?
    private var refusing: HTTPResponse?
    /// The route's awaited header check is running: the socket is not read meanwhile; a
    /// request end decoded from bytes already read waits for it (`endedWhileChecking`).
    private var checking = false
    private var endedWhileChecking = false
    /// The body of a request its route streams (``HTTPRequestRoute/streamedBodyLimit``), fed as
    /// it is decoded; its handler runs from the head on (after the awaited check).
    private var streamed: HTTPRequestBodySource?
    private var streamedLimit: UInt64?
    private var streamedRequest: HTTPRequest?
    private var streamedEnded = false
    /// The streamed body's source asked to stop reading (its handler is behind).
    private var streamedPaused = false

    init(router: TransportRouter, settings: HTTP1Settings) {
        self.router = router
        self.settings = settings
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        armIdle(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        requestTimer?.cancel()
        idleTimer?.cancel()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        requestTimer?.cancel()
        idleTimer?.cancel()
        context.fireChannelInactive()
    }

    private func armIdle(context: ChannelHandlerContext) {
        idleTimer?.cancel()
        idleTimer = context.eventLoop.scheduleTask(in: settings.idleTimeout) { [self] in
            guard head == nil else { return }
            self.context?.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            guard !lingering else { return }  // closing: a pipelined request is not served
            idleTimer?.cancel()
            self.head = head
            body = context.channel.allocator.buffer(capacity: 0)
            tooLarge = false
            answeredEarly = false
            streamed = nil
            streamedLimit = nil
            streamedRequest = nil
            streamedEnded = false
            streamedPaused = false
            route = router.requestRoute(for: head.uri)
            refusing = refusal
            refusal = nil
            if let problem = Self.hostProblem(head) {
                refuseEarly(
                    context: context,
                    HTTPResponse(
                        status: 400, headers: [("content-type", "text/plain")],
                        body: ByteBuffer(string: "bad request: \(problem)\n")))
                return
            }
            // A request that announces a body is checked before it is read; one without is
            // answered at its end as usual (and its connection kept).
            let announcesBody =
                !head.headers["transfer-encoding"].isEmpty
                || head.headers["content-length"].contains { $0 != "0" }
            checking = false
            endedWhileChecking = false
            if let route, announcesBody {
                var headers = HeaderFields()
                for (name, value) in head.headers { headers.append(name, value) }
                let request = HTTPRequest(
                    method: head.method.rawValue, path: head.uri, headers: headers, body: ByteBuffer(),
                    httpVersion: "1.1", remoteAddress: context.channel.remoteAddress)
                streamedLimit = route.streamedBodyLimit?(request)
                let early = route.refusalBeforeBody(request, limit: streamedLimit)
                if let refusal = early.refusal {
                    refuseEarly(context: context, refusal)
                    return
                }
                if early.declaredTooLarge {
                    tooLarge = true
                    answerEarly(context: context, head: head)
                    return
                }
                if let limit = streamedLimit {
                    streamed = makeStreamedSource(context: context, limit: limit)
                    streamedRequest = request
                }
                if let awaited = route.awaitedHeaderCheck {
                    checking = true
                    try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
                    let loop = context.eventLoop
                    let bound = NIOLoopBound(self, eventLoop: loop)
                    Task {
                        let refusal = await awaited(request)
                        loop.execute { bound.value.checked(refusal) }
                    }
                }
            }
            if !checking {
                if streamed != nil { startStreamed(context: context, keepAlive: head.isKeepAlive) }
                continueIfExpected(context: context, head: head)
            }
            armRequestTimer(context: context)
        case .body(var chunk):
            if answeredEarly {
                // Lingering after an early answer: the rest is discarded, up to a bound.
                discarded += chunk.readableBytes
                if discarded > Self.lingerBytes { context.close(promise: nil) }
                return
            }
            if let source = streamed {
                if !streamedPaused { armRequestTimer(context: context) }
                if !source.push(chunk) {
                    // Over the limit: the handler answers 413; no more of the body is read.
                    answeredEarly = true
                    requestTimer?.cancel()
                    try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
                }
                return
            }
            guard let head, !tooLarge else { return }
            if body.readableBytes + chunk.readableBytes > (route?.maxBodyBytes ?? 0) {
                tooLarge = true
                body.clear()
                if route != nil { answerEarly(context: context, head: head) }
            } else {
                body.writeBuffer(&chunk)
            }
        case .end:
            guard let head, !answeredEarly else { return }
            if let source = streamed {
                streamedEnded = true
                requestTimer?.cancel()
                source.finish()
                return
            }
            if checking {
                endedWhileChecking = true
                return
            }
            requestTimer?.cancel()
            dispatch(context: context, head: head)
        }
    }

    /// The request's timeout: from its head to its end, or for a streamed body from its last
    /// byte (while the node is ready to read it): then 408 and close.
    private func armRequestTimer(context: ChannelHandlerContext) {
        requestTimer?.cancel()
        requestTimer = context.eventLoop.scheduleTask(in: settings.requestTimeout) { [self] in
            guard self.head != nil, let context = self.context else { return }
            self.head = nil
            self.streamed?.fail(HTTPRequestBodyError(.stalled, "no body byte for \(self.settings.requestTimeout)"))
            self.respond(
                context: context,
                HTTPResponse(
                    status: 408, headers: [("content-type", "text/plain")],
                    body: ByteBuffer(string: "request timeout\n")), keepAlive: false)
        }
    }

    /// A client waiting for 100-continue gets it when the body may come.
    private func continueIfExpected(context: ChannelHandlerContext, head: HTTPRequestHead) {
        guard let route, head.headers["expect"].contains(where: { $0.lowercased() == "100-continue" }) else {
            return
        }
        let length = head.headers["content-length"].first.flatMap { UInt64($0) } ?? 0
        if length <= streamedLimit ?? UInt64(route.maxBodyBytes) {
            context.writeAndFlush(
                wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .continue))), promise: nil)
        }
    }

    /// The route's awaited header check answered: refuse before the body, or read it now.
    private func checked(_ refusal: HTTPResponse?) {
        guard checking, let context else { return }
        checking = false
        // Answered meanwhile (timed out, or too large and handed to the handler).
        guard let head, !answeredEarly else { return }
        if let refusal {
            streamed?.fail(HTTPRequestBodyError(.closed, "the request was refused"))
            refuseEarly(context: context, refusal)
            return
        }
        if streamed != nil {
            startStreamed(context: context, keepAlive: head.isKeepAlive)
            if !streamedEnded { continueIfExpected(context: context, head: head) }
        } else if endedWhileChecking {
            endedWhileChecking = false
            requestTimer?.cancel()
            dispatch(context: context, head: head)
        } else {
            continueIfExpected(context: context, head: head)
        }
        guard !streamedPaused else { return }  // the streamed body's handler is behind: it resumes
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
        context.read()
    }

    /// The source of a streamed body: pausing stops reading the socket (and the stall timer),
    /// resuming reads again. The source asks to pause from `push`, on the event loop, and the
    /// pause happens there and then: queued as a task instead, it could run after a resume the
    /// handler queued from its own thread in between (having drained the buffer at once), which
    /// found nothing paused; the late pause then stopped reading for good while the handler
    /// waited for data (a 64 MiB HTTP/1.1 PUT hung so, the node's socket 3 MB full and unread).
    private func makeStreamedSource(context: ChannelHandlerContext, limit: UInt64) -> HTTPRequestBodySource {
        let loop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: loop)
        return HTTPRequestBodySource(
            limit: limit, highWater: HTTPRequestRoute.streamedBodyHighWater,
            pause: {
                if loop.inEventLoop {
                    bound.value.pauseStreamed()
                } else {
                    loop.execute { bound.value.pauseStreamed() }
                }
            },
            resume: { loop.execute { bound.value.resumeStreamed() } })
    }

    private func pauseStreamed() {
        guard let context, streamed != nil, !answeredEarly else { return }
        streamedPaused = true
        requestTimer?.cancel()
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
    }

    private func resumeStreamed() {
        guard let context, streamed != nil, streamedPaused, !answeredEarly else { return }
        streamedPaused = false
        guard !streamedEnded else { return }
        armRequestTimer(context: context)
        guard !checking else { return }
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
        context.read()
    }

    /// Runs the handler of a streamed request with its body as it arrives. Answered before the
    /// body's end (refused, or too large), the rest is not read and the connection closes after
    /// the answer.
    private func startStreamed(context: ChannelHandlerContext, keepAlive: Bool) {
        guard let route, let source = streamed, var request = streamedRequest else { return }
        request.bodyStream = HTTPRequestBody(source: source)
        streamedRequest = nil
        let loop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: loop)
        Task {
            let response = await route.handler(request)
            loop.execute {
                let handler = bound.value
                guard handler.head != nil, let context = handler.context else { return }
                handler.head = nil
                var keepAlive = keepAlive
                if !handler.streamedEnded {
                    source.fail(HTTPRequestBodyError(.closed, "answered before the body's end"))
                    handler.answeredEarly = true
                    handler.requestTimer?.cancel()
                    try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
                    keepAlive = false
                }
                handler.streamed = nil
                handler.respond(context: context, response, keepAlive: keepAlive)
            }
        }
    }

    /// RFC 9112 §3.2: a request with more than one Host, or an HTTP/1.1 request without one.
    static func hostProblem(_ head: HTTPRequestHead) -> String? {
        let hosts = head.headers["host"]
        if hosts.count > 1 { return "more than one Host header" }
        if hosts.isEmpty, head.version.major == 1, head.version.minor >= 1 { return "no Host header" }
        return nil
    }

    /// Answers `response` before the request's body, stops reading and closes after it (lingering).
    private func refuseEarly(context: ChannelHandlerContext, _ response: HTTPResponse) {
        answeredEarly = true
        requestTimer?.cancel()
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
        head = nil
        respond(context: context, response, keepAlive: false)
    }

    /// Runs the route's handler before the body arrived (it is too large), stops reading and
    /// closes after the answer.
    private func answerEarly(context: ChannelHandlerContext, head: HTTPRequestHead) {
        answeredEarly = true
        requestTimer?.cancel()
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
        dispatch(context: context, head: head, keepAlive: false)
    }

    /// NIOHTTP1's upgrade handler reports a refused or malformed upgrade here, then passes the
    /// request on: it is answered as a request, the connection stays.
    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if error is NIOWebSocketUpgradeError { return }
        context.fireErrorCaught(error)
    }

    private func dispatch(context: ChannelHandlerContext, head: HTTPRequestHead, keepAlive: Bool? = nil) {
        let keepAlive = keepAlive ?? head.isKeepAlive
        if let refusing {
            self.refusing = nil
            self.head = nil
            respond(context: context, refusing, keepAlive: keepAlive)
            return
        }
        if route == nil, router.webSocketRoute(for: head.uri) != nil {
            self.head = nil
            let response = HTTPResponse(
                status: 426, headers: [("content-type", "text/plain"), ("upgrade", "websocket")],
                body: ByteBuffer(string: "this path is a WebSocket: send Upgrade: websocket (on a new connection)\n"))
            respond(context: context, response, keepAlive: keepAlive)
            return
        }
        guard let route else {
            self.head = nil
            let isStreamRoute = router.match(head.uri) != nil
            let response =
                isStreamRoute
                ? HTTPResponse(
                    status: 505, headers: [("content-type", "text/plain")],
                    body: ByteBuffer(string: "\(head.uri.split(separator: "?").first ?? "") needs HTTP/2 (ALPN h2)\n"))
                : HTTPResponse(
                    status: 404, headers: [("content-type", "text/plain")], body: ByteBuffer(string: "not found\n"))
            respond(context: context, response, keepAlive: keepAlive)
            return
        }
        var headers = HeaderFields()
        for (name, value) in head.headers { headers.append(name, value) }
        let request = HTTPRequest(
            method: head.method.rawValue, path: head.uri, headers: headers, body: tooLarge ? ByteBuffer() : body,
            bodyTooLarge: tooLarge, httpVersion: "1.1", remoteAddress: context.channel.remoteAddress)
        body = ByteBuffer()
        let loop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: loop)
        Task {
            let response = await route.handler(request)
            loop.execute {
                let handler = bound.value
                guard handler.head != nil, let context = handler.context else { return }
                handler.head = nil
                handler.respond(context: context, response, keepAlive: keepAlive)
            }
        }
    }

    private func respond(context: ChannelHandlerContext, _ response: HTTPResponse, keepAlive: Bool) {
        if let body = response.stream {
            respond(context: context, response, streaming: body, keepAlive: keepAlive)
            return
        }
        var headers = HTTPHeaders()
        for (name, value) in response.headers { headers.add(name: name, value: value) }
        headers.replaceOrAdd(name: "content-length", value: "\(response.body.readableBytes)")
        if !keepAlive { headers.replaceOrAdd(name: "connection", value: "close") }
        let head = HTTPResponseHead(
            version: .http1_1, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if response.body.readableBytes > 0 {
            context.write(wrapOutboundOut(.body(.byteBuffer(response.body))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if keepAlive {
            armIdle(context: context)
        } else if answeredEarly {
            lingerThenClose(context: context, after: done)
        } else {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    /// Bounds of the lingering close after an early answer.
    static let lingerBytes = 1 << 20
    static let lingerTime: TimeAmount = .seconds(2)

    /// Once an early answer is written, reads again and discards what still comes for at most
    /// ``lingerTime`` or ``lingerBytes``, then closes: a client that sends its whole body before
    /// reading (most HTTP/1.1 libraries) would otherwise get a TCP reset that can destroy the
    /// answer before it reads it.
    private func lingerThenClose(context: ChannelHandlerContext, after done: EventLoopFuture<Void>) {
        let channel = context.channel
        lingering = true
        done.whenComplete { result in
            guard case .success = result, channel.isActive else {
                channel.close(promise: nil)
                return
            }
            try? channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
            channel.read()
            channel.eventLoop.scheduleTask(in: Self.lingerTime) { channel.close(promise: nil) }
        }
    }

    /// A streamed body: the head, then each chunk once the previous one was written to the
    /// connection (NIOHTTP1's pipelining handler holds the next request meanwhile), then the end.
    /// A failed producer closes the connection (the body is short of its content-length).
    private func respond(
        context: ChannelHandlerContext, _ response: HTTPResponse, streaming body: HTTPBodyStream, keepAlive: Bool
    ) {
        var headers = HTTPHeaders()
        for (name, value) in response.headers { headers.add(name: name, value: value) }
        headers.replaceOrAdd(name: "content-length", value: "\(body.contentLength)")
        if !keepAlive { headers.replaceOrAdd(name: "connection", value: "close") }
        let head = HTTPResponseHead(
            version: .http1_1, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
        context.writeAndFlush(wrapOutboundOut(.head(head)), promise: nil)
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        let channel = context.channel
        self.head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "")  // busy until the body ends
        Task {
            var failed = false
            do {
                try await body.produce(
                    HTTPBodyWriter { chunk in
                        try await loop.flatSubmit { () -> EventLoopFuture<Void> in
                            let (handler, context) = bound.value
                            guard handler.context != nil else {
                                return loop.makeFailedFuture(ChannelError.ioOnClosedChannel)
                            }
                            return context.writeAndFlush(handler.wrapOutboundOut(.body(.byteBuffer(chunk))))
                        }.get()
                    })
            } catch {
                failed = true
            }
            let bodyFailed = failed
            loop.execute {
                let (handler, context) = bound.value
                handler.head = nil
                guard handler.context != nil else { return }
                guard !bodyFailed else {
                    channel.close(promise: nil)
                    return
                }
                let done = context.writeAndFlush(handler.wrapOutboundOut(.end(nil)))
                if keepAlive {
                    handler.armIdle(context: context)
                } else {
                    done.whenComplete { _ in channel.close(promise: nil) }
                }
            }
        }
    }
}
