import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

@testable import LaminaTransport

/// A TLS connection (ALPN http/1.1) on which the test writes raw request bytes (what curl would
/// not send: repeated or missing Host, two Authorization headers, a body that never ends) and
/// reads the raw answer. Optionally from another loopback source address (127.0.0.2).
final class RawHTTP1Client: @unchecked Sendable {
    let channel: Channel
    private let collector: Collector

    private init(channel: Channel, collector: Collector) {
        self.channel = channel
        self.collector = collector
    }

    static func connect(host: String = "127.0.0.1", port: Int, caFile: String, from source: String? = nil)
        async throws -> RawHTTP1Client
    {
        var configuration = TLSConfiguration.client(trust: .caFile(caFile))
        configuration.offersHTTP1 = true
        let tls = try TLSContext(configuration)
        let collector = Collector()
        var bootstrap = ClientBootstrap(group: Fixtures.group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        TLSHandler(context: tls, serverHostname: "localhost"))
                    try channel.pipeline.syncOperations.addHandler(collector)
                }
            }
        if let source { bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: source, port: 0)) }
        let channel = try await bootstrap.connect(host: host, port: port).get()
        try await collector.handshake.futureResult.get()
        return RawHTTP1Client(channel: channel, collector: collector)
    }

    /// Writes `text` (CRLF line ends are the caller's) and waits until it is written.
    func send(_ text: String) async throws { try await channel.writeAndFlush(ByteBuffer(string: text)).get() }

    func send(_ bytes: [UInt8]) async throws { try await channel.writeAndFlush(ByteBuffer(bytes: bytes)).get() }

    /// The answer's status once its head has arrived (nil: the connection closed first).
    func status(timeout: Duration = .seconds(30)) async throws -> Int? {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while true {
            let (text, closed) = collector.snapshot()
            if let end = text.range(of: "\r\n\r\n") {
                let statusLine = text[..<end.lowerBound].split(separator: "\r\n").first ?? ""
                return statusLine.split(separator: " ").dropFirst().first.flatMap { Int($0) }
            }
            if closed { return nil }
            guard clock.now < deadline else { throw SyncTestTimeout(waitingFor: "an HTTP/1.1 answer") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Everything received so far.
    var received: String { collector.snapshot().0 }

    /// Completes when the connection is closed.
    var closed: EventLoopFuture<Void> { channel.closeFuture }

    func close() async { try? await channel.close() }

    private final class Collector: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let handshake: EventLoopPromise<Void> = Fixtures.group.next().makePromise()
        private let lock = NIOLock()
        private var bytes: [UInt8] = []
        private var isClosed = false

        func snapshot() -> (String, Bool) { lock.withLock { (String(decoding: bytes, as: UTF8.self), isClosed) } }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if event is TLSHandshakeCompleted { handshake.succeed() }
            context.fireUserInboundEventTriggered(event)
        }

        func errorCaught(context: ChannelHandlerContext, error: Error) {
            handshake.fail(error)
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            handshake.fail(TransportError(.connectionClosed, "closed"))
            lock.withLock { isClosed = true }
            context.fireChannelInactive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            lock.withLock { bytes += buffer.readableBytesView }
        }
    }
}
