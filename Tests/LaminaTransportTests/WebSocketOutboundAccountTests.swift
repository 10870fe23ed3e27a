import Foundation
import LaminaTransport
import NIOConcurrencyHelpers
import NIOCore
import NIOWebSocket
import Testing

/// A WebSocket's queued outbound bytes reported to its ``WebSocketOutboundAccount`` (the
/// node's outbound budget), through ``WebSocketClient`` over TLS: every byte reported queued
/// is reported gone by the close, `closed()` comes once, and an account that answers "over its
/// share" closes the socket with 1008.
@Suite struct WebSocketOutboundAccountTests {
    /// Sums what a connection reports; answers true once `limit` bytes are queued at once.
    final class Recorder: WebSocketOutboundAccount, @unchecked Sendable {
        let limit: Int
        let state = NIOLockedValueBox((total: 0, peak: 0, reports: 0, closed: 0))
        init(limit: Int) { self.limit = limit }

        func queuedBytesChanged(by delta: Int, queued: Int) -> Bool {
            state.withLockedValue {
                $0.total += delta
                $0.peak = max($0.peak, $0.total)
                $0.reports += 1
            }
            return delta > 0 && queued > limit
        }

        func closed() { state.withLockedValue { $0.closed += 1 } }
    }

    /// Echoes text; "flood" queues 64 messages of 16 KiB at once.
    final class Echo: WebSocketConnectionDelegate, @unchecked Sendable {
        func webSocket(_ connection: WebSocketConnection, received text: String) {
            guard text == "flood" else { return connection.send(text: text) }
            let chunk = String(repeating: "x", count: 16 * 1024)
            for _ in 0..<64 { connection.send(text: chunk) }
        }
        func webSocketClosed(_ connection: WebSocketConnection, code: WebSocketErrorCode?, reason: String) {}
    }

    static func start(_ recorder: Recorder) async throws -> TransportServer {
        var router = TransportRouter()
        router.addWebSocket("/ws") { request in
            .accept(
                subprotocol: nil,
                opened: { connection in
                    connection.account(with: recorder)
                    connection.delegate = Echo()
                })
        }
        var tls = TLSConfiguration.server(
            certificateChainFile: Fixtures.server.certificate, privateKeyFile: Fixtures.server.key)
        tls.offersHTTP1 = true
        return try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: try TLSContext(tls), router: router, group: Fixtures.group,
            http1: HTTP1Settings())
    }

    static func clientTLS() throws -> TLSContext {
        var tls = TLSConfiguration.client(trust: .caFile(Fixtures.server.certificate))
        tls.offersHTTP1 = true
        return try TLSContext(tls)
    }

    /// Polls `condition` every 10 ms for up to 10 s.
    static func eventually(_ condition: () -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while !condition() {
            if Date() > deadline { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    @Test func everyQueuedByteIsReportedGoneAndTheCloseOnce() async throws {
        let recorder = Recorder(limit: .max)
        let server = try await Self.start(recorder)
        let received = NIOLockedValueBox<[String]>([])
        let client = try await WebSocketClient.connect(
            host: "localhost", port: server.port, path: "/ws", tls: try Self.clientTLS(), group: Fixtures.group,
            onText: { text in received.withLockedValue { $0.append(String(buffer: text)) } })
        for i in 0..<20 { client.send(text: "message \(i)") }
        #expect(await Self.eventually { received.withLockedValue { $0.count } == 20 })
        #expect(received.withLockedValue { $0 } == (0..<20).map { "message \($0)" })
        #expect(await Self.eventually { recorder.state.withLockedValue { $0.total } == 0 })
        let during = recorder.state.withLockedValue { $0 }
        #expect(during.peak > 0)
        #expect(during.reports >= 2)
        #expect(during.closed == 0)
        await client.close()
        #expect(await Self.eventually { recorder.state.withLockedValue { $0.closed } == 1 })
        #expect(recorder.state.withLockedValue { $0.total } == 0)
        try await server.shutdown()
    }

    @Test func anAccountOverItsShareClosesTheSocketWith1008() async throws {
        let recorder = Recorder(limit: 256 * 1024)
        let server = try await Self.start(recorder)
        let code = NIOLockedValueBox<(closed: Bool, code: WebSocketErrorCode?)>((false, nil))
        let client = try await WebSocketClient.connect(
            host: "localhost", port: server.port, path: "/ws", tls: try Self.clientTLS(), group: Fixtures.group,
            onText: { _ in }, onClose: { closed in code.withLockedValue { $0 = (true, closed) } })
        client.send(text: "flood")  // 1 MiB queued at once, over the account's 256 KiB
        #expect(await Self.eventually { code.withLockedValue { $0.closed } })
        #expect(code.withLockedValue { $0.code } == .policyViolation)
        #expect(await Self.eventually { recorder.state.withLockedValue { $0.closed } == 1 })
        #expect(recorder.state.withLockedValue { $0.total } == 0)
        try await server.shutdown()
    }
}
