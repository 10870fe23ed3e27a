import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// How much of a connection's output its peer has received: Linux's
/// `tcp_info.tcpi_bytes_acked`, which grows only as the peer's TCP takes bytes into its
/// receive buffer, that is, as the peer's application reads. A slow reader shows steady
/// progress here even while the local socket buffer drains in the kernel's large steps
/// (a socket becomes writable again only once a third of its send buffer is free: on
/// loopback, megabytes, which a reader of 64 KB/s takes twenty seconds to read).
enum SocketAcknowledgments {
    /// `struct tcp_info` of `<linux/tcp.h>` up to `tcpi_bytes_acked` (at byte 120; the kernel
    /// only ever appends fields, and copies as much as it is asked for). Glibc's older
    /// `tcp_info` ends before that field.
    private typealias Prefix = (
        UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
        UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64
    )
    private static let bytesAckedOffset = 120

    /// The bytes the peer acknowledged so far; nil when the channel is no TCP socket or the
    /// platform does not say.
    static func bytesAcknowledged(by channel: Channel) -> EventLoopFuture<UInt64?> {
        #if os(Linux)
            guard let provider = channel as? SocketOptionProvider else {
                return channel.eventLoop.makeSucceededFuture(nil)
            }
            let info: EventLoopFuture<Prefix> = provider.unsafeGetSocketOption(
                level: SocketOptionLevel(IPPROTO_TCP), name: TCP_INFO)
            return info.map { prefix -> UInt64? in
                withUnsafeBytes(of: prefix) { $0.load(fromByteOffset: bytesAckedOffset, as: UInt64.self) }
            }.recover { _ in nil }
        #else
            return channel.eventLoop.makeSucceededFuture(nil)
        #endif
    }
}
