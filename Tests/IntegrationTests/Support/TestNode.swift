import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaTestPostgres
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// A real node (engine + store + TLS/HTTP/2 listener) in-process on 127.0.0.1, port 0,
/// with a temporary data directory; restartable on the same directory.
final class TestNode: @unchecked Sendable {
    private(set) var server: NodeServer
    let configuration: NodeServerConfiguration

    private init(server: NodeServer, configuration: NodeServerConfiguration) {
        self.server = server
        self.configuration = configuration
    }

    static func start(
        _ name: String, backend: StoreBackend = .sqlite, configure: (inout NodeServerConfiguration) -> Void = { _ in }
    ) async throws -> TestNode {
        var configuration = Fixtures.nodeConfiguration(name)
        configuration.adminPort = -1
        if backend == .postgres { configuration.store = try PostgresTestCluster.newDatabase() }
        configure(&configuration)
        let server = try await NodeServer.start(
            configuration: configuration, group: Fixtures.group, logger: Fixtures.logger)
        return TestNode(server: server, configuration: configuration)
    }

    var dev: DevIdentityProvider { server.prepared.devIdentityProvider! }

    /// A raw sync stream (nothing sent yet).
    func connect() async throws -> SyncTestClient {
        try await SyncTestClient.connect(url: server.url, caFile: server.prepared.certificatePath)
    }

    /// HELLO, nonce, AUTHENTICATE with a dev token, then SYNC from `cursor`.
    func session(_ user: UserID, device: UUID, cursor: UInt64 = 0, features: FeatureSet = .all) async throws
        -> SyncTestClient
    {
        let client = try await connect()
        _ = try await client.hello(features: features)
        _ = try await client.authenticate(user: user, device: device, dev: dev)
        _ = try await client.sync(from: cursor)
        return client
    }

    /// Graceful stop and a new start on the same data directory (a new port).
    func restart() async throws {
        await server.shutdown()
        server = try await NodeServer.start(
            configuration: configuration, group: Fixtures.group, logger: Fixtures.logger)
    }

    func stop() async { await server.shutdown() }

    /// Starts the node again after `stop()`, on the same data directory and the same port
    /// (the listener binds with SO_REUSEADDR), so clients configured with `server.url`
    /// reach it again by reconnecting.
    func startAgain() async throws {
        var again = configuration
        again.port = server.transport.port
        server = try await NodeServer.start(configuration: again, group: Fixtures.group, logger: Fixtures.logger)
    }
}

/// The store a test node runs on: the suites that take it pass on both.
enum StoreBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }
}

struct CommandFailed: Error, CustomStringConvertible {
    var error: ErrorFrame
    var description: String { "ERROR \(error.code) (\(error.code.wireValue)): \(error.reason)" }
}

extension SyncTestClient {
    /// HELLO -> WELCOME.
    func hello(features: FeatureSet = .all) async throws -> Welcome {
        send(.hello(Hello(features: features, agent: "lamina-integration-tests")))
        let frame = try await nextFrame()
        guard case .welcome(let welcome) = frame else { throw UnexpectedEvent(expected: "WELCOME", got: .frame(frame)) }
        return welcome
    }

    /// NONCE_REQUEST -> NONCE.
    func nonce() async throws -> String {
        let id = UUID()
        send(.nonceRequest(NonceRequest(requestID: id)))
        let frame = try await answer(to: id)
        guard case .nonce(let nonce) = frame else { throw UnexpectedEvent(expected: "NONCE", got: .frame(frame)) }
        return nonce.nonce
    }

    /// Sends AUTHENTICATE with `token`; the answer (AUTHENTICATED or ERROR).
    func authenticate(token: String, device: UUID) async throws -> Frame {
        let id = UUID()
        send(.authenticate(Authenticate(requestID: id, identityToken: token, deviceID: device)))
        return try await answer(to: id)
    }

    /// Nonce, dev token, AUTHENTICATE; throws unless AUTHENTICATED.
    func authenticate(user: UserID, device: UUID, dev: DevIdentityProvider) async throws -> Authenticated {
        let token = try dev.mintToken(user: user, nonce: try await nonce())
        let frame = try await authenticate(token: token, device: device)
        guard case .authenticated(let authenticated) = frame else {
            if case .error(let error) = frame { throw CommandFailed(error: error) }
            throw UnexpectedEvent(expected: "AUTHENTICATED", got: .frame(frame))
        }
        return authenticated
    }

    /// SYNC from `cursor`: the backlog's changes and the ACK's cursor.
    func sync(from cursor: UInt64) async throws -> (changes: [Change], cursor: UInt64) {
        let id = UUID()
        let before = seenChangeCount
        send(.sync(SyncRequest(requestID: id, cursor: cursor)))
        let frame = try await answer(to: id)
        guard case .ack(let ack) = frame else { throw UnexpectedEvent(expected: "ACK", got: .frame(frame)) }
        return (Array(seenChanges.dropFirst(before)), ack.cursor ?? cursor)
    }

    /// Sends a command and awaits its ACK (throws ``CommandFailed`` on ERROR).
    @discardableResult
    func command(_ frame: Frame, id: UUID) async throws -> Ack {
        send(frame)
        let answer = try await answer(to: id)
        switch answer {
        case .ack(let ack): return ack
        case .error(let error): throw CommandFailed(error: error)
        default: throw UnexpectedEvent(expected: "ACK or ERROR", got: .frame(answer))
        }
    }

    /// The frame answering `id` (ACK, ERROR, NONCE, AUTHENTICATED); changes met on the way are kept.
    func answer(to id: UUID, timeout: TimeAmount = .seconds(30)) async throws -> Frame {
        while true {
            let frame = try await nextFrame(timeout: timeout)
            switch frame {
            case .ack(let ack) where ack.requestID == id: return frame
            case .error(let error) where error.requestID == id || error.isFatal: return frame
            case .nonce(let nonce) where nonce.requestID == id: return frame
            case .authenticated(let a) where a.requestID == id: return frame
            default: keep(frame)
            }
        }
    }

    /// Waits until a change matching `predicate` has arrived (looking at kept ones first).
    func change(where predicate: (Change) -> Bool, timeout: TimeAmount = .seconds(30)) async throws -> Change {
        if let found = seenChanges.first(where: predicate) { return found }
        while true {
            let frame = try await nextFrame(timeout: timeout)
            keep(frame)
            if let found = Self.changes(in: frame).first(where: predicate) { return found }
        }
    }

    /// A message-created change for `message`.
    func message(_ message: MessageID) async throws -> Message {
        let change = try await change {
            if case .messageCreated(let m) = $0.event { return m.id == message }
            return false
        }
        guard case .messageCreated(let m) = change.event else { fatalError("unreachable") }
        return m
    }
}
