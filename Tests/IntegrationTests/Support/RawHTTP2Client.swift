import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

@testable import LaminaTransport

/// A TLS connection that speaks HTTP/2 by hand: the test writes raw frames (what no
/// well-behaved HTTP/2 library would send: empty DATA floods, no stream at all) and reads
/// the frames the node answers with. Also a plain TCP connection that never starts TLS.
final class RawHTTP2Client: @unchecked Sendable {
    let channel: Channel
    private let collector: Collector

    /// One HTTP/2 frame as received.
    struct RawFrame: Sendable, Equatable {
        var type: UInt8
        var flags: UInt8
        var stream: UInt32
        var payload: [UInt8]

        /// GOAWAY's error code.
        var goAwayCode: UInt32? {
            guard type == 0x7, payload.count >= 8 else { return nil }
            return payload[4..<8].reduce(0) { $0 << 8 | UInt32($1) }
        }
    }

    private init(channel: Channel, collector: Collector) {
        self.channel = channel
        self.collector = collector
    }

    /// TLS (ALPN h2) to `host:port`, trusting `caFile`; returns once the handshake is done.
    /// Nothing of HTTP/2 is sent yet.
    /// `source`: the local address to connect from (another loopback address, 127.0.0.2).
    static func connect(host: String = "127.0.0.1", port: Int, caFile: String, from source: String? = nil)
        async throws -> RawHTTP2Client
    {
        let tls = try TLSContext(.client(trust: .caFile(caFile)))
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
        return RawHTTP2Client(channel: channel, collector: collector)
    }

    /// A plain TCP connection (no TLS ever): what a connection flood holds.
    static func tcp(host: String = "127.0.0.1", port: Int) async throws -> Channel {
        try await ClientBootstrap(group: Fixtures.group).connect(host: host, port: port).get()
    }

    // MARK: frames

    static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    static func frame(type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, payload: [UInt8] = []) -> [UInt8] {
        let n = payload.count
        return [
            UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff), type, flags,
            UInt8(stream >> 24 & 0x7f), UInt8(stream >> 16 & 0xff), UInt8(stream >> 8 & 0xff), UInt8(stream & 0xff),
        ]
            + payload
    }

    /// HEADERS (END_HEADERS) opening `POST path` on `stream`, HPACK without indexing.
    static func postHeaders(stream: UInt32, path: String) -> [UInt8] {
        var block: [UInt8] = [0x83, 0x87]  // :method POST, :scheme https (static table)
        block += [0x04, UInt8(path.utf8.count)] + Array(path.utf8)  // :path, literal
        block += [0x01, 9] + Array("localhost".utf8)  // :authority, literal
        return frame(type: 0x1, flags: 0x4, stream: stream, payload: block)
    }

    /// HEADERS (END_HEADERS) opening `PUT path` on `stream` (`:method` as a literal).
    static func putHeaders(stream: UInt32, path: String) -> [UInt8] {
        var block: [UInt8] = [0x02, 3] + Array("PUT".utf8) + [0x87]  // :method PUT, :scheme https
        block += [0x04, UInt8(path.utf8.count)] + Array(path.utf8)  // :path, literal
        block += [0x01, 9] + Array("localhost".utf8)  // :authority, literal
        return frame(type: 0x1, flags: 0x4, stream: stream, payload: block)
    }

    /// The client preface and an empty SETTINGS.
    func sendPreface() { write(Self.preface + Self.frame(type: 0x4)) }

    func write(_ bytes: [UInt8]) {
        channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
    }

    /// Writes `bytes` and completes once they are written (or the connection failed).
    func writeAndWait(_ bytes: [UInt8]) async {
        try? await channel.writeAndFlush(ByteBuffer(bytes: bytes)).get()
    }

    /// Waits until a frame matching `predicate` arrives; nil if the connection closes first.
    func frame(where predicate: @escaping @Sendable (RawFrame) -> Bool, timeout: TimeAmount = .seconds(30)) async throws
        -> RawFrame?
    {
        try await collector.wait(for: predicate, timeout: timeout, on: channel.eventLoop)
    }

    /// Completes when the connection is closed.
    var closed: EventLoopFuture<Void> { channel.closeFuture }

    func close() async { try? await channel.close() }

    // MARK: collector

    private final class Collector: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let handshake: EventLoopPromise<Void> = Fixtures.group.next().makePromise()
        private let lock = NIOLock()
        private var buffer = ByteBuffer()
        private var frames: [RawFrame] = []
        private var isClosed = false
        private var waiters: [(predicate: @Sendable (RawFrame) -> Bool, promise: EventLoopPromise<RawFrame?>)] = []

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
            let pending = lock.withLock { () -> [EventLoopPromise<RawFrame?>] in
                isClosed = true
                defer { waiters.removeAll() }
                return waiters.map(\.promise)
            }
            for promise in pending { promise.succeed(nil) }
            context.fireChannelInactive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = unwrapInboundIn(data)
            buffer.writeBuffer(&bytes)
            var parsed: [RawFrame] = []
            while buffer.readableBytes >= 9 {
                let header = buffer.getBytes(at: buffer.readerIndex, length: 9)!
                let length = Int(header[0]) << 16 | Int(header[1]) << 8 | Int(header[2])
                guard buffer.readableBytes >= 9 + length else { break }
                buffer.moveReaderIndex(forwardBy: 9)
                let payload = buffer.readBytes(length: length)!
                let stream =
                    UInt32(header[5] & 0x7f) << 24 | UInt32(header[6]) << 16 | UInt32(header[7]) << 8
                    | UInt32(header[8])
                parsed.append(RawFrame(type: header[3], flags: header[4], stream: stream, payload: payload))
            }
            buffer.discardReadBytes()
            var resolved: [(EventLoopPromise<RawFrame?>, RawFrame)] = []
            lock.withLock {
                for frame in parsed {
                    if let index = waiters.firstIndex(where: { $0.predicate(frame) }) {
                        resolved.append((waiters.remove(at: index).promise, frame))
                    } else {
                        frames.append(frame)
                    }
                }
            }
            for (promise, frame) in resolved { promise.succeed(frame) }
        }

        func wait(for predicate: @escaping @Sendable (RawFrame) -> Bool, timeout: TimeAmount, on loop: EventLoop)
            async throws -> RawFrame?
        {
            let promise = loop.makePromise(of: RawFrame?.self)
            let immediate: RawFrame?? = lock.withLock {
                if let index = frames.firstIndex(where: predicate) { return .some(frames.remove(at: index)) }
                if isClosed { return .some(nil) }
                waiters.append((predicate, promise))
                return nil
            }
            if let immediate {
                promise.succeed(immediate)
            } else {
                let timer = loop.scheduleTask(in: timeout) {
                    promise.fail(SyncTestTimeout(waitingFor: "an HTTP/2 frame"))
                }
                promise.futureResult.whenComplete { _ in timer.cancel() }
            }
            return try await promise.futureResult.get()
        }
    }
}
