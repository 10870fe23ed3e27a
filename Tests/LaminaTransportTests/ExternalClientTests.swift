import Foundation
import LaminaTransport
import NIOCore
import Testing

/// curl and nghttp (programs nobody here wrote) fetch from a LaminaTransport server.
@Suite struct ExternalClientTests {
    @Test func curlGetsOverHTTP2() async throws {
        let server = try await TestServer.start()
        defer { _ = server.shutdown() }
        let run = try await External.run(
            "curl",
            [
                "--http2", "-sS", "--cacert", Fixtures.server.certificate, "-w", "\n%{http_version} %{http_code}",
                "https://127.0.0.1:\(server.port)/hello",
            ])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.stdout == TestServer.helloBody + "\n2 200")
    }

    @Test func curlEchoes10MBPost() async throws {
        let server = try await TestServer.start()
        defer { _ = server.shutdown() }
        let input = Fixtures.file("upload-\(UUID().uuidString)")
        let output = input + ".echo"
        let body = ByteBuffer.random(count: 10 * 1024 * 1024)
        try Data(body.readableBytesView).write(to: URL(fileURLWithPath: input))
        defer {
            try? FileManager.default.removeItem(atPath: input)
            try? FileManager.default.removeItem(atPath: output)
        }
        let run = try await External.run(
            "curl",
            [
                "--http2", "-sS", "--cacert", Fixtures.server.certificate, "--data-binary", "@" + input, "-o", output,
                "-H", "content-type: application/octet-stream", "-w", "%{http_version} %{http_code}",
                "https://localhost:\(server.port)/echo",
            ], timeout: 120)
        #expect(run.status == 0, "\(run.output)")
        #expect(run.stdout == "2 200")
        let echoed = try Data(contentsOf: URL(fileURLWithPath: output))
        #expect(echoed.count == body.readableBytes)
        #expect(echoed == Data(body.readableBytesView))
    }

    @Test func nghttpGetsAndSeesTrailers() async throws {
        let server = try await TestServer.start()
        defer { _ = server.shutdown() }
        let hello = try await External.run("nghttp", ["https://127.0.0.1:\(server.port)/hello"])
        #expect(hello.status == 0, "\(hello.output)")
        #expect(hello.stdout == TestServer.helloBody)
        let trailers = try await External.run("nghttp", ["-v", "https://127.0.0.1:\(server.port)/trailers"])
        #expect(trailers.status == 0, "\(trailers.output)")
        #expect(trailers.stdout.contains("x-checksum: 42"))
    }

    @Test func nghttpEchoes10MBPost() async throws {
        let server = try await TestServer.start()
        defer { _ = server.shutdown() }
        let input = Fixtures.file("nghttp-upload-\(UUID().uuidString)")
        let body = ByteBuffer.random(count: 10 * 1024 * 1024)
        try Data(body.readableBytesView).write(to: URL(fileURLWithPath: input))
        defer { try? FileManager.default.removeItem(atPath: input) }
        // nghttp writes the response body to stdout, captured in a file by External.run.
        let run = try await External.run(
            "nghttp", ["-d", input, "https://127.0.0.1:\(server.port)/echo"], timeout: 120)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdoutData.count == body.readableBytes)
        #expect(run.stdoutData == Data(body.readableBytesView))
    }
}
