import LaminaTransport
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// ``TransportWriteBatch``: chunks for several streams of one connection, queued in one turn
/// of the event loop, leave in one write of the connection (one TLS write, one socket write),
/// and each stream's bytes arrive complete and in order.
@Suite struct WriteBatchTests {
    static let streamCount = 4
    static let chunksPerStream = 3

    /// The server's streams of `/hold`, kept open for the test to write to.
    final class Held: Sendable {
        let streams = NIOLockedValueBox<[TransportStream]>([])
    }

    static func chunk(stream: Int, index: Int) -> String { "stream \(stream) chunk \(index);" }

    /// Writes every chunk to the held streams in one event-loop task, through a batch or one
    /// `writeAndFlush` per chunk; returns the connection's writes at the start, before the
    /// flush and after it, and the connections the batch held before its flush.
    static func writeAll(_ streams: [TransportStream], round: Int, batched: Bool) async throws -> (
        Int, Int, Int, Int
    ) {
        let loop = streams[0].eventLoop
        return try await loop.submit { () -> (Int, Int, Int, Int) in
            let start = streams[0].connectionWrites
            var batch = TransportWriteBatch()
            for index in 0..<chunksPerStream {
                for (number, stream) in streams.enumerated() {
                    let data = ByteBuffer(string: chunk(stream: number, index: round * chunksPerStream + index))
                    if batched {
                        batch.write(data, to: stream)
                    } else {
                        stream.writeAndFlush(data)
                    }
                }
            }
            let beforeFlush = streams[0].connectionWrites
            let held = batch.connectionCount
            batch.flush()
            return (start, beforeFlush, streams[0].connectionWrites, held)
        }.get()
    }

    @Test func oneConnectionWriteForEveryStreamInTheBatch() async throws {
        let held = Held()
        var router = TransportRouter()
        router.add("/hold") { stream in
            stream.sendHeaders([(":status", "200")])
            held.streams.withLockedValue { $0.append(stream) }
        }
        let server = try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: Fixtures.serverTLS, router: router, group: Fixtures.group)
        let connection = try await TransportConnection.connect(
            to: "https://localhost:\(server.port)", tls: Fixtures.clientTLS, group: Fixtures.group)
        var clients: [TransportStream] = []
        for _ in 0..<Self.streamCount {
            clients.append(
                try await connection.openStream(method: "POST", path: "/hold", headers: [], endStream: false))
        }
        let bodies = clients.map { $0.inboundBody() }
        let deadline = ContinuousClock.now + .seconds(10)
        while held.streams.withLockedValue({ $0.count }) < Self.streamCount, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        // In the order the client opened them (the server routes them in stream-id order).
        let streams = held.streams.withLockedValue { $0 }.sorted { $0.id < $1.id }
        try #require(streams.count == Self.streamCount)

        // Unbatched: every writeAndFlush is a write of its own.
        let (unbatchedStart, _, unbatchedEnd, none) = try await Self.writeAll(streams, round: 0, batched: false)
        #expect(unbatchedEnd - unbatchedStart == Self.streamCount * Self.chunksPerStream)
        #expect(none == 0)

        // Batched: nothing is written before the flush, then one write for all of it.
        let (start, beforeFlush, end, heldConnections) = try await Self.writeAll(streams, round: 1, batched: true)
        #expect(heldConnections == 1)
        #expect(beforeFlush == start)
        #expect(end - start == 1)

        // Every stream got its six chunks, complete and in order.
        for (number, body) in bodies.enumerated() {
            let expected = (0..<(2 * Self.chunksPerStream)).map { Self.chunk(stream: number, index: $0) }.joined()
            var received = ""
            for try await piece in body {
                received += String(buffer: piece)
                if received.utf8.count >= expected.utf8.count { break }
            }
            #expect(received == expected)
        }
        for stream in streams { stream.finish() }
        for stream in clients { stream.finish() }
        try await connection.close()
        try await server.shutdown()
    }

    @Test func aClosedStreamFailsTheChunkAndTheRestStillLeave() async throws {
        let held = Held()
        var router = TransportRouter()
        router.add("/hold") { stream in
            stream.sendHeaders([(":status", "200")])
            held.streams.withLockedValue { $0.append(stream) }
        }
        let server = try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: Fixtures.serverTLS, router: router, group: Fixtures.group)
        let connection = try await TransportConnection.connect(
            to: "https://localhost:\(server.port)", tls: Fixtures.clientTLS, group: Fixtures.group)
        let open = try await connection.openStream(method: "POST", path: "/hold", headers: [], endStream: false)
        let finished = try await connection.openStream(method: "POST", path: "/hold", headers: [], endStream: false)
        let body = open.inboundBody()
        let deadline = ContinuousClock.now + .seconds(10)
        while held.streams.withLockedValue({ $0.count }) < 2, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        let streams = held.streams.withLockedValue { $0 }.sorted { $0.id < $1.id }
        try #require(streams.count == 2)
        let loop = streams[0].eventLoop
        let (refused, framed) = try await loop.submit {
            () -> (EventLoopFuture<Void>, EventLoopFuture<Void>) in
            streams[1].finish()  // its outbound side is over: a chunk for it is refused
            var batch = TransportWriteBatch()
            let refused = loop.makePromise(of: Void.self)
            let framed = loop.makePromise(of: Void.self)
            batch.write(ByteBuffer(string: "late"), to: streams[1], promise: refused)
            batch.write(ByteBuffer(string: "on time"), to: streams[0], promise: framed)
            batch.flush()
            return (refused.futureResult, framed.futureResult)
        }.get()
        await #expect(throws: TransportError.self) { try await refused.get() }
        try await framed.get()
        var received = ""
        for try await piece in body {
            received += String(buffer: piece)
            if received.utf8.count >= 7 { break }
        }
        #expect(received == "on time")
        streams[0].finish()
        open.finish()
        finished.finish()
        try await connection.close()
        try await server.shutdown()
    }
}
