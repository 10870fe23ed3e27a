import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaStoreTestSupport
import LaminaTestPostgres
import LaminaWire
import Testing

@testable import LaminaNode
@testable import LaminaStore

/// A SessionOutbound that records frames; tests await the next frame with a timeout.
final class RecordingOutbound: SessionOutbound, @unchecked Sendable {
    private let lock = NSLock()
    private var frames: [Frame] = []
    private var waiter: (id: Int, continuation: CheckedContinuation<Frame?, Never>)?
    private var nextWaiterID = 0
    private(set) var closedWith: ErrorFrame??
    /// Every frame ever sent, in order.
    private(set) var history: [Frame] = []

    func send(_ frames: [Frame]) {
        lock.lock()
        history += frames
        self.frames += frames
        let w = waiter
        var first: Frame?
        if w != nil, !self.frames.isEmpty {
            first = self.frames.removeFirst()
            waiter = nil
        }
        lock.unlock()
        if let w, let first { w.continuation.resume(returning: first) }
    }

    func close(with error: ErrorFrame?) {
        lock.lock()
        closedWith = .some(error)
        if let error {
            frames.append(.error(error))
            history.append(.error(error))
        }
        let w = waiter
        var first: Frame?
        if w != nil, !frames.isEmpty { first = frames.removeFirst() }
        waiter = nil
        lock.unlock()
        w?.continuation.resume(returning: first)
    }

    var isClosed: Bool {
        lock.lock()
        defer { lock.unlock() }
        return closedWith != nil
    }

    /// The next frame, or nil after `timeout` (or when closed with nothing left).
    func next(timeout: Duration = .seconds(10)) async -> Frame? {
        let id = newWaiterID()
        return await withCheckedContinuation { (c: CheckedContinuation<Frame?, Never>) in
            lock.lock()
            if !frames.isEmpty {
                let f = frames.removeFirst()
                lock.unlock()
                c.resume(returning: f)
                return
            }
            if closedWith != nil {
                lock.unlock()
                c.resume(returning: nil)
                return
            }
            waiter = (id, c)
            lock.unlock()
            Task {
                try? await Task.sleep(for: timeout)
                self.expire(id)
            }
        }
    }

    private func newWaiterID() -> Int {
        lock.lock()
        defer { lock.unlock() }
        nextWaiterID += 1
        return nextWaiterID
    }

    private func expire(_ id: Int) {
        lock.lock()
        guard let w = waiter, w.id == id else {
            lock.unlock()
            return
        }
        waiter = nil
        lock.unlock()
        w.continuation.resume(returning: nil)
    }

    /// Frames received so far and not yet taken.
    var pending: [Frame] {
        lock.lock()
        defer { lock.unlock() }
        return frames
    }
}

struct EngineTestError: Error, CustomStringConvertible {
    var description: String
}

/// A node engine over a temporary store with the dev identity provider.
final class EngineHarness: @unchecked Sendable {
    let directory: URL
    let store: NodeStore
    let dev: DevIdentityProvider
    let engine: NodeEngine

    init(
        extraProviders: [IdentityProvider] = [], storage: StorageConfiguration = StorageConfiguration(),
        backend: StoreBackend = .sqlite,
        configure: (inout NodeEngineConfiguration) -> Void = { _ in }
    ) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("lamina-engine-\(UUID().uuidString)")
        switch backend {
        case .sqlite:
            store = try NodeStore(path: directory.appendingPathComponent("node.sqlite").path, configuration: storage)
        case .postgres:
            store = try NodeStore(location: .postgres(try PostgresTestCluster.newLocation()), configuration: storage)
        }
        dev = try DevIdentityProvider.loadOrCreate(in: directory.appendingPathComponent("keys"))
        var configuration = NodeEngineConfiguration(
            nodeID: NodeID(7), identityProviders: [dev.provider] + extraProviders)
        configure(&configuration)
        engine = try NodeEngine(store: store, configuration: configuration)
    }

    func close() async {
        await engine.shutdown()
        try? store.close()
        try? FileManager.default.removeItem(at: directory)
    }

    /// A session after HELLO/WELCOME.
    func open(features: FeatureSet = .all) async throws -> Client {
        let outbound = RecordingOutbound()
        let session = engine.openSession(outbound: outbound)
        session.receive(.hello(Hello(features: features, agent: "test")))
        guard case .welcome = try await outbound.expectNext() else { throw EngineTestError(description: "no WELCOME") }
        return Client(session: session, outbound: outbound)
    }

    /// A fresh nonce for `client`.
    func nonce(_ client: Client) async throws -> String {
        let id = UUID()
        client.session.receive(.nonceRequest(NonceRequest(requestID: id)))
        guard case .nonce(let nonce) = try await client.outbound.expectNext(), nonce.requestID == id else {
            throw EngineTestError(description: "no NONCE")
        }
        return nonce.nonce
    }

    /// An authenticated session of `user` on `device`.
    func connect(_ user: UserID, device: UUID = UUID(), features: FeatureSet = .all, sync: Bool = true) async throws
        -> Client
    {
        var client = try await open(features: features)
        let token = try dev.mintToken(user: user, nonce: try await nonce(client))
        let request = UUID()
        client.session.receive(.authenticate(Authenticate(requestID: request, identityToken: token, deviceID: device)))
        guard case .authenticated(let a) = try await client.outbound.expectNext(), a.requestID == request else {
            throw EngineTestError(description: "not AUTHENTICATED")
        }
        client.user = user
        client.device = device
        client.sessionToken = a.sessionToken
        if sync { _ = try await client.sync(from: 0) }
        return client
    }
}

struct Client {
    var session: NodeSession
    var outbound: RecordingOutbound
    var user: UserID = "nobody"
    var device = UUID()
    var sessionToken = ""

    /// Sends SYNC and returns the changes before its ACK, and the ACK's cursor.
    func sync(from cursor: UInt64) async throws -> (changes: [Change], cursor: UInt64) {
        let id = UUID()
        session.receive(.sync(SyncRequest(requestID: id, cursor: cursor)))
        var changes: [Change] = []
        while true {
            switch try await outbound.expectNext() {
            case .change(let c): changes.append(c)
            case .changeBatch(let b): changes += b.changes
            case .ack(let ack) where ack.requestID == id: return (changes, ack.cursor ?? 0)
            case let other: throw EngineTestError(description: "unexpected \(other) during sync")
            }
        }
    }

    /// Sends a command and returns its ACK or ERROR (skipping live changes, returned too).
    @discardableResult
    func command(_ frame: Frame) async throws -> (reply: Frame, changes: [Change]) {
        session.receive(frame)
        var changes: [Change] = []
        while true {
            let f = try await outbound.expectNext()
            switch f {
            case .change(let c): changes.append(c)
            case .changeBatch(let b): changes += b.changes
            case .ack(let a) where a.requestID == frame.commandID: return (f, changes)
            case .error(let e) where e.requestID == frame.commandID: return (f, changes)
            default: throw EngineTestError(description: "unexpected \(f)")
            }
        }
    }

    /// The next live changes (one CHANGE or CHANGE_BATCH frame).
    func nextChanges() async throws -> [Change] {
        switch try await outbound.expectNext() {
        case .change(let c): return [c]
        case .changeBatch(let b): return b.changes
        case let other: throw EngineTestError(description: "expected changes, got \(other)")
        }
    }
}

extension RecordingOutbound {
    func expectNext(timeout: Duration = .seconds(10)) async throws -> Frame {
        guard let frame = await next(timeout: timeout) else {
            throw EngineTestError(description: "no frame within \(timeout)")
        }
        return frame
    }
}

extension Frame {
    var ack: Ack? { if case .ack(let a) = self { a } else { nil } }
    var errorFrame: ErrorFrame? { if case .error(let e) = self { e } else { nil } }
}

func textPart(_ text: String) -> MessagePart {
    MessagePart(mimeType: "text/plain", content: .inline(Array(text.utf8)))
}
