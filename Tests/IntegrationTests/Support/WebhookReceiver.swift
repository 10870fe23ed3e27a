import Foundation
import LaminaTransport
import NIOConcurrencyHelpers
import NIOCore

/// A webhook target started in the test: HTTPS (a test certificate for 127.0.0.1) with
/// HTTP/1.1 on the project's transport. Answers Layer's verification challenge; every POST
/// is recorded and answered by `answer` (given the request and how many POSTs came before).
final class WebhookReceiver: Sendable {
    struct Received: Sendable {
        var path: String
        var headers: HeaderFields
        var body: [UInt8]
        var at: ContinuousClock.Instant
        /// Other POSTs the receiver was answering when this one arrived.
        var others = 0
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }
    }

    private struct State {
        var posts: [Received] = []
        var challenges = 0
        var answering = 0
        var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    let server: TransportServer
    /// The certificate (the node's webhook CA file in tests).
    let certificate: String
    private let state = NIOLockedValueBox(State())

    private init(server: TransportServer, certificate: String) {
        self.server = server
        self.certificate = certificate
    }

    /// Starts a receiver; `answer` gives the status of each POST (an async closure may hold
    /// the answer back, as a dead target does).
    /// With `echoing` false the verification challenge is answered with something else.
    /// `idleTimeout` closes kept-alive connections that idle that long.
    static func start(
        echoing: Bool = true, idleTimeout: TimeAmount = .seconds(60),
        answer: @escaping @Sendable (_ index: Int) async -> Int = { _ in 200 }
    ) async throws -> WebhookReceiver {
        try await start(echoing: echoing, idleTimeout: idleTimeout) { index, _ in await answer(index) }
    }

    /// Starts a receiver whose `answer` is given each POST too (and how many came before it).
    static func start(
        echoing: Bool = true, idleTimeout: TimeAmount = .seconds(60),
        answer: @escaping @Sendable (_ index: Int, _ post: Received) async -> Int
    ) async throws -> WebhookReceiver {
        let directory = Fixtures.temporaryDirectory("webhook-receiver")
        let cert = directory.appendingPathComponent("cert.pem").path
        let key = directory.appendingPathComponent("key.pem").path
        // Its own subject: several receivers' certificates can share one CA bundle.
        try DevelopmentCertificate.generate(
            commonName: "webhook receiver \(UUID().uuidString.prefix(8))", certificatePath: cert, privateKeyPath: key)
        let box = NIOLockedValueBox<WebhookReceiver?>(nil)
        var router = TransportRouter()
        router.add("/*", maxBodyBytes: 1 << 20) { request in
            guard let receiver = box.withLockedValue({ $0 }) else { return HTTPResponse(status: 503) }
            return await receiver.receive(request, echoing: echoing, answer: answer)
        }
        var tls = TLSConfiguration.server(certificateChainFile: cert, privateKeyFile: key)
        tls.offersHTTP1 = true
        var http1 = HTTP1Settings()
        http1.idleTimeout = idleTimeout
        let server = try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: try TLSContext(tls), router: router, group: Fixtures.group, http1: http1)
        let receiver = WebhookReceiver(server: server, certificate: cert)
        box.withLockedValue { $0 = receiver }
        return receiver
    }

    /// `https://127.0.0.1:<port><path>`.
    func url(_ path: String = "/hook") -> String { "https://127.0.0.1:\(server.port)\(path)" }

    private func receive(_ request: HTTPRequest, echoing: Bool, answer: @Sendable (Int, Received) async -> Int) async
        -> HTTPResponse
    {
        if request.method == "GET", let query = request.path.split(separator: "?").dropFirst().first {
            for pair in query.split(separator: "&") where pair.hasPrefix("verification_challenge=") {
                state.withLockedValue { $0.challenges += 1 }
                let challenge = String(pair.dropFirst("verification_challenge=".count))
                return HTTPResponse(status: 200, body: ByteBuffer(string: echoing ? challenge : "hello"))
            }
        }
        guard request.method == "POST" else { return HTTPResponse(status: 405) }
        var received = Received(
            path: request.path, headers: request.headers, body: Array(request.body.readableBytesView), at: .now)
        let (index, ready) = state.withLockedValue { s -> (Int, [CheckedContinuation<Void, Never>]) in
            received.others = s.answering
            s.answering += 1
            s.posts.append(received)
            let ready = s.waiters.filter { $0.count <= s.posts.count }.map(\.continuation)
            s.waiters.removeAll { $0.count <= s.posts.count }
            return (s.posts.count - 1, ready)
        }
        for continuation in ready { continuation.resume() }
        let status = await answer(index, received)
        state.withLockedValue { $0.answering -= 1 }
        return HTTPResponse(status: status)
    }

    /// Every POST so far.
    var posts: [Received] { state.withLockedValue { $0.posts } }
    /// Verification challenges answered so far.
    var challenges: Int { state.withLockedValue { $0.challenges } }

    /// Waits until `count` POSTs have arrived (fails after `timeout`).
    func waitForPosts(_ count: Int, timeout: Duration = .seconds(30)) async throws -> [Received] {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    let now = self.state.withLockedValue { s -> Bool in
                        if s.posts.count >= count { return true }
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
            // A waiter left behind by the timeout is let go, so the group can end.
            let left = self.state.withLockedValue { s -> [CheckedContinuation<Void, Never>] in
                defer { s.waiters.removeAll() }
                return s.waiters.map(\.continuation)
            }
            for continuation in left { continuation.resume() }
            guard reached else { throw SyncTestTimeout(waitingFor: "\(count) webhook POSTs (got \(self.posts.count))") }
            return self.posts
        }
    }

    func stop() async { try? await server.shutdown() }
}
