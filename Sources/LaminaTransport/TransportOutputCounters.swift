import Atomics

/// Process-wide counts of what the transport wrote, every connection and both roles
/// (relaxed atomics, one increment per connection write). Divided by the messages a node
/// carried they say what a message costs the event loop in writes (`/metrics`,
/// `lamina_transport_*`).
public enum TransportOutputCounters {
    /// A reading of the counters.
    public struct Snapshot: Sendable, Equatable {
        /// Ciphertext buffers handed to the socket: one `write` system call each, unless the
        /// socket takes a buffer in parts.
        public var socketWrites: Int
        /// TLS application-data records (each `SSL_write` cuts its plaintext into records of
        /// at most 16 KiB).
        public var tlsRecords: Int
        /// HTTP/2 frames serialized by nghttp2 (each `nghttp2_session_mem_send` chunk).
        public var http2Frames: Int
        /// Connection flushes that wrote: nghttp2's output gathered into one plaintext buffer,
        /// one `SSL_write`.
        public var connectionFlushes: Int
    }

    static let socketWrites = ManagedAtomic<Int>(0)
    static let tlsRecords = ManagedAtomic<Int>(0)
    static let http2Frames = ManagedAtomic<Int>(0)
    static let connectionFlushes = ManagedAtomic<Int>(0)

    /// The counts so far.
    public static var snapshot: Snapshot {
        Snapshot(
            socketWrites: socketWrites.load(ordering: .relaxed), tlsRecords: tlsRecords.load(ordering: .relaxed),
            http2Frames: http2Frames.load(ordering: .relaxed),
            connectionFlushes: connectionFlushes.load(ordering: .relaxed))
    }

    /// The largest plaintext of one TLS record.
    static let maxRecordPlaintext = 16 * 1024

    static func countSocketWrite() { socketWrites.wrappingIncrement(ordering: .relaxed) }

    /// One connection flush that serialized `frames` HTTP/2 frames.
    static func countFlush(frames: Int) {
        connectionFlushes.wrappingIncrement(ordering: .relaxed)
        http2Frames.wrappingIncrement(by: frames, ordering: .relaxed)
    }

    static func countTLSWrite(plaintextBytes: Int) {
        tlsRecords.wrappingIncrement(
            by: (plaintextBytes + maxRecordPlaintext - 1) / maxRecordPlaintext, ordering: .relaxed)
    }
}
