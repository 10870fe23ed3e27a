import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaTransport
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A load client for one sync stream: frames are handled on the stream's event loop; the
/// async API awaits answers by request id (promises), so many commands can be in flight.
final class BenchSyncClient: TransportStreamDelegate, @unchecked Sendable {
    let connection: TransportConnection
    let stream: TransportStream
    private var decoder = FrameDecoder()
    // Event loop only.
    private var waiting: [UUID: EventLoopPromise<Frame>] = [:]
    private var onFrame: (@Sendable (Frame) -> Void)?
    private var welcome: EventLoopPromise<Frame>?
    let closed: EventLoopPromise<Void>
    /// Why the stream failed (an undecodable frame, e.g. an unknown change kind; a fatal
    /// ERROR; the stream closing before `close()`), for load loops to stop on instead of
    /// waiting for deliveries that cannot come.
    let failure = NIOLockedValueBox<String?>(nil)
    private let closing = NIOLockedValueBox(false)
    /// Bytes received on the stream so far.
    let bytesReceived = NIOLockedValueBox(0)

    private init(connection: TransportConnection, stream: TransportStream) {
        self.connection = connection
        self.stream = stream
        self.closed = stream.eventLoop.makePromise()
    }

    static func connect(url: String, caFile: String, group: EventLoopGroup) async throws -> BenchSyncClient {
        try await connect(url: url, tls: try TLSContext(.client(trust: .caFile(caFile))), group: group)
    }

    /// A new TLS connection with one sync stream, sharing `tls` (a loader of many connections
    /// loads its trust once).
    static func connect(url: String, tls: TLSContext, group: EventLoopGroup) async throws -> BenchSyncClient {
        let connection = try await TransportConnection.connect(to: url, tls: tls, group: group)
        return try await open(on: connection)
    }

    /// Another sync stream on an open connection.
    static func open(on connection: TransportConnection) async throws -> BenchSyncClient {
        let stream = try await connection.openStream(method: "POST", path: NodeServer.syncPath)
        let client = BenchSyncClient(connection: connection, stream: stream)
        try await stream.eventLoop.submit { stream.delegate = client }.get()
        return client
    }

    /// Observes every frame that is not an awaited answer (changes).
    func observe(_ body: @escaping @Sendable (Frame) -> Void) async throws {
        try await stream.eventLoop.submit { self.onFrame = body }.get()
    }

    private func write(_ frame: Frame) {
        var buffer = ByteBuffer()
        try! frame.encode(into: &buffer)
        stream.write(buffer, promise: nil)
    }

    /// Sends a frame that gets no awaited answer (e.g. PING: the PONG goes to the observer).
    func send(_ frame: Frame) {
        stream.eventLoop.execute { self.write(frame) }
    }

    /// Sends `frame` and completes with the frame answering `id`.
    /// On the stream's event loop it writes at once (the closed-loop pump sends from ACKs).
    func request(_ frame: Frame, id: UUID) -> EventLoopFuture<Frame> {
        let promise = stream.eventLoop.makePromise(of: Frame.self)
        if stream.eventLoop.inEventLoop {
            waiting[id] = promise
            write(frame)
        } else {
            stream.eventLoop.execute {
                self.waiting[id] = promise
                self.write(frame)
            }
        }
        return promise.futureResult
    }

    func hello(features: FeatureSet = .all) async throws {
        let promise = stream.eventLoop.makePromise(of: Frame.self)
        stream.eventLoop.execute {
            self.welcome = promise
            self.write(.hello(Hello(features: features, agent: "lamina-bench")))
        }
        _ = try await promise.futureResult.get()
    }

    /// HELLO, nonce, AUTHENTICATE with a dev token; then SYNC from `cursor`.
    func login(
        user: UserID, device: UUID, dev: DevIdentityProvider, cursor: UInt64? = nil, features: FeatureSet = .all
    ) async throws {
        try await hello(features: features)
        let nonceID = UUID()
        guard
            case .nonce(let nonce) = try await request(.nonceRequest(NonceRequest(requestID: nonceID)), id: nonceID)
                .get()
        else { throw BenchFailure("no NONCE") }
        let authID = UUID()
        let token = try dev.mintToken(user: user, nonce: nonce.nonce)
        let answer = try await request(
            .authenticate(Authenticate(requestID: authID, identityToken: token, deviceID: device)), id: authID
        ).get()
        guard case .authenticated = answer else { throw BenchFailure("authentication failed: \(answer)") }
        if let cursor {
            let syncID = UUID()
            guard case .ack = try await request(.sync(SyncRequest(requestID: syncID, cursor: cursor)), id: syncID).get()
            else { throw BenchFailure("SYNC not acknowledged") }
        }
    }

    func close() async {
        closing.withLockedValue { $0 = true }
        stream.reset()
        try? await connection.close()
    }

    // MARK: delegate (event loop)

    func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
        bytesReceived.withLockedValue { $0 += data.readableBytes }
        decoder.feed(data)
        do {
            while let frame = try decoder.next() { deliver(frame) }
        } catch {
            fail(BenchFailure("undecodable frame from the node: \(error)"))
            stream.reset()  // the decoder cannot resynchronise: nothing more comes from this stream
        }
    }

    private func deliver(_ frame: Frame) {
        let id: UUID?
        switch frame {
        case .welcome:
            welcome?.succeed(frame)
            welcome = nil
            return
        case .ack(let ack): id = ack.requestID
        case .nonce(let nonce): id = nonce.requestID
        case .authenticated(let a): id = a.requestID
        case .error(let error):
            if error.isFatal {
                fail(BenchFailure("fatal error: \(error.code) \(error.reason)"))
                return
            }
            id = error.requestID
        default: id = nil
        }
        if let id, let promise = waiting.removeValue(forKey: id) {
            promise.succeed(frame)
        } else {
            onFrame?(frame)
        }
    }

    private func fail(_ error: Error) {
        if !closing.withLockedValue({ $0 }) {
            failure.withLockedValue { if $0 == nil { $0 = String(describing: error) } }
        }
        let pending = waiting
        waiting = [:]
        for promise in pending.values { promise.fail(error) }
        welcome?.fail(error)
        welcome = nil
    }

    func streamDidClose(_ stream: TransportStream, error: TransportError?) {
        fail(error ?? BenchFailure("stream closed"))
        closed.succeed(())
    }
}

struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
