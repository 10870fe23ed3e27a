import Foundation
import LaminaNode
import LaminaProcess
import LaminaTransport
import LaminaWire
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

enum Fixtures {
    static let group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton

    /// A fresh temporary directory, removed when the test process exits.
    static func temporaryDirectory(_ name: String) -> URL {
        ScratchDirectory.make("lamina-it-\(name)")
    }

    static var logger: Logger {
        var logger = Logger(label: "lamina.it")
        logger.logLevel = .warning
        return logger
    }

    /// A node configuration on 127.0.0.1 port 0 with a temp data dir and admin on port 0.
    static func nodeConfiguration(_ name: String) -> NodeServerConfiguration {
        var configuration = NodeServerConfiguration()
        configuration.port = 0
        configuration.adminPort = 0
        configuration.dataDirectory = temporaryDirectory(name).path
        configuration.drainTimeoutSeconds = 2
        return configuration
    }

    /// The package root (for the built `lamina-node` binary).
    static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

/// A sync server whose sessions are test endpoints instead of the engine (bridge tests).
struct BridgeServer {
    let server: TransportServer
    let directory: URL
    let certificate: String
    let opened: NIOLockedValueBox<[EchoEndpoint]>

    var url: String { "https://127.0.0.1:\(server.port)" }

    static func start(limits: SyncStreamLimits = SyncStreamLimits(), answering: Bool = true) async throws
        -> BridgeServer
    {
        let directory = Fixtures.temporaryDirectory("bridge")
        let cert = directory.appendingPathComponent("cert.pem").path
        let key = directory.appendingPathComponent("key.pem").path
        try DevelopmentCertificate.generate(certificatePath: cert, privateKeyPath: key)
        let opened = NIOLockedValueBox<[EchoEndpoint]>([])
        var router = TransportRouter()
        router.add(
            NodeServer.syncPath,
            SyncStreamBridge.handler(
                limits: limits, metrics: ServerMetrics(factory: NOOPMetricsHandler.instance), logger: Fixtures.logger
            ) { outbound in
                let endpoint = EchoEndpoint(outbound: outbound, answering: answering)
                opened.withLockedValue { $0.append(endpoint) }
                return endpoint
            })
        let tls = try TLSContext(.server(certificateChainFile: cert, privateKeyFile: key))
        let server = try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: tls, router: router, group: Fixtures.group)
        return BridgeServer(server: server, directory: directory, certificate: cert, opened: opened)
    }

    func client() async throws -> SyncTestClient {
        try await SyncTestClient.connect(url: url, caFile: certificate)
    }

    func stop() async { try? await server.shutdown() }
}

/// A test session: answers PING with PONG, HELLO with WELCOME, `flood(bytes:)` on demand;
/// decoder errors close with the wire error (as the engine does). Records what it got.
final class EchoEndpoint: SyncSessionEndpoint, @unchecked Sendable {
    let outbound: SessionOutbound
    let answering: Bool
    private let state = NIOLockedValueBox<(received: [Frame], failure: WireError?, closed: Bool)>(([], nil, false))
    let closedPromise: EventLoopPromise<Void> = Fixtures.group.next().makePromise()

    init(outbound: SessionOutbound, answering: Bool) {
        self.outbound = outbound
        self.answering = answering
    }

    var received: [Frame] { state.withLockedValue { $0.received } }
    var failure: WireError? { state.withLockedValue { $0.failure } }

    func receive(_ frame: Frame) {
        state.withLockedValue { $0.received.append(frame) }
        guard answering else { return }
        switch frame {
        case .ping(let ping): outbound.send([.pong(ping)])
        case .hello:
            outbound.send([
                .welcome(
                    Welcome(
                        version: 1, features: [], nodeID: .init(1), serverTime: .init(millisecondsSince1970: 0),
                        maxFrameSize: 1 << 20))
            ])
        default: break
        }
    }

    func receiveFailed(_ error: WireError) {
        state.withLockedValue { $0.failure = error }
        outbound.close(with: ErrorFrame(error))
    }

    func closed() {
        state.withLockedValue { $0.closed = true }
        closedPromise.succeed(())
    }

    /// Sends up to `count` PONG frames from another thread (fan-out style), stopping once the
    /// session is closed; the future completes when the sending thread is done.
    func flood(count: Int) -> EventLoopFuture<Int> {
        let done = Fixtures.group.next().makePromise(of: Int.self)
        Thread.detachNewThread {
            var sent = 0
            while sent < count, !self.state.withLockedValue({ $0.closed }) {
                self.outbound.send([.pong(Ping(payload: UInt64(sent)))])
                sent += 1
            }
            done.succeed(sent)
        }
        return done.futureResult
    }
}
