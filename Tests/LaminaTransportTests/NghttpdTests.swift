import Foundation
import LaminaTransport
import NIOCore
import Testing

/// A LaminaTransport client talks to nghttpd (nghttp2's own server).
@Suite struct NghttpdTests {
    @Test func clientFetchesFromNghttpd() async throws {
        let docroot = Fixtures.file("docroot-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: docroot, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: docroot) }
        let small = "small file from nghttpd\n"
        try Data(small.utf8).write(to: URL(fileURLWithPath: docroot + "/small.txt"))
        let large = ByteBuffer.random(count: 3 * 1024 * 1024)
        try Data(large.readableBytesView).write(to: URL(fileURLWithPath: docroot + "/large.bin"))

        let port = try External.freePort()
        let nghttpd = try External.start(
            "nghttpd",
            ["--address=127.0.0.1", "-d", docroot, String(port), Fixtures.server.key, Fixtures.server.certificate])
        defer { External.stop(nghttpd) }
        try await External.waitForPort(port, process: nghttpd)

        let connection = try await TransportConnection.connect(
            to: "https://localhost:\(port)", tls: Fixtures.clientTLS, group: Fixtures.group)
        #expect(connection.tlsInfo.alpn == "h2")
        #expect(connection.tlsInfo.protocolVersion == "TLSv1.3")

        let smallStream = try await connection.openStream(method: "GET", path: "/small.txt", endStream: true)
        let smallResponse = try await smallStream.collect(maxBytes: 1 << 20).get()
        #expect(smallResponse.headers?[":status"] == "200")
        #expect(String(buffer: smallResponse.body) == small)

        // Several concurrent streams on one connection, one of them large (flow control inbound).
        var streams: [TransportStream] = []
        for _ in 0..<4 {
            streams.append(try await connection.openStream(method: "GET", path: "/large.bin", endStream: true))
        }
        let missing = try await connection.openStream(method: "GET", path: "/missing", endStream: true)
        for stream in streams {
            let response = try await stream.collect(maxBytes: 8 << 20).get()
            #expect(response.headers?[":status"] == "200")
            #expect(response.body == large)
        }
        let notFound = try await missing.collect(maxBytes: 1 << 20).get()
        #expect(notFound.headers?[":status"] == "404")

        try await connection.close()
    }

    @Test func clientRefusesUntrustedServer() async throws {
        let port = try External.freePort()
        let docroot = Fixtures.file("docroot-untrusted-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: docroot, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: docroot) }
        let nghttpd = try External.start(
            "nghttpd",
            ["--address=127.0.0.1", "-d", docroot, String(port), Fixtures.server.key, Fixtures.server.certificate])
        defer { External.stop(nghttpd) }
        try await External.waitForPort(port, process: nghttpd)
        // Trusting a different CA: the handshake must fail with OpenSSL's verification reason.
        let otherTrust = try TLSContext(.client(trust: .caFile(Fixtures.clientCA.certificate)))
        await #expect {
            _ = try await TransportConnection.connect(
                to: "https://localhost:\(port)", tls: otherTrust, group: Fixtures.group)
        } throws: { error in
            guard let error = error as? TransportError else { return false }
            return error.code == .tlsHandshake && error.reason.contains("certificate verify failed")
        }
    }
}
