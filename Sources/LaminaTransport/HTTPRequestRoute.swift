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

    public init(status: Int, headers: [(String, String)] = [], body: ByteBuffer = ByteBuffer()) {
        self.status = status
        self.headers = headers
        self.body = body
    }
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
            for field in stream.requestHeaders where !field.name.hasPrefix(":") { headers.append(field.name, field.value) }
            if headers["host"] == nil, let authority = stream.requestHeaders[":authority"] { headers.append("host", authority) }
            let collector = RequestBodyCollector(maxBytes: route.maxBodyBytes) { body, tooLarge in
                let request = HTTPRequest(
                    method: stream.method, path: stream.path, headers: headers, body: body, bodyTooLarge: tooLarge,
                    httpVersion: "2", remoteAddress: stream.remoteAddress)
                Task {
                    let response = await route.handler(request)
                    var fields = HeaderFields([(":status", "\(response.status)")])
                    for (name, value) in response.headers { fields.append(name, value) }
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
