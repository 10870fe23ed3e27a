import Foundation
import LaminaTransport
import NIOConcurrencyHelpers
import NIOCore

/// A push provider started in the test (APNs, FCM's token and send endpoints, a gateway): HTTPS
/// with a test certificate for 127.0.0.1 on the project's transport, HTTP/2 only (as APNs) or
/// also HTTP/1.1. Every request is recorded and answered by `answer`.
final class FakePushServer: Sendable {
    struct Received: Sendable {
        var method: String
        var path: String
        var headers: HeaderFields
        var body: [UInt8]
        var httpVersion: String
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    private struct State {
        var requests: [Received] = []
        var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    let server: TransportServer
    /// The certificate (the node's push CA file in tests).
    let certificate: String
    private let state = NIOLockedValueBox(State())

    private init(server: TransportServer, certificate: String) {
        self.server = server
        self.certificate = certificate
    }

    /// Starts a server; `answer` is given each request and how many came before it.
    static func start(
        http1: Bool,
        answer: @escaping @Sendable (Received, Int) async -> HTTPResponse = { _, _ in HTTPResponse(status: 200) }
    ) async throws -> FakePushServer {
        let directory = Fixtures.temporaryDirectory("fake-push")
        let cert = directory.appendingPathComponent("cert.pem").path
        let key = directory.appendingPathComponent("key.pem").path
        try DevelopmentCertificate.generate(
            commonName: "fake push \(UUID().uuidString.prefix(8))", certificatePath: cert, privateKeyPath: key)
        let box = NIOLockedValueBox<FakePushServer?>(nil)
        var router = TransportRouter()
        router.add("/*", maxBodyBytes: 1 << 20) { request in
            guard let fake = box.withLockedValue({ $0 }) else { return HTTPResponse(status: 503) }
            let received = Received(
                method: request.method, path: request.path, headers: request.headers,
                body: Array(request.body.readableBytesView),
                httpVersion: request.httpVersion)
            let (index, ready) = fake.state.withLockedValue { s -> (Int, [CheckedContinuation<Void, Never>]) in
                s.requests.append(received)
                let ready = s.waiters.filter { $0.count <= s.requests.count }.map(\.continuation)
                s.waiters.removeAll { $0.count <= s.requests.count }
                return (s.requests.count - 1, ready)
            }
            for continuation in ready { continuation.resume() }
            return await answer(received, index)
        }
        var tls = TLSConfiguration.server(certificateChainFile: cert, privateKeyFile: key)
        tls.offersHTTP1 = http1
        let server = try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: try TLSContext(tls), router: router, group: Fixtures.group,
            http1: http1 ? HTTP1Settings() : nil)
        let fake = FakePushServer(server: server, certificate: cert)
        box.withLockedValue { $0 = fake }
        return fake
    }

    /// `https://127.0.0.1:<port><path>`.
    func url(_ path: String = "") -> String { "https://127.0.0.1:\(server.port)\(path)" }

    var requests: [Received] { state.withLockedValue { $0.requests } }

    /// Waits until `count` requests have arrived (fails after `timeout`).
    func waitForRequests(_ count: Int, timeout: Duration = .seconds(30)) async throws -> [Received] {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    let now = self.state.withLockedValue { s -> Bool in
                        if s.requests.count >= count { return true }
                        s.waiters.append((count, c))
                        return false
                    }
                    if now { c.resume() }
                }
                return true
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return false
            }
            let reached = try await group.next() ?? false
            group.cancelAll()
            let left = self.state.withLockedValue { s -> [CheckedContinuation<Void, Never>] in
                defer { s.waiters.removeAll() }
                return s.waiters.map(\.continuation)
            }
            for continuation in left { continuation.resume() }
            guard reached else {
                throw SyncTestTimeout(waitingFor: "\(count) push requests (got \(self.requests.count))")
            }
            return self.requests
        }
    }

    func stop() async { try? await server.shutdown() }

    static func json(_ status: Int, _ object: [String: Any]) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: [("content-type", "application/json")],
            body: ByteBuffer(bytes: Array((try? JSONSerialization.data(withJSONObject: object)) ?? Data())))
    }
}
