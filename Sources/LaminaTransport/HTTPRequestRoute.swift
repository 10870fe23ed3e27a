import NIOCore

/// A whole request as a request-level handler sees it, whichever HTTP version carried it.
public struct HTTPRequest: Sendable {
    /// `GET`, `POST`, …
    public var method: String
    /// The request target with its query (`/apps/x/conversations?limit=10`).
    public var path: String
    /// Request header fields, names lower-cased (no pseudo-headers).
    public var headers: HeaderFields
    /// The body (at most the route's `maxBodyBytes`).
    public var body: ByteBuffer
    /// True when the body was longer than the route's `maxBodyBytes`: ``body`` is then empty
    /// and the handler should answer 413.
    public var bodyTooLarge: Bool
    /// "2" or "1.1".
    public var httpVersion: String
    /// The peer's address.
    public var remoteAddress: SocketAddress?
    /// The body as it arrives, for a request its route streams
    /// (``HTTPRequestRoute/streamedBodyLimit``); ``body`` is then empty.
    public var bodyStream: HTTPRequestBody?

    public init(
        method: String, path: String, headers: HeaderFields, body: ByteBuffer, bodyTooLarge: Bool = false,
        httpVersion: String, remoteAddress: SocketAddress? = nil
    ) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.bodyTooLarge = bodyTooLarge
        self.httpVersion = httpVersion
        self.remoteAddress = remoteAddress
    }
}

/// A whole response of a request-level handler.
public struct HTTPResponse: Sendable {
    public var status: Int
    /// Header fields (lower-case names; no `content-length`, the transport adds it).
    public var headers: [(String, String)]
    public var body: ByteBuffer
    /// A body produced while the client reads it (instead of ``body``): large content.
    public var stream: HTTPBodyStream?

    public init(
        status: Int, headers: [(String, String)] = [], body: ByteBuffer = ByteBuffer(), stream: HTTPBodyStream? = nil
    ) {
        self.status = status
        self.headers = headers
        self.body = body
        self.stream = stream
    }
}

/// A response body of `contentLength` bytes that `produce` writes chunk by chunk; each
/// ``HTTPBodyWriter/write(_:)`` returns once the transport has taken the chunk (HTTP/2: framed
/// within the stream's flow control; HTTP/1.1: written to the connection), so a slow reader
/// slows the producer and memory stays at about one chunk. A failure resets the stream (HTTP/2)
/// or closes the connection (HTTP/1.1): the client sees a body shorter than `content-length`.
public struct HTTPBodyStream: Sendable {
    public var contentLength: Int
    public var produce: @Sendable (HTTPBodyWriter) async throws -> Void

    public init(contentLength: Int, produce: @escaping @Sendable (HTTPBodyWriter) async throws -> Void) {
        self.contentLength = contentLength
        self.produce = produce
    }
}

/// Hands the chunks of an ``HTTPBodyStream`` to the transport.
public struct HTTPBodyWriter: Sendable {
    let sink: @Sendable (ByteBuffer) async throws -> Void

    /// Writes one chunk; returns once the transport has taken it.
    public func write(_ chunk: ByteBuffer) async throws { try await sink(chunk) }
}

/// Answers one whole request. Served over HTTP/2 and, when the server offers it, HTTP/1.1.
public typealias HTTPRequestHandler = @Sendable (HTTPRequest) async -> HTTPResponse

/// Decides from a request's headers alone, before any of its body is read, whether to refuse
/// it: returns the answer (e.g. 401 without a valid token, 400 for a repeated header) or nil to
/// go on. The request's ``HTTPRequest/body`` is empty. Runs on the connection's event loop:
/// must not block.
public typealias HTTPHeaderCheck = @Sendable (HTTPRequest) -> HTTPResponse?

/// Like ``HTTPHeaderCheck``, for a decision that must wait (e.g. a session token looked up in
/// the store): runs off the event loop, for requests that announce a body, after the
/// ``HTTPHeaderCheck``; no body byte is read from the client until it answers (HTTP/2: the
/// body waits against the stream's window; HTTP/1.1: the socket is not read).
public typealias HTTPAwaitedHeaderCheck = @Sendable (HTTPRequest) async -> HTTPResponse?

/// Decides from a request's headers (body empty, on the connection's event loop: must not
/// block) whether its body is streamed to the handler (``HTTPRequest/bodyStream``) rather than
/// collected: returns the most bytes that body may have, or nil to collect it as usual.
public typealias HTTPStreamedBodyRule = @Sendable (HTTPRequest) -> UInt64?

/// A request-level route: its handler, the largest body it takes, and what it refuses before
/// reading a body.
///
/// Bodies are bounded where they enter: a request refused by ``headerCheck``, or declaring a
/// `content-length` over ``maxBodyBytes``, is answered at once (the latter by the handler, with
/// ``HTTPRequest/bodyTooLarge``) without its body being read; a body that grows past
/// ``maxBodyBytes`` as it arrives is answered the same way at that moment. Then the request side
/// is stopped: HTTP/2 resets the stream with NO_ERROR once the answer is framed (RFC 9113 §8.1),
/// HTTP/1.1 stops reading and closes the connection after the answer.
public struct HTTPRequestRoute: Sendable {
    public var maxBodyBytes: Int
    public var headerCheck: HTTPHeaderCheck?
    public var awaitedHeaderCheck: HTTPAwaitedHeaderCheck?
    /// Requests whose body the handler reads as it arrives (uploads larger than memory): for
    /// them the rule's limit replaces ``maxBodyBytes``, checked against a declared
    /// `content-length` before the body is read and again while its bytes are counted.
    public var streamedBodyLimit: HTTPStreamedBodyRule?
    public var handler: HTTPRequestHandler

    /// Unread bytes of a streamed body held before the transport stops reading it.
    public static let streamedBodyHighWater = 256 * 1024
    /// How long a streamed HTTP/2 body may deliver nothing while the handler waits for it
    /// (HTTP/1.1 uses ``HTTP1Settings/requestTimeout`` from the last byte).
    public static let streamedBodyStallTimeout: TimeAmount = .seconds(30)

    public init(maxBodyBytes: Int, headerCheck: HTTPHeaderCheck? = nil, handler: @escaping HTTPRequestHandler) {
        self.maxBodyBytes = maxBodyBytes
        self.headerCheck = headerCheck
        self.handler = handler
    }

    /// The answer due before any body byte is read, if any: ``headerCheck``'s refusal, or
    /// (`declaredTooLarge`) a declared `content-length` over ``maxBodyBytes``, which the handler
    /// answers.
    func refusalBeforeBody(_ request: HTTPRequest, limit: UInt64? = nil) -> (
        refusal: HTTPResponse?, declaredTooLarge: Bool
    ) {
        if let refusal = headerCheck?(request) { return (refusal, false) }
        let declared = request.headers.values("content-length")
        // Several differing content-length values are a malformed request (RFC 9110 §8.6).
        if declared.count > 1, Set(declared).count > 1 {
            return (
                HTTPResponse(
                    status: 400, headers: [("content-type", "text/plain")],
                    body: ByteBuffer(string: "conflicting content-length values\n")), false
            )
        }
        if let first = declared.first {
            guard let length = UInt64(first) else {
                return (
                    HTTPResponse(
                        status: 400, headers: [("content-type", "text/plain")],
                        body: ByteBuffer(string: "content-length is not a number\n")), false
                )
            }
            if length > (limit ?? UInt64(maxBodyBytes)) { return (nil, true) }
        }
        return (nil, false)
    }

    /// The route as an HTTP/2 stream handler: refuses before the body when it can, else collects
    /// the body (bounded), runs the handler, sends the response.
    func streamHandler() -> TransportStreamHandler {
        let route = self
        return { stream in
            var headers = HeaderFields()
            for field in stream.requestHeaders where !field.name.hasPrefix(":") {
                headers.append(field.name, field.value)
            }
            if headers["host"] == nil, let authority = stream.requestHeaders[":authority"] {
                headers.append("host", authority)
            }
            let head = HTTPRequest(
                method: stream.method, path: stream.path, headers: headers, body: ByteBuffer(),
                httpVersion: "2", remoteAddress: stream.remoteAddress)
            let streamedLimit = route.streamedBodyLimit?(head)
            let early = route.refusalBeforeBody(head, limit: streamedLimit)
            if let refusal = early.refusal {
                // No delegate: the body waits unread against the stream's small window until
                // the reset releases it.
                Self.send(refusal, on: stream)
                return
            }
            if early.declaredTooLarge {
                var request = head
                request.bodyTooLarge = true
                Task { Self.send(await route.handler(request), on: stream) }
                return
            }
            if let streamedLimit {
                Self.streamBody(of: stream, head: head, limit: streamedLimit, route: route)
                return
            }
            let collector = RequestBodyCollector(maxBytes: route.maxBodyBytes) { body, tooLarge in
                var request = head
                request.body = body
                request.bodyTooLarge = tooLarge
                Task { Self.send(await route.handler(request), on: stream) }
            }
            guard let awaited = route.awaitedHeaderCheck, !stream.inboundEnded else {
                stream.delegate = collector
                return
            }
            // No delegate until the check answers: the body waits unread against the window.
            let box = NIOLoopBound(collector, eventLoop: stream.eventLoop)
            Task {
                let refusal = await awaited(head)
                stream.eventLoop.execute {
                    if let refusal {
                        Self.send(refusal, on: stream)
                    } else {
                        stream.delegate = box.value
                    }
                }
            }
        }
    }

    /// A streamed request: after the awaited header check (if any) lets it through, the handler
    /// runs at once with the body as it arrives; the stream's window is opened for throughput.
    private static func streamBody(of stream: TransportStream, head: HTTPRequest, limit: UInt64, route: Self) {
        let start: @Sendable () -> Void = {
            let source = HTTPRequestBodySource(
                limit: limit, highWater: streamedBodyHighWater, pause: { stream.pauseInbound() },
                resume: { stream.resumeInbound() })
            stream.delegate = StreamedRequestBodyDelegate(
                source: source, stream: stream, stallTimeout: streamedBodyStallTimeout)
            stream.openReceiveWindow()
            var request = head
            request.bodyStream = HTTPRequestBody(source: source)
            Task { Self.send(await route.handler(request), on: stream) }
        }
        guard let awaited = route.awaitedHeaderCheck, !stream.inboundEnded else {
            start()
            return
        }
        // No delegate until the check answers: the body waits unread against the window.
        Task {
            let refusal = await awaited(head)
            stream.eventLoop.execute {
                if let refusal { Self.send(refusal, on: stream) } else { start() }
            }
        }
    }

    /// Sends `response` on `stream`; when the request's body has not all arrived, then resets the
    /// stream with NO_ERROR once the answer is framed, so the client stops sending (RFC 9113 §8.1).
    static func send(_ response: HTTPResponse, on stream: TransportStream) {
        var fields = HeaderFields([(":status", "\(response.status)")])
        for (name, value) in response.headers { fields.append(name, value) }
        if let body = response.stream {
            fields.append("content-length", "\(body.contentLength)")
            stream.sendHeaders(fields, endStream: body.contentLength == 0)
            guard body.contentLength > 0 else {
                stopRequest(stream, after: stream.eventLoop.makeSucceededVoidFuture())
                return
            }
            Task {
                do {
                    try await body.produce(HTTPBodyWriter { chunk in try await stream.write(chunk).get() })
                    stream.finish()
                } catch {
                    stream.reset(code: 0x2)  // INTERNAL_ERROR: the body is cut short
                }
            }
            return
        }
        fields.append("content-length", "\(response.body.readableBytes)")
        if response.body.readableBytes == 0 {
            stream.sendHeaders(fields, endStream: true)
            stopRequest(stream, after: stream.eventLoop.makeSucceededVoidFuture())
        } else {
            stream.sendHeaders(fields)
            let framed = stream.write(response.body)
            stream.finish()
            stopRequest(stream, after: framed)
        }
    }

    /// Once `answered` completes (on the stream's event loop, after the answer was submitted),
    /// resets a stream whose request side is still open.
    private static func stopRequest(_ stream: TransportStream, after answered: EventLoopFuture<Void>) {
        answered.hop(to: stream.eventLoop).whenSuccess {
            if !stream.inboundEnded && !stream.isClosed { stream.reset(code: 0) }
        }
    }
}

/// Collects a request body up to a bound; past it, reports the overflow at once (the body is
/// not waited for) and stops reading: the stream stays paused until the answer resets it.
final class RequestBodyCollector: TransportStreamDelegate {
    private let maxBytes: Int
    private let done: (ByteBuffer, Bool) -> Void
    private var body = ByteBuffer()
    private var tooLarge = false
    private var finished = false

    init(maxBytes: Int, done: @escaping (ByteBuffer, Bool) -> Void) {
        self.maxBytes = maxBytes
        self.done = done
    }

    func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
        guard !tooLarge, !finished else { return }
        if body.readableBytes + data.readableBytes > maxBytes {
            tooLarge = true
            finished = true
            body = ByteBuffer()
            stream.pauseInbound()
            done(ByteBuffer(), true)
            return
        }
        var data = data
        body.writeBuffer(&data)
    }

    func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) {
        guard !finished else { return }
        finished = true
        done(body, tooLarge)
    }

    func streamDidClose(_ stream: TransportStream, error: TransportError?) { finished = true }
}
