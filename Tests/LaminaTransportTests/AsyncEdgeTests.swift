import LaminaTransport
import NIOCore
import Testing

/// The async/await edges: an upload written with awaited writes, read on the server as an
/// `InboundBody` async sequence (backpressured), hashed, answered; also routing and URLs.
@Suite struct AsyncEdgeTests {
    @Test func uploadReadAsAsyncSequenceAndHashed() async throws {
        var router = TransportRouter()
        router.add("/upload/*") { stream in
            let body = stream.inboundBody(highWater: 64 * 1024)
            Task {
                do {
                    let hasher = try SHA256Hasher()
                    var total = 0
                    for try await chunk in body {
                        try hasher.update(chunk)
                        total += chunk.readableBytes
                    }
                    let digest = try hasher.finalize().map {
                        String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16)
                    }.joined()
                    stream.sendHeaders([(":status", "200"), ("x-bytes", String(total))])
                    stream.write(ByteBuffer(string: digest), promise: nil)
                    stream.finish(trailers: [("x-done", "yes")])
                } catch {
                    stream.reset()
                }
            }
        }
        let server = try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: Fixtures.serverTLS, router: router, group: Fixtures.group)
        defer { _ = server.shutdown() }
        let connection = try await TransportConnection.connect(
            to: "https://localhost:\(server.port)", tls: Fixtures.clientTLS, group: Fixtures.group)

        let payload = ByteBuffer.random(count: 3 * 1024 * 1024 + 17)
        let stream = try await connection.openStream(
            method: "PUT", path: "/upload/abc?resume=0", headers: [("content-type", "application/octet-stream")])
        let response = stream.inboundBody()
        var offset = 0
        while offset < payload.readableBytes {
            let n = min(100_000, payload.readableBytes - offset)
            try await stream.write(payload.getSlice(at: offset, length: n)!).get()
            offset += n
        }
        stream.finish()
        let headers = try await response.responseHeaders()
        #expect(headers[":status"] == "200")
        #expect(headers["x-bytes"] == String(payload.readableBytes))
        var answer = ByteBuffer()
        for try await var chunk in response { answer.writeBuffer(&chunk) }
        let expected = try SHA256Hasher.hash(Array(payload.readableBytesView))
            .map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        #expect(String(buffer: answer) == expected)
        #expect(response.trailers?["x-done"] == "yes")

        // An unknown path is a 404 from the router.
        let missing = try await connection.openStream(method: "GET", path: "/nothing", endStream: true)
        let notFound = try await missing.collect(maxBytes: 1024).get()
        #expect(notFound.headers?[":status"] == "404")
        try await connection.close()
    }

    @Test func resetReachesTheOtherSide() async throws {
        var router = TransportRouter()
        router.add("/reset") { stream in stream.reset(code: 0x7) }  // REFUSED_STREAM
        let server = try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: Fixtures.serverTLS, router: router, group: Fixtures.group)
        defer { _ = server.shutdown() }
        let connection = try await TransportConnection.connect(
            to: "https://localhost:\(server.port)", tls: Fixtures.clientTLS, group: Fixtures.group)
        let stream = try await connection.openStream(method: "GET", path: "/reset", endStream: true)
        await #expect {
            _ = try await stream.collect(maxBytes: 10).get()
        } throws: { error in
            (error as? TransportError)?.code == .streamReset && "\(error)".contains("REFUSED_STREAM")
        }
        try await connection.close()
    }

    /// A server whose `path` answers 200 and hands each stream to a new delegate, and a
    /// connection to it.
    static func serve(
        _ path: String, _ delegate: @escaping @Sendable () -> any TransportStreamDelegate
    ) async throws -> (TransportServer, TransportConnection) {
        var router = TransportRouter()
        router.add(path) { stream in
            stream.sendHeaders([(":status", "200")])
            stream.delegate = delegate()
        }
        let server = try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: Fixtures.serverTLS, router: router, group: Fixtures.group)
        let connection = try await TransportConnection.connect(
            to: "https://localhost:\(server.port)", tls: Fixtures.clientTLS, group: Fixtures.group)
        return (server, connection)
    }

    /// `writeAndFlush` from a turn of its own, after the stream sent everything it had (so
    /// HTTP/2 framing waits for data): each echo must reach the client, and its promise succeed.
    @Test func writeAndFlushSendsFromAFreshTurn() async throws {
        final class LaterEcho: TransportStreamDelegate {
            func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
                stream.eventLoop.execute {
                    let written = stream.eventLoop.makePromise(of: Void.self)
                    written.futureResult.whenSuccess { stream.writeAndFlush(ByteBuffer(string: "+")) }
                    stream.writeAndFlush(data, promise: written)
                }
            }
            func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) { stream.finish() }
        }
        let (server, connection) = try await Self.serve("/later") { LaterEcho() }
        defer { _ = server.shutdown() }
        let stream = try await connection.openStream(method: "POST", path: "/later")
        let body = stream.inboundBody()
        // An echo that never comes fails the test instead of hanging it.
        let watchdog = stream.eventLoop.scheduleTask(in: .seconds(20)) { stream.reset() }
        defer { watchdog.cancel() }
        var iterator = body.makeAsyncIterator()
        for word in ["one", "two", "three"] {
            try await stream.write(ByteBuffer(string: word)).get()
            var received = ""
            while received.count < word.count + 1, var chunk = try await iterator.next() {
                received += chunk.readString(length: chunk.readableBytes) ?? ""
            }
            #expect(received == word + "+")
        }
        stream.finish()
        #expect(try await iterator.next() == nil)
        try await connection.close()
    }

    @Test func gracefulShutdownDrainsOpenStreams() async throws {
        let (server, connection) = try await Self.serve("/slow") { EchoDelegate() }
        let stream = try await connection.openStream(method: "POST", path: "/slow")
        let body = stream.inboundBody()
        try await stream.write(ByteBuffer(string: "before")).get()
        #expect(try await body.responseHeaders()[":status"] == "200")
        // Shutdown begins while the stream is open: GOAWAY, no new streams, the open one finishes.
        let shutdown: EventLoopFuture<Void> = server.shutdown()
        var iterator = body.makeAsyncIterator()
        var first = try #require(try await iterator.next())
        #expect(first.readString(length: first.readableBytes) == "before")
        try await connection.goingAway.get()
        #expect(try await connection.isGoingAway.get())
        await #expect(throws: TransportError.self) {
            _ = try await connection.openStream(method: "GET", path: "/slow", endStream: true)
        }
        try await stream.write(ByteBuffer(string: "after")).get()
        stream.finish()
        var rest = ByteBuffer()
        while var chunk = try await iterator.next() { rest.writeBuffer(&chunk) }
        #expect(String(buffer: rest) == "after")
        try await shutdown.get()
        try await connection.closeFuture.get()
        #expect(server.connectionCount == 0)
    }

    @Test func routerMatchesExactThenLongestPrefix() {
        var router = TransportRouter()
        router.add("/sync") { _ in }
        router.add("/content/*") { _ in }
        router.add("/content/thumbnails/*") { _ in }
        #expect(router.match("/sync") == "/sync")
        #expect(router.match("/sync?cursor=9") == "/sync")
        #expect(router.match("/sync/more") == nil)
        #expect(router.match("/content/abc") == "/content/*")
        #expect(router.match("/content/thumbnails/abc?w=64") == "/content/thumbnails/*")
        #expect(router.match("/other") == nil)
        #expect(router.handler(for: "/content/x") != nil)
    }

    @Test func urlsAreChecked() async {
        for bad in [
            "http://localhost:1", "https://", "https://host:0", "https://host:70000", "https://[::1", "ftp://x",
        ] {
            await #expect(throws: TransportError.self, "\(bad)") {
                _ = try await TransportConnection.connect(to: bad, tls: Fixtures.clientTLS, group: Fixtures.group)
            }
        }
    }
}
