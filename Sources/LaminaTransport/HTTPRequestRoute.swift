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

/// A request-level route: its handler and the largest body it takes.
public struct HTTPRequestRoute: Sendable {
    public var maxBodyBytes: Int
    public var handler: HTTPRequestHandler

    public init(maxBodyBytes: Int, handler: @escaping HTTPRequestHandler) {
        self.maxBodyBytes = maxBodyBytes
        self.handler = handler
    }

    /// The route as an HTTP/2 stream handler: collects the body (bounded), runs the handler,
    /// sends the response.
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
            let collector = RequestBodyCollector(maxBytes: route.maxBodyBytes) { body, tooLarge in
                let request = HTTPRequest(
                    method: stream.method, path: stream.path, headers: headers, body: body, bodyTooLarge: tooLarge,
                    httpVersion: "2", remoteAddress: stream.remoteAddress)
                Task {
                    let response = await route.handler(request)
                    var fields = HeaderFields([(":status", "\(response.status)")])
                    for (name, value) in response.headers { fields.append(name, value) }
                    if let body = response.stream {
                        fields.append("content-length", "\(body.contentLength)")
                        stream.sendHeaders(fields, endStream: body.contentLength == 0)
                        guard body.contentLength > 0 else { return }
                        do {
                            try await body.produce(HTTPBodyWriter { chunk in try await stream.write(chunk).get() })
                            stream.finish()
                        } catch {
                            stream.reset(code: 0x2)  // INTERNAL_ERROR: the body is cut short
                        }
                        return
                    }
                    fields.append("content-length", "\(response.body.readableBytes)")
                    if response.body.readableBytes == 0 {
                        stream.sendHeaders(fields, endStream: true)
                    } else {
                        stream.sendHeaders(fields)
                        stream.write(response.body, promise: nil)
                        stream.finish()
                    }
                }
            }
            stream.delegate = collector
        }
    }
}

/// Collects a request body up to a bound; past it, keeps reading (so the client can finish
/// sending) but drops the bytes, and reports the overflow.
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
        guard !tooLarge else { return }
        if body.readableBytes + data.readableBytes > maxBytes {
            tooLarge = true
            body = ByteBuffer()
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
