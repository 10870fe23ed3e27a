import Foundation
import LaminaTransport
import NIOCore
import Testing

/// The HTTP/1.1 side of a TransportServer (ALPN http/1.1): request-level routes shared with
/// HTTP/2, stream routes refused with 505, bounded bodies and headers, request timeouts,
/// keep-alive.
@Suite struct HTTP1ServerTests {
    static func start(requestTimeout: TimeAmount = .seconds(30)) async throws -> TransportServer {
        var router = TestServer.router()
        router.add("/api/*", maxBodyBytes: 1024) { request in
            let text =
                "\(request.method) \(request.path) http/\(request.httpVersion) body=\(request.body.readableBytes) tooLarge=\(request.bodyTooLarge)"
            return HTTPResponse(
                status: request.bodyTooLarge ? 413 : 200, headers: [("content-type", "text/plain")],
                body: ByteBuffer(string: text))
        }
        var tls = TLSConfiguration.server(
            certificateChainFile: Fixtures.server.certificate, privateKeyFile: Fixtures.server.key)
        tls.offersHTTP1 = true
        var http1 = HTTP1Settings()
        http1.requestTimeout = requestTimeout
        http1.maxHeaderListSize = 4096
        return try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: try TLSContext(tls), router: router, group: Fixtures.group, http1: http1)
    }

    @Test func requestRoutesAnswerOverBothVersionsAndStreamRoutesSay505() async throws {
        let server = try await Self.start()
        defer { _ = server.shutdown() }
        for (flag, version) in [("--http1.1", "1.1"), ("--http2", "2")] {
            let run = try await External.run(
                "curl",
                [
                    flag, "-sS", "--cacert", Fixtures.server.certificate, "--data-binary", "abc", "-w",
                    "\n%{http_version} %{http_code}",
                    "https://127.0.0.1:\(server.port)/api/x?q=1",
                ])
            #expect(
                run.stdout == "POST /api/x?q=1 http/\(version) body=3 tooLarge=false\n\(version) 200", "\(run.output)")
        }
        let stream = try await External.run(
            "curl",
            [
                "--http1.1", "-sS", "--cacert", Fixtures.server.certificate, "-w", "\n%{http_code}",
                "https://127.0.0.1:\(server.port)/hello",
            ])
        #expect(stream.stdout == "/hello needs HTTP/2 (ALPN h2)\n\n505", "\(stream.output)")
        let none = try await External.run(
            "curl",
            [
                "--http1.1", "-sS", "--cacert", Fixtures.server.certificate, "-o", "/dev/null", "-w", "%{http_code}",
                "https://127.0.0.1:\(server.port)/nothing",
            ])
        #expect(none.stdout == "404")
    }

    @Test func oversizedBodiesAndHeadersAreRefusedAndTheConnectionKeepsServing() async throws {
        let server = try await Self.start()
        defer { _ = server.shutdown() }
        let big = String(repeating: "x", count: 1025)
        for flag in ["--http1.1", "--http2"] {
            let run = try await External.run(
                "curl",
                [
                    flag, "-sS", "--cacert", Fixtures.server.certificate, "--data-binary", big, "-w", "\n%{http_code}",
                    "https://127.0.0.1:\(server.port)/api/big",
                ])
            #expect(run.stdout.hasSuffix("body=0 tooLarge=true\n413"), "\(run.output)")
        }
        let header = String(repeating: "h", count: 5000)
        let run = try await External.run(
            "curl",
            [
                "--http1.1", "-sS", "--cacert", Fixtures.server.certificate, "-H", "x-big: \(header)", "-o",
                "/dev/null",
                "-w", "%{http_code}", "https://127.0.0.1:\(server.port)/api/h",
            ])
        #expect(run.stdout == "431" || run.stdout == "400", "\(run.output)")
    }

    /// Python's ssl: ALPN http/1.1, two requests on one connection, then a request whose
    /// headers never finish gets 408 and the connection closes.
    @Test func keepAliveThenARequestThatNeverFinishesGets408() async throws {
        let server = try await Self.start(requestTimeout: .milliseconds(500))
        defer { _ = server.shutdown() }
        let script = """
            import socket, ssl, sys
            ctx = ssl.create_default_context(cafile=sys.argv[1]); ctx.set_alpn_protocols(["http/1.1"])
            s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[2]))), server_hostname="localhost")
            print(s.selected_alpn_protocol())
            f = s.makefile("rb")
            def response():
                status = f.readline().decode().split(" ")[1]; length = 0
                while True:
                    line = f.readline().decode().strip()
                    if not line: break
                    if line.lower().startswith("content-length:"): length = int(line.split(":")[1])
                return status, f.read(length).decode()
            for i in range(2):
                s.sendall(b"GET /api/k" + str(i).encode() + b" HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n")
                print(*response())
            s.sendall(b"POST /api/slow HTTP/1.1\\r\\nHost: localhost\\r\\nContent-Length: 10\\r\\n\\r\\nabc")
            print(response()[0])
            print("closed", f.read() == b"")
            """
        let run = try await External.run(
            "python3", ["-c", script, Fixtures.server.certificate, "\(server.port)"], timeout: 30)
        #expect(
            run.stdout.split(separator: "\n") == [
                "http/1.1", "200 GET /api/k0 http/1.1 body=0 tooLarge=false",
                "200 GET /api/k1 http/1.1 body=0 tooLarge=false",
                "408", "closed True",
            ], "\(run.output)")
    }
}
