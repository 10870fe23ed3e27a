import Foundation
import LaminaTransport
import NIOCore
import Testing

/// The HTTP/1.1 client (the node's webhook client) against the transport's own HTTP/1.1
/// server: keep-alive, timeouts, bounded bodies, refusals.
@Suite struct HTTP1ClientTests {
    static let clientTLS: TLSContext = {
        var configuration = TLSConfiguration.client(trust: .caFile(Fixtures.server.certificate))
        configuration.offersHTTP1 = true
        return try! TLSContext(configuration)
    }()

    static func start() async throws -> TransportServer {
        var router = TestServer.router()
        router.add("/echo", maxBodyBytes: 1024) { request in
            HTTPResponse(
                status: 201, headers: [("x-seen", request.headers["x-test"] ?? "")],
                body: ByteBuffer(string: "\(request.method) \(request.path) \(request.body.readableBytes)"))
        }
        router.add("/big", maxBodyBytes: 1024) { _ in
            HTTPResponse(status: 200, body: ByteBuffer(repeating: 0x61, count: 10_000))
        }
        router.add("/slow", maxBodyBytes: 1024) { _ in
            try? await Task.sleep(for: .seconds(60))
            return HTTPResponse(status: 200)
        }
        var tls = TLSConfiguration.server(
            certificateChainFile: Fixtures.server.certificate, privateKeyFile: Fixtures.server.key)
        tls.offersHTTP1 = true
        return try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: try TLSContext(tls), router: router, group: Fixtures.group,
            http1: HTTP1Settings())
    }

    @Test func requestsShareOneKeptAliveConnection() async throws {
        let server = try await Self.start()
        defer { _ = server.shutdown() }
        let connection = try await HTTP1Connection.connect(
            host: "127.0.0.1", port: server.port, tls: Self.clientTLS, group: Fixtures.group,
            connectTimeout: .seconds(5))
        for i in 0..<3 {
            let response = try await connection.request(
                method: .POST, path: "/echo?i=\(i)", headers: [("x-test", "t\(i)")], body: ByteBuffer(string: "abc"),
                timeout: .seconds(5))
            #expect(response.status == 201)
            #expect(response.headers["x-seen"] == "t\(i)")
            #expect(String(buffer: response.body) == "POST /echo?i=\(i) 3")
        }
        #expect(connection.isOpen)
        await connection.close()
    }

    @Test func slowAnswersTimeOutAndLargeBodiesAreRefused() async throws {
        let server = try await Self.start()
        defer { _ = server.shutdown() }
        let slow = try await HTTP1Connection.connect(
            host: "127.0.0.1", port: server.port, tls: Self.clientTLS, group: Fixtures.group,
            connectTimeout: .seconds(5))
        let started = ContinuousClock.now
        await #expect {
            _ = try await slow.request(method: .GET, path: "/slow", headers: [], body: nil, timeout: .milliseconds(200))
        } throws: { ($0 as? TransportError)?.code == .timeout }
        #expect(ContinuousClock.now - started < .seconds(30))  // the answer would take 60 s

        let big = try await HTTP1Connection.connect(
            host: "127.0.0.1", port: server.port, tls: Self.clientTLS, group: Fixtures.group,
            connectTimeout: .seconds(5))
        await #expect {
            _ = try await big.request(
                method: .GET, path: "/big", headers: [], body: nil, timeout: .seconds(5), maxResponseBytes: 1_000)
        } throws: { ($0 as? TransportError)?.code == .badResponse }
    }

    @Test func refusedConnectionsUntrustedServersAndH2OnlyContextsFail() async throws {
        let port = try External.freePort()
        await #expect {
            _ = try await HTTP1Connection.connect(
                host: "127.0.0.1", port: port, tls: Self.clientTLS, group: Fixtures.group, connectTimeout: .seconds(2))
        } throws: { ($0 as? TransportError)?.code == .connectFailed }

        let server = try await Self.start()
        defer { _ = server.shutdown() }
        var untrusting = TLSConfiguration.client(trust: .caFile(Fixtures.clientCA.certificate))
        untrusting.offersHTTP1 = true
        let wrongCA = try TLSContext(untrusting)
        await #expect {
            _ = try await HTTP1Connection.connect(
                host: "127.0.0.1", port: server.port, tls: wrongCA, group: Fixtures.group, connectTimeout: .seconds(2))
        } throws: { ($0 as? TransportError)?.code == .tlsHandshake }
        await #expect {
            _ = try await HTTP1Connection.connect(
                host: "127.0.0.1", port: server.port, tls: Fixtures.clientTLS, group: Fixtures.group,
                connectTimeout: .seconds(2))
        } throws: { ($0 as? TransportError)?.code == .tlsConfiguration }
    }

    @Test func hmacSHA1MatchesRFC2202() throws {
        #expect(
            try HMACSHA1.hex(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
                == "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")
        #expect(
            try HMACSHA1.hex(key: [UInt8](repeating: 0x0b, count: 20), message: Array("Hi There".utf8))
                == "b617318655057264e28bc0b6fb378c8ef146be00")
    }
}
