import Foundation
import LaminaTransport
import NIOCore
import Testing

/// What `openssl s_client` (and our own client) sees of the server's TLS policy.
@Suite struct TLSPolicyTests {
    private func sClient(_ port: Int, _ extra: [String]) async throws -> ExternalRun {
        try await External.run(
            "openssl", ["s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost"] + extra, timeout: 30)
    }

    @Test func sClientSeesTLS13AndH2AndExpectedCipher() async throws {
        let server = try await TestServer.start()
        defer { _ = server.shutdown() }
        let run = try await sClient(server.port, ["-alpn", "h2", "-CAfile", Fixtures.server.certificate])
        #expect(run.output.contains("New, TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256"), "\(run.output)")
        #expect(run.output.contains("ALPN protocol: h2"), "\(run.output)")
        #expect(run.output.contains("Verify return code: 0 (ok)"), "\(run.output)")
        #expect(run.output.contains("Server Temp Key: X25519"), "\(run.output)")
    }

    @Test func tls12UsesAnIntermediateCipher() async throws {
        let server = try await TestServer.start()
        defer { _ = server.shutdown() }
        let run = try await sClient(server.port, ["-tls1_2", "-alpn", "h2"])
        #expect(run.output.contains("Cipher is ECDHE-ECDSA-AES128-GCM-SHA256"), "\(run.output)")
        #expect(run.output.contains("ALPN protocol: h2"), "\(run.output)")
        // A cipher outside the profile is refused.
        let weak = try await sClient(server.port, ["-tls1_2", "-alpn", "h2", "-cipher", "ECDHE-ECDSA-AES128-SHA"])
        #expect(!weak.output.contains("ALPN protocol: h2"), "\(weak.output)")
        #expect(weak.output.contains("handshake failure") || weak.output.contains("no shared cipher"), "\(weak.output)")
    }

    @Test(arguments: ["-tls1", "-tls1_1"])
    func oldTLSVersionsAreRefused(flag: String) async throws {
        let server = try await TestServer.start()
        defer { _ = server.shutdown() }
        let run = try await sClient(server.port, [flag, "-alpn", "h2", "-cipher", "DEFAULT@SECLEVEL=0"])
        #expect(run.status != 0)
        #expect(!run.output.contains("ALPN protocol: h2"), "\(run.output)")
        #expect(run.output.contains("protocol version") || run.output.contains("unsupported protocol"), "\(run.output)")
    }

    @Test func nonH2ALPNIsRefused() async throws {
        let server = try await TestServer.start()
        defer { _ = server.shutdown() }
        let run = try await sClient(server.port, ["-alpn", "http/1.1"])
        #expect(run.status != 0)
        #expect(run.output.contains("no application protocol"), "\(run.output)")
        // Offering no ALPN at all is refused too (after the handshake, with a Swift error on our side).
        let none = try await sClient(server.port, [])
        #expect(!none.output.contains("ALPN protocol: h2"), "\(none.output)")
    }

    @Test func mutualTLSRefusesMissingClientCertificate() async throws {
        let tls = try TLSContext(
            .server(
                certificateChainFile: Fixtures.server.certificate, privateKeyFile: Fixtures.server.key,
                clientCAFile: Fixtures.clientCA.certificate))
        let server = try await TestServer.start(tls: tls)
        defer { _ = server.shutdown() }

        // -ign_eof: keep reading until the server closes, so its TLS 1.3 post-handshake alert is seen.
        let without = try await sClient(server.port, ["-alpn", "h2", "-ign_eof"])
        #expect(without.output.contains("certificate required"), "\(without.output)")

        let with = try await sClient(
            server.port, ["-alpn", "h2", "-cert", Fixtures.client.certificate, "-key", Fixtures.client.key])
        #expect(with.output.contains("ALPN protocol: h2"), "\(with.output)")
        #expect(!with.output.contains("alert"), "\(with.output)")

        // Our client with its certificate gets through, and the server sees who it is.
        let clientTLS = try TLSContext(
            .client(
                trust: .caFile(Fixtures.server.certificate), certificateChainFile: Fixtures.client.certificate,
                privateKeyFile: Fixtures.client.key))
        let connection = try await TransportConnection.connect(
            to: "https://localhost:\(server.port)", tls: clientTLS, group: Fixtures.group)
        let stream = try await connection.openStream(method: "GET", path: "/hello", endStream: true)
        let response = try await stream.collect(maxBytes: 1024).get()
        #expect(String(buffer: response.body) == TestServer.helloBody)
        try await connection.close()

        // Our client without a certificate cannot complete a request.
        let anonymous = Fixtures.clientTLS
        await #expect(throws: TransportError.self) {
            let connection = try await TransportConnection.connect(
                to: "https://localhost:\(server.port)", tls: anonymous, group: Fixtures.group)
            let stream = try await connection.openStream(method: "GET", path: "/hello", endStream: true)
            _ = try await stream.collect(maxBytes: 1024).get()
        }
    }

    @Test func pinnedCertificateAndHostNameChecks() async throws {
        // A server certificate for another name, trusted as a pin: the host name check still applies.
        let other = Fixtures.file("other-\(UUID().uuidString)")
        try DevelopmentCertificate.generate(
            commonName: "other.example", hosts: ["other.example"], certificatePath: other + ".pem",
            privateKeyPath: other + ".key")
        let tls = try TLSContext(.server(certificateChainFile: other + ".pem", privateKeyFile: other + ".key"))
        let server = try await TestServer.start(tls: tls)
        defer { _ = server.shutdown() }
        let pinnedOther = try TLSContext(.client(trust: .pinnedCertificate(other + ".pem")))
        await #expect {
            _ = try await TransportConnection.connect(
                to: "https://127.0.0.1:\(server.port)", tls: pinnedOther, group: Fixtures.group)
        } throws: { error in
            guard let error = error as? TransportError else { return false }
            return error.code == .tlsHandshake && error.reason.contains("address mismatch")
        }

        // Pinning the right certificate for the right name works; pinning another one does not.
        let main = try await TestServer.start()
        defer { _ = main.shutdown() }
        let pinned = try TLSContext(.client(trust: .pinnedCertificate(Fixtures.server.certificate)))
        let connection = try await TransportConnection.connect(
            to: "https://127.0.0.1:\(main.port)", tls: pinned, group: Fixtures.group)
        #expect(connection.tlsInfo.alpn == "h2")
        try await connection.close()
        await #expect(throws: TransportError.self) {
            _ = try await TransportConnection.connect(
                to: "https://127.0.0.1:\(main.port)", tls: pinnedOther, group: Fixtures.group)
        }
    }

    @Test func sessionsResume() async throws {
        let server = try await TestServer.start()
        defer { _ = server.shutdown() }
        let tls = try TLSContext(.client(trust: .caFile(Fixtures.server.certificate)))
        let first = try await TransportConnection.connect(
            to: "https://localhost:\(server.port)", tls: tls, group: Fixtures.group)
        #expect(!first.tlsInfo.resumed)
        // A request round trip guarantees the TLS 1.3 ticket (sent after the handshake) has arrived.
        let stream = try await first.openStream(method: "GET", path: "/hello", endStream: true)
        _ = try await stream.collect(maxBytes: 1024).get()
        try await first.close()
        let second = try await TransportConnection.connect(
            to: "https://localhost:\(server.port)", tls: tls, group: Fixtures.group)
        #expect(second.tlsInfo.resumed)
        try await second.close()
    }

    @Test func badConfigurationCarriesOpenSSLReason() throws {
        #expect {
            _ = try TLSContext(
                .server(certificateChainFile: Fixtures.server.certificate, privateKeyFile: Fixtures.clientCA.key))
        } throws: { error in
            guard let error = error as? TransportError else { return false }
            return error.code == .tlsConfiguration && error.reason.contains("key values mismatch")
        }
        #expect(throws: TransportError.self) {
            _ = try TLSContext(.server(certificateChainFile: "/nonexistent.pem", privateKeyFile: "/nonexistent.key"))
        }
    }
}
