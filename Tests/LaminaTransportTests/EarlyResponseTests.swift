import LaminaTransport
import NIOCore
import Testing

/// A server that answers before reading the whole request and then resets the request side
/// with NO_ERROR (RFC 9113 §8.1): the client keeps the complete response.
@Suite struct EarlyResponseTests {
    @Test func completeResponseSurvivesResetWithNoError() async throws {
        var router = TransportRouter()
        router.add("/early") { stream in
            stream.sendHeaders([(":status", "413"), ("content-type", "text/plain")])
            let framed = stream.write(ByteBuffer(string: "too large"))
            stream.finish()
            framed.whenSuccess { stream.reset(code: 0) }  // NO_ERROR, after the answer is framed
        }
        let server = try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: Fixtures.serverTLS, router: router, group: Fixtures.group)
        let connection = try await TransportConnection.connect(
            to: "https://localhost:\(server.port)", tls: Fixtures.clientTLS, group: Fixtures.group)
        let stream = try await connection.openStream(method: "PUT", path: "/early", headers: [], endStream: false)
        let answer = stream.collect(maxBytes: 1024)
        // The request body is never finished: the server answered without it.
        stream.write(ByteBuffer(repeating: 1, count: 1000), promise: nil)
        let (headers, body) = try await answer.get()
        #expect(headers?[":status"] == "413")
        #expect(String(buffer: body) == "too large")
        // The connection stays usable.
        let next = try await connection.openStream(method: "PUT", path: "/early", headers: [], endStream: true)
        #expect(try await next.collect(maxBytes: 1024).get().headers?[":status"] == "413")
        try await connection.close()
        try await server.shutdown()
    }
}
