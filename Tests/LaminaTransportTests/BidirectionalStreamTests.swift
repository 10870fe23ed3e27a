import LaminaTransport
import NIOCore
import Testing

/// Both ends send and receive length-prefixed frames on one stream at the same time.
/// Each end writes only while the stream is writable and pauses its reading now and then,
/// so both directions run on flow control; buffered bytes are sampled on every callback.
/// Half the batches go out with `writeAndFlush`, half with `write`.
@Suite struct BidirectionalStreamTests {
    static let framesPerSide = 100_000
    static let settings: HTTP2Settings = {
        var settings = HTTP2Settings()
        settings.initialStreamWindow = 64 * 1024
        settings.streamOutboundHighWater = 32 * 1024
        return settings
    }()

    /// One end: pumps its frames (sequence numbers 0..<count, sizes varying) and checks the
    /// peer's arrive complete and in order.
    final class FramePeer: TransportStreamDelegate {
        let count: Int
        let done: EventLoopPromise<Stats>
        var nextToSend = 0
        var nextExpected = 0
        var pending = ByteBuffer()
        var stats = Stats()
        var receivedEnd = false
        var pauses = 0
        var batches = 0

        struct Stats: Sendable {
            var framesReceived = 0
            var maxInboundBuffered = 0
            var maxOutboundBuffered = 0
            var maxDecoderBuffered = 0
            var errors: [String] = []
        }

        init(count: Int, done: EventLoopPromise<Stats>) {
            self.count = count
            self.done = done
        }

        static func payloadSize(_ sequence: Int) -> Int { 8 + (sequence * 7919) % 120 }

        func pump(_ stream: TransportStream) {
            while stream.isWritable && nextToSend < count {
                var batch = ByteBuffer()
                batch.reserveCapacity(4096)
                while batch.readableBytes < 4000 && nextToSend < count {
                    let size = Self.payloadSize(nextToSend)
                    batch.writeInteger(UInt32(size))
                    batch.writeInteger(UInt64(nextToSend))
                    batch.writeRepeatingByte(UInt8(truncatingIfNeeded: nextToSend), count: size - 8)
                    nextToSend += 1
                }
                // Every other batch asks for an immediate flush: from a writability callback
                // (inside the connection's flush), a read (inside its processing) or a fresh
                // turn, which each take a different path.
                batches += 1
                if batches.isMultiple(of: 2) {
                    stream.writeAndFlush(batch, promise: nil)
                } else {
                    stream.write(batch, promise: nil)
                }
                sample(stream)
            }
            if nextToSend == count {
                nextToSend += 1  // finish once
                stream.finish()
            }
        }

        func sample(_ stream: TransportStream) {
            stats.maxInboundBuffered = max(stats.maxInboundBuffered, stream.inboundBufferedBytes)
            stats.maxOutboundBuffered = max(stats.maxOutboundBuffered, stream.outboundBufferedBytes)
            stats.maxDecoderBuffered = max(stats.maxDecoderBuffered, pending.readableBytes)
        }

        func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
            var data = data
            pending.writeBuffer(&data)
            sample(stream)
            while pending.readableBytes >= 4, let size = pending.getInteger(at: pending.readerIndex, as: UInt32.self) {
                guard size >= 8, size <= 1024 else {
                    stats.errors.append("bad frame length \(size)")
                    stream.reset()
                    return
                }
                guard pending.readableBytes >= 4 + Int(size) else { break }
                pending.moveReaderIndex(forwardBy: 4)
                let sequence = Int(pending.readInteger(as: UInt64.self)!)
                let filler = pending.readBytes(length: Int(size) - 8)!
                if sequence != nextExpected || Int(size) != Self.payloadSize(sequence)
                    || filler.contains(where: { $0 != UInt8(truncatingIfNeeded: sequence) })
                {
                    stats.errors.append("frame \(sequence) (expected \(nextExpected)) damaged")
                }
                nextExpected = sequence + 1
                stats.framesReceived += 1
            }
            pending.discardReadBytes()
            // Stall reading now and then so the peer runs into the window.
            if stats.framesReceived / 20_000 > pauses {
                pauses += 1
                stream.pauseInbound()
                stream.eventLoop.execute { stream.resumeInbound() }
            }
            pump(stream)
        }

        func streamWritabilityDidChange(_ stream: TransportStream, isWritable: Bool) {
            pump(stream)
        }

        func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) {
            receivedEnd = true
        }

        func streamDidClose(_ stream: TransportStream, error: TransportError?) {
            if let error { stats.errors.append("closed with \(error)") }
            if !receivedEnd { stats.errors.append("no END_STREAM") }
            if pending.readableBytes != 0 { stats.errors.append("\(pending.readableBytes) trailing bytes") }
            done.succeed(stats)
        }
    }

    @Test func hundredThousandFramesEachWayConcurrently() async throws {
        let serverDone = Fixtures.group.next().makePromise(of: FramePeer.Stats.self)
        var router = TransportRouter()
        router.add("/sync") { stream in
            stream.sendHeaders([(":status", "200")])
            let peer = FramePeer(count: Self.framesPerSide, done: serverDone)
            stream.delegate = peer
            peer.pump(stream)
        }
        let server = try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: Fixtures.serverTLS, router: router, settings: Self.settings,
            group: Fixtures.group)
        defer { _ = server.shutdown() }
        let connection = try await TransportConnection.connect(
            to: "https://localhost:\(server.port)", tls: Fixtures.clientTLS, settings: Self.settings,
            group: Fixtures.group)
        let stream = try await connection.openStream(method: "POST", path: "/sync")
        let clientDone = stream.eventLoop.makePromise(of: FramePeer.Stats.self)
        try await stream.eventLoop.submit {
            let peer = FramePeer(count: Self.framesPerSide, done: clientDone)
            stream.delegate = peer
            peer.pump(stream)
        }.get()

        let client = try await clientDone.futureResult.get()
        let server_ = try await serverDone.futureResult.get()
        for (name, stats) in [("client", client), ("server", server_)] {
            #expect(stats.errors.isEmpty, "\(name): \(stats.errors.prefix(5))")
            #expect(stats.framesReceived == Self.framesPerSide, "\(name)")
            // Memory bounded by flow control: never more buffered than one stream window inbound,
            // the high-water mark plus one batch outbound, and in the decoder one delivered chunk
            // (a paused stream's chunks are delivered as one copy, at most a window) plus one
            // partial frame.
            #expect(stats.maxInboundBuffered <= Int(Self.settings.initialStreamWindow), "\(name): \(stats)")
            #expect(stats.maxOutboundBuffered <= Self.settings.streamOutboundHighWater + 4200, "\(name): \(stats)")
            #expect(stats.maxDecoderBuffered <= Int(Self.settings.initialStreamWindow) + 1024 + 4, "\(name): \(stats)")
            // The producer did run into backpressure (writes stopped at the high-water mark).
            #expect(stats.maxOutboundBuffered >= Self.settings.streamOutboundHighWater, "\(name): \(stats)")
            print("bidirectional \(name): \(stats)")
        }
        try await connection.close()
    }
}
