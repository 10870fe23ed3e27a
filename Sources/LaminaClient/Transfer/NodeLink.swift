import Foundation
import LaminaModel
import LaminaTransport
import NIOCore

/// A live, authenticated HTTP/2 connection to the node, lent to a content transfer: the
/// connection of the client's sync stream, and the session token it authenticated.
struct NodeLease: Sendable {
    let connection: TransportConnection
    let token: String
}

/// The client's one connection to its node, shared by the sync stream and the content
/// streams (so HTTP/2 flow control and stream scheduling keep messages moving while a
/// large file transfers). The sync connector registers each new connection here, and the
/// session token once the sync stream is authenticated; transfers borrow both with `lease()`,
/// waiting while the client is connecting, failing with `.notConnected` once it is stopped.
final class NodeLink: @unchecked Sendable {
    private enum Phase {
        /// The client is disconnected: leases fail at once.
        case stopped
        /// The client is connecting (or reconnecting): leases wait.
        case waiting
        case ready(NodeLease)
    }

    private let lock = NSLock()
    private var phase: Phase = .stopped
    /// The connection the current sync stream runs on (authenticated or not yet).
    private var connection: TransportConnection?
    private var waiters: [UUID: CheckedContinuation<NodeLease, any Error>] = [:]
    private var readyObservers: [@Sendable () -> Void] = []

    /// Calls `body` each time a lease becomes available (after connect and reconnects).
    func onReady(_ body: @escaping @Sendable () -> Void) { lock.withLock { readyObservers.append(body) } }

    /// The client started connecting: leases wait from now on.
    func start() {
        lock.withLock { if case .stopped = phase { phase = .waiting } }
    }

    /// The client disconnected: waiting and future leases fail with `.notConnected`.
    func stop() {
        let failed = lock.withLock { () -> [CheckedContinuation<NodeLease, any Error>] in
            phase = .stopped
            connection = nil
            defer { waiters.removeAll() }
            return Array(waiters.values)
        }
        for waiter in failed { waiter.resume(throwing: ClientError(.notConnected, "the client is disconnected")) }
    }

    /// A new sync connection is up (not yet authenticated).
    func connected(_ new: TransportConnection) {
        lock.withLock {
            connection = new
            if case .ready = phase { phase = .waiting }
        }
        new.closeFuture.whenComplete { [weak self] _ in self?.lost(new) }
    }

    /// The sync stream on `on` was authenticated: `token` is the session's.
    func authenticated(token: String, on conn: TransportConnection) {
        let (resumed, lease, observers) = lock.withLock {
            () -> ([CheckedContinuation<NodeLease, any Error>], NodeLease?, [@Sendable () -> Void]) in
            guard connection === conn, case .waiting = phase else { return ([], nil, []) }
            let lease = NodeLease(connection: conn, token: token)
            phase = .ready(lease)
            defer { waiters.removeAll() }
            return (Array(waiters.values), lease, readyObservers)
        }
        guard let lease else { return }
        for waiter in resumed { waiter.resume(returning: lease) }
        for observer in observers { observer() }
    }

    /// The connection closed: leases wait for the next one.
    func lost(_ conn: TransportConnection) {
        lock.withLock {
            guard connection === conn else { return }
            connection = nil
            if case .ready = phase { phase = .waiting }
        }
    }

    /// The node refused `token` (401 on a content stream): forget it and close the
    /// connection, so the sync engine reconnects and authenticates anew.
    func reject(_ token: String, store: LocalStore) async {
        let conn = lock.withLock { () -> TransportConnection? in
            guard case .ready(let lease) = phase, lease.token == token else { return nil }
            phase = .waiting
            return lease.connection
        }
        guard let conn else { return }
        try? await store.forgetSessionTokenAsync(ifStill: token)
        conn.close().whenComplete { _ in }
    }

    /// The current lease, without waiting.
    var current: NodeLease? {
        lock.withLock { if case .ready(let lease) = phase { lease } else { nil } }
    }

    /// Whether the client is connected or connecting.
    var isStarted: Bool { lock.withLock { if case .stopped = phase { false } else { true } } }

    /// Closes the current connection (tests use it to interrupt transfers).
    func dropConnection() async {
        let conn = lock.withLock { connection }
        try? await conn?.close()
    }

    /// The live authenticated connection; waits while connecting; `.notConnected` when the
    /// client is disconnected; `.cancelled` when the task is.
    func lease() async throws -> NodeLease {
        let id = UUID()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<NodeLease, any Error>) in
                let outcome: Result<NodeLease, ClientError>? = lock.withLock {
                    if Task.isCancelled { return .failure(ClientError(.cancelled, "the transfer was cancelled")) }
                    switch phase {
                    case .stopped: return .failure(ClientError(.notConnected, "the client is disconnected"))
                    case .ready(let lease): return .success(lease)
                    case .waiting:
                        waiters[id] = continuation
                        return nil
                    }
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let waiter = lock.withLock { waiters.removeValue(forKey: id) }
            waiter?.resume(throwing: ClientError(.cancelled, "the transfer was cancelled"))
        }
    }
}
