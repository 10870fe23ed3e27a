import NIOCore

/// Body chunks for several streams, gathered on their event loop and written with one flush
/// per connection: what a batch queued on one connection goes out in one nghttp2 send, one
/// TLS write and one socket write, however many streams and chunks it holds. A stream's
/// chunks keep their order, flow control and backpressure apply as to ``TransportStream/write(_:promise:)``.
///
/// Event loop only: every stream written to must be on the event loop the batch runs on,
/// and ``flush()`` must be called before the turn of the loop ends (a chunk queued here is
/// not written until then, unless the connection is inside its own read or flush, which
/// then writes it).
public struct TransportWriteBatch {
    private var connections: [HTTP2ConnectionHandler] = []

    public init() {}

    /// Queues `data` on `stream`; `promise` completes when the chunk is framed, as with
    /// ``TransportStream/write(_:promise:)``, or fails when the stream's outbound side is over.
    public mutating func write(_ data: ByteBuffer, to stream: TransportStream, promise: EventLoopPromise<Void>? = nil) {
        stream.eventLoop.preconditionInEventLoop()
        guard let connection = stream.connection else {
            promise?.fail(stream.closeError ?? TransportError(.connectionClosed, "the stream is closed"))
            return
        }
        if connection.writeBatched(stream, data, promise: promise) { connections.append(connection) }
    }

    /// Connections holding chunks of this batch that are not yet written.
    public var connectionCount: Int { connections.count }

    /// Writes what the batch queued: one flush per connection.
    public mutating func flush() {
        for connection in connections { connection.flushBatch() }
        connections.removeAll(keepingCapacity: true)
    }
}
