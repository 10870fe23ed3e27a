import CNghttp2
import NIOCore

/// Receives a stream's inbound events, on the stream's event loop, in order.
/// Data arrives only while the stream is not paused; bytes count against the HTTP/2
/// window until this callback has taken them, so a slow consumer slows the sender.
public protocol TransportStreamDelegate: AnyObject {
    /// Client role: the final response headers (`:status` included).
    func streamDidReceiveHeaders(_ stream: TransportStream, headers: HeaderFields)
    /// A chunk of the inbound body.
    func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer)
    /// The peer finished its side (END_STREAM), with trailers if it sent any.
    func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?)
    /// Outbound queue fell back under the high-water mark: writing may continue.
    func streamWritabilityDidChange(_ stream: TransportStream, isWritable: Bool)
    /// The stream is closed; `error` is nil after a clean end on both sides. Always the last call.
    func streamDidClose(_ stream: TransportStream, error: TransportError?)
}

extension TransportStreamDelegate {
    public func streamDidReceiveHeaders(_ stream: TransportStream, headers: HeaderFields) {}
    public func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {}
    public func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) {}
    public func streamWritabilityDidChange(_ stream: TransportStream, isWritable: Bool) {}
    public func streamDidClose(_ stream: TransportStream, error: TransportError?) {}
}

/// One HTTP/2 stream, on either side. State lives on ``eventLoop``: read properties there
/// (inside delegate callbacks or handlers you are); the mutating methods may be called from
/// anywhere and hop to the event loop when needed.
public final class TransportStream: @unchecked Sendable {
    enum InboundEvent {
        case request
        case headers(HeaderFields)
        case data(ByteBuffer)
        case end(HeaderFields?)
    }

    /// The HTTP/2 stream identifier.
    public internal(set) var id: Int32
    /// The event loop that owns this stream and its connection.
    public let eventLoop: EventLoop
    /// The request: on a server, what the client sent; on a client, what was sent.
    public internal(set) var requestHeaders: HeaderFields
    /// The response: on a client, what the server sent (nil until then); on a server, what was sent.
    public internal(set) var responseHeaders: HeaderFields?
    /// The TLS session this stream travels on (peer certificate for mutual TLS).
    public let tlsInfo: TLSConnectionInfo?
    /// The peer's address.
    public let remoteAddress: SocketAddress?
    /// The connection this stream travels on: unique within the process, never reused
    /// (per-connection accounting keys on it).
    public let connectionID: UInt64

    /// The request's `:method`.
    public var method: String { requestHeaders[":method"] ?? "" }
    /// The request's `:path` (with query).
    public var path: String { requestHeaders[":path"] ?? "" }

    /// Receives inbound events. Setting it delivers anything already buffered.
    public var delegate: TransportStreamDelegate? {
        get { _delegate }
        set {
            eventLoop.preconditionInEventLoop()
            _delegate = newValue
            if let newValue, closeDelivered {
                newValue.streamDidClose(self, error: closeError)
            } else {
                connection?.scheduleDelivery(self)
            }
        }
    }

    /// Inbound body bytes received but not yet handed to the delegate (bounded by the stream window).
    public internal(set) var inboundBufferedBytes = 0
    /// Outbound body bytes queued but not yet taken by HTTP/2 framing.
    public internal(set) var outboundBufferedBytes = 0
    /// False once ``outboundBufferedBytes`` reaches the high-water mark; writes are still
    /// accepted, but a producer should wait for ``TransportStreamDelegate/streamWritabilityDidChange(_:isWritable:)``.
    public internal(set) var isWritable = true
    /// Whether the stream has closed (delivered to the delegate).
    public var isClosed: Bool { closeDelivered }

    /// Completes when the stream closes: succeeds after a clean end, fails with the reset or
    /// connection error otherwise.
    public var closeFuture: EventLoopFuture<Void> {
        eventLoop.preconditionInEventLoop()
        if let closePromise { return closePromise.futureResult }
        if closeCompleted {
            if let closeError { return eventLoop.makeFailedFuture(closeError) }
            return eventLoop.makeSucceededVoidFuture()
        }
        let promise = eventLoop.makePromise(of: Void.self)
        closePromise = promise
        return promise.futureResult
    }

    // MARK: internal state (event loop only)

    var _delegate: TransportStreamDelegate?
    /// Strong until the stream's close is delivered (or the connection tears down), then nil:
    /// no weak reference, so the handler's retain/release stay on the fast path.
    var connection: HTTP2ConnectionHandler?
    let isServerSide: Bool
    var inbound = StreamQueue<InboundEvent>()
    /// `inbound` may hold a slice of a plaintext buffer (compacted when the stream pauses).
    var inboundHoldsSlices = false
    var isPaused = false
    var queuedForDelivery = false
    var pendingHeaders = HeaderFields()
    var pendingHeaderBytes = 0
    var sawFinalResponse = false
    /// The peer's END_STREAM was received (the inbound side is complete).
    var inboundEnded = false
    var sessionCloseCode: UInt32?
    var closeError: TransportError?
    var closeDelivered = false
    var closeCompleted = false
    /// Made only when someone asks for ``closeFuture`` (one allocation fewer per stream).
    var closePromise: EventLoopPromise<Void>?

    var outbound = StreamQueue<PendingWrite>()
    var outboundFinished = false
    /// RST_STREAM was submitted: nothing more is queued for the stream.
    var resetSubmitted = false
    /// ``openReceiveWindow()`` took effect.
    var receiveWindowOpened = false
    var outboundTrailers: HeaderFields?
    var dataDeferred = false
    var headersSent = false

    init(
        id: Int32, connection: HTTP2ConnectionHandler, eventLoop: EventLoop, isServerSide: Bool,
        requestHeaders: HeaderFields, tlsInfo: TLSConnectionInfo?, remoteAddress: SocketAddress?
    ) {
        self.id = id
        self.connectionID = connection.connectionID
        self.connection = connection
        self.eventLoop = eventLoop
        self.isServerSide = isServerSide
        self.requestHeaders = requestHeaders
        self.tlsInfo = tlsInfo
        self.remoteAddress = remoteAddress
    }

    private func onLoop(_ body: @escaping @Sendable () -> Void) {
        if eventLoop.inEventLoop { body() } else { eventLoop.execute(body) }
    }

    // MARK: outbound API

    /// Server role: sends the response headers (must contain `:status`). With `endStream`
    /// the response has no body.
    public func sendHeaders(_ headers: HeaderFields, endStream: Bool = false) {
        if eventLoop.inEventLoop {
            connection?.sendResponseHeaders(self, headers, endStream: endStream)
        } else {
            eventLoop.execute { self.connection?.sendResponseHeaders(self, headers, endStream: endStream) }
        }
    }

    /// Queues a body chunk. `promise` completes once HTTP/2 framing has taken the bytes
    /// (they are then in the connection's send path), or fails if the stream closes first.
    public func write(_ data: ByteBuffer, promise: EventLoopPromise<Void>? = nil) {
        write(data, promise: promise, flushNow: false)
    }

    /// Queues a body chunk as ``write(_:promise:)`` does, and writes what the connection has
    /// queued in this turn of the event loop rather than a later one: for a caller that
    /// gathered its chunks itself (one turn, one write, instead of two turns).
    public func writeAndFlush(_ data: ByteBuffer, promise: EventLoopPromise<Void>? = nil) {
        write(data, promise: promise, flushNow: true)
    }

    private func write(_ data: ByteBuffer, promise: EventLoopPromise<Void>?, flushNow: Bool) {
        if eventLoop.inEventLoop {
            writeOnLoop(data, promise: promise, flushNow: flushNow)
        } else {
            eventLoop.execute { self.writeOnLoop(data, promise: promise, flushNow: flushNow) }
        }
    }

    private func writeOnLoop(_ data: ByteBuffer, promise: EventLoopPromise<Void>?, flushNow: Bool) {
        guard let connection else {
            promise?.fail(closeError ?? TransportError(.connectionClosed, "the stream is closed"))
            return
        }
        connection.write(self, data, promise: promise, flushNow: flushNow)
    }

    /// Buffers of frames the stream's connection has handed to TLS so far, each one TLS
    /// write and one socket write (0 once the stream is closed). For tests and measurements;
    /// event loop only.
    public var connectionWrites: Int { connection?.outputWrites ?? 0 }

    /// Queues a body chunk; the future completes as ``write(_:promise:)``'s promise does.
    public func write(_ data: ByteBuffer) -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        write(data, promise: promise)
        return promise.futureResult
    }

    /// Ends our side of the stream after the queued body, with optional trailers.
    /// On a server that has sent no headers yet, `:status: 200` goes first.
    public func finish(trailers: HeaderFields? = nil) {
        if eventLoop.inEventLoop {
            connection?.finish(self, trailers: trailers)
        } else {
            eventLoop.execute { self.connection?.finish(self, trailers: trailers) }
        }
    }

    /// Resets the stream (RST_STREAM) with an HTTP/2 error code (default CANCEL).
    public func reset(code: UInt32 = 0x8) {
        onLoop { self.connection?.reset(self, code: code) }
    }

    /// Raises the stream's receive window to ``HTTP2Settings/openedStreamWindow`` (a
    /// WINDOW_UPDATE for the difference; nothing when it is already that large).
    public func openReceiveWindow() {
        onLoop { self.connection?.openReceiveWindow(self) }
    }

    /// While the connection's output waits for its socket, the last time its peer was seen
    /// reading any of it (the stream's own bytes wait their turn behind the socket then);
    /// nil while the connection writes freely (what this stream holds then waits for the
    /// peer to open this stream's window). Read on ``eventLoop``.
    public var socketProgressWhileBlocked: NIODeadline? {
        eventLoop.preconditionInEventLoop()
        guard let connection, connection.waitsForSocket else { return nil }
        return connection.lastSocketProgress
    }

    /// How the peer reads this stream's connection, for a stream that has nothing of its own
    /// queued: whether the connection holds output that waits for the peer (its streams' bytes
    /// beyond the peer's windows, or bytes waiting for the socket), and the last time the peer
    /// was seen reading any of the connection (a stream's WINDOW_UPDATE of at least 1 KiB, or,
    /// while output waits for the socket, the socket moving). Nil once the stream is closed. Read on ``eventLoop``.
    public var connectionReading: (holdsOutput: Bool, lastRead: NIODeadline)? {
        eventLoop.preconditionInEventLoop()
        guard let connection else { return nil }
        // The socket moving is reading only while output waits for it: otherwise it shows the
        // peer's TCP taking bytes its application may never read (held output then waits for
        // the peer's windows, which only its reading reopens).
        let waitsForSocket = connection.waitsForSocket
        return (
            waitsForSocket || connection.holdsOutputForPeer,
            waitsForSocket
                ? max(connection.lastWindowUpdate, connection.lastSocketProgress) : connection.lastWindowUpdate
        )
    }

    /// Stops delivering inbound data; the peer stalls once the stream window is used up.
    public func pauseInbound() {
        onLoop { self.isPaused = true }
    }

    /// Resumes delivery (and with it window updates to the peer).
    public func resumeInbound() {
        onLoop {
            guard self.isPaused else { return }
            self.isPaused = false
            self.connection?.scheduleDelivery(self)
        }
    }

    // MARK: conveniences for the async edges

    /// Collects the whole inbound body (refusing more than `maxBytes`) and, on a client,
    /// the response headers. Replaces the delegate.
    public func collect(maxBytes: Int) -> EventLoopFuture<(headers: HeaderFields?, body: ByteBuffer)> {
        let promise = eventLoop.makePromise(of: (headers: HeaderFields?, body: ByteBuffer).self)
        onLoop { self.delegate = BodyCollector(maxBytes: maxBytes, promise: promise) }
        return promise.futureResult
    }
}

/// Delegate used by ``TransportStream/collect(maxBytes:)``.
final class BodyCollector: TransportStreamDelegate {
    let maxBytes: Int
    let promise: EventLoopPromise<(headers: HeaderFields?, body: ByteBuffer)>
    var body = ByteBuffer()
    var headers: HeaderFields?
    var done = false

    init(maxBytes: Int, promise: EventLoopPromise<(headers: HeaderFields?, body: ByteBuffer)>) {
        self.maxBytes = maxBytes
        self.promise = promise
    }

    func streamDidReceiveHeaders(_ stream: TransportStream, headers: HeaderFields) { self.headers = headers }

    func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
        guard !done else { return }
        if body.readableBytes + data.readableBytes > maxBytes {
            done = true
            promise.fail(TransportError(.limitExceeded, "body larger than \(maxBytes) bytes"))
            stream.reset(code: 0x8)
            return
        }
        var data = data
        body.writeBuffer(&data)
    }

    func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) {
        guard !done else { return }
        done = true
        promise.succeed((headers ?? stream.responseHeaders, body))
    }

    func streamDidClose(_ stream: TransportStream, error: TransportError?) {
        guard !done else { return }
        done = true
        promise.fail(error ?? TransportError(.connectionClosed, "the stream closed before its end"))
    }
}
