import Foundation
import LaminaTransport
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// A route's awaited header check (one that waits, as a session token looked up in a store):
/// a refused request is answered before its body is read, over HTTP/2 and HTTP/1.1 (curl); an
/// admitted one is read and handled whole (with `Expect: 100-continue` on HTTP/1.1).
@Suite struct AwaitedHeaderCheckTests {
    /// `/upload`: the check admits `x-token: ok` after a hop off the event loop; the handler
    /// answers the body's size and counts its calls.
    static func start(handled: NIOLockedValueBox<Int>) async throws -> TransportServer {
        var router = TransportRouter()
        router.add(
            "/upload", maxBodyBytes: 4 * 1024 * 1024,
            awaitedHeaderCheck: { request in
                await Task.yield()
                guard request.headers["x-token"] == "ok" else {
                    return HTTPResponse(
                        status: 401, headers: [("content-type", "text/plain")], body: ByteBuffer(string: "no token\n"))
                }
                return nil
            }
        ) { request in
            handled.withLockedValue { $0 += 1 }
            return HTTPResponse(status: 200, body: ByteBuffer(string: "bytes=\(request.body.readableBytes)"))
        }
        var tls = TLSConfiguration.server(
            certificateChainFile: Fixtures.server.certificate, privateKeyFile: Fixtures.server.key)
        tls.offersHTTP1 = true
        return try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: try TLSContext(tls), router: router, group: Fixtures.group,
            http1: HTTP1Settings())
    }

    @Test func http2RefusalComesBeforeTheBodyAndAnAdmittedBodyIsReadWhole() async throws {
        let handled = NIOLockedValueBox(0)
        let server = try await Self.start(handled: handled)
        let connection = try await TransportConnection.connect(
            to: "https://localhost:\(server.port)", tls: Fixtures.clientTLS, group: Fixtures.group)
        // Refused: the body is never finished, yet the answer comes.
        let refused = try await connection.openStream(
            method: "PUT", path: "/upload", headers: [("x-token", "bad")], endStream: false)
        let answer = refused.collect(maxBytes: 1024)
        refused.write(ByteBuffer(repeating: 1, count: 10_000), promise: nil)
        let (headers, body) = try await answer.get()
        #expect(headers?[":status"] == "401")
        #expect(String(buffer: body) == "no token\n")
        #expect(handled.withLockedValue { $0 } == 0)
        // Admitted: 200 KB, more than the stream's initial window, arrives whole.
        let admitted = try await connection.openStream(
            method: "PUT", path: "/upload", headers: [("x-token", "ok")], endStream: false)
        let ok = admitted.collect(maxBytes: 1024)
        try await admitted.write(ByteBuffer(repeating: 2, count: 200_000)).get()
        admitted.finish()
        let (okHeaders, okBody) = try await ok.get()
        #expect(okHeaders?[":status"] == "200")
        #expect(String(buffer: okBody) == "bytes=200000")
        #expect(handled.withLockedValue { $0 } == 1)
        try await connection.close()
        try await server.shutdown()
    }

    @Test func http1RefusalComesBeforeTheBodyAndAnAdmittedBodyIsReadWhole() async throws {
        let handled = NIOLockedValueBox(0)
        let server = try await Self.start(handled: handled)
        let file = Fixtures.file("awaited-check-\(UUID().uuidString).bin")
        try Data(repeating: 7, count: 2 * 1024 * 1024).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let url = "https://localhost:\(server.port)/upload"
        // Refused: at 64 KB/s the 2 MiB body would take 32 s to send; the 401 comes long before.
        let start = Date()
        let refused = try await External.run(
            "curl",
            [
                "-sS", "--http1.1", "--cacert", Fixtures.server.certificate, "-H", "x-token: bad", "--limit-rate",
                "64k", "--data-binary", "@\(file)", "-o", "/dev/null", "-w", "%{http_code}", url,
            ], timeout: 60)
        let elapsed = Date().timeIntervalSince(start)
        #expect(refused.stdout == "401", "curl: \(refused.output)")
        #expect(elapsed < 16, "the refusal took \(elapsed) s: the body was read first")
        #expect(handled.withLockedValue { $0 } == 0)
        // Admitted: curl sends Expect: 100-continue for a body this large; the body arrives whole.
        let admitted = try await External.run(
            "curl",
            [
                "-sS", "--http1.1", "--cacert", Fixtures.server.certificate, "-H", "x-token: ok", "--data-binary",
                "@\(file)", url,
            ], timeout: 60)
        #expect(admitted.stdout == "bytes=\(2 * 1024 * 1024)", "curl: \(admitted.output)")
        #expect(handled.withLockedValue { $0 } == 1)
        try await server.shutdown()
    }
}
