import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import NIOConcurrencyHelpers

/// Clients of a real `TestNode` for the SDK tests: fast reconnects, dev tokens, and
/// recorders of what a client reported (object changes, sync events).
enum ClientHarness {
    /// A quick reconnect policy, so a node that comes back is found within a second.
    static let fastReconnect = ReconnectPolicy(
        initialDelay: .milliseconds(50), multiplier: 2, maxDelay: .milliseconds(500), jitter: 0.5)

    /// A client (one device) of `user` on `node`, with its own temporary data directory.
    static func device(_ user: UserID, on node: TestNode, configure: (inout LaminaConfiguration) -> Void = { _ in })
        throws -> LaminaClient
    {
        var configuration = LaminaConfiguration(
            nodeURL: URL(string: node.server.url)!,
            trust: .certificateAuthorities(URL(fileURLWithPath: node.server.prepared.certificatePath)),
            dataDirectory: Fixtures.temporaryDirectory("sdk-\(user)"),
            reconnect: fastReconnect)
        configure(&configuration)
        return try LaminaClient(configuration: configuration, user: user)
    }

    /// Connects with dev tokens minted by the node that is running when a token is asked for
    /// (the node may have been restarted); `tokens` counts the requests.
    static func connect(_ client: LaminaClient, on node: TestNode, tokens: Counter? = nil) async throws {
        let user = client.user
        try await client.connect { nonce in
            tokens?.increment()
            return try node.dev.mintToken(user: user, nonce: nonce)
        }
    }

    /// Connects and returns once the session is live (synced, outbox flushing), with the
    /// recorder of the client's sync events (their one consumer).
    static func connectLive(_ client: LaminaClient, on node: TestNode, tokens: Counter? = nil) async throws -> Recorder<
        SyncEngine.Event
    > {
        let events = Recorder(client.syncEvents)
        try await connect(client, on: node, tokens: tokens)
        try await events.wait("\(client.user)'s session to be live") { $0.contains(.state(.live)) }
        return events
    }

    /// How many messages the node holds in `conversation` (each accepted exactly once).
    static func nodeMessageCount(_ node: TestNode, _ conversation: ConversationID) async throws -> Int {
        try await node.server.store.read { r in try r.messageCount(of: conversation) }
    }

    /// Waits until `condition` holds on `client`'s store (re-checked after each batch).
    static func waitUntil(
        _ client: LaminaClient, _ what: String, timeout: Duration = .seconds(60),
        _ condition: @escaping @Sendable () throws -> Bool
    ) async throws {
        try await ClientEndToEndTests.waitUntil(client, what, timeout: timeout, condition)
    }
}

/// A thread-safe counter.
final class Counter: Sendable {
    private let box = NIOLockedValueBox(0)
    func increment() { box.withLockedValue { $0 += 1 } }
    var value: Int { box.withLockedValue { $0 } }
}

/// Everything a source reported, in order, with waits on what has arrived so far.
final class Recorder<Element: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [Element] = []
    private var waiters: [UUID: AsyncStream<Void>.Continuation] = [:]
    private var task: Task<Void, Never>?

    init<S: AsyncSequence & Sendable>(_ source: S) where S.Element == Element {
        task = Task { [weak self] in
            do {
                for try await item in source { self?.append(item) }
            } catch {}
        }
    }

    deinit { task?.cancel() }

    var all: [Element] { lock.withLock { items } }

    private func append(_ item: Element) {
        let toWake = lock.withLock {
            items.append(item)
            return Array(waiters.values)
        }
        for w in toWake { w.yield() }
    }

    /// Returns once `condition` holds on everything recorded; throws after `timeout`.
    func wait(_ what: String, timeout: Duration = .seconds(60), _ condition: @escaping @Sendable ([Element]) -> Bool)
        async throws
    {
        let id = UUID()
        let (signals, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        lock.withLock { waiters[id] = continuation }
        defer { lock.withLock { waiters[id] = nil } }
        if condition(all) { return }
        let met = await withTaskGroup(of: Bool.self) { group in
            group.addTask { [self] in
                for await _ in signals { if condition(self.all) { return true } }
                return false
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            continuation.finish()
            return first
        }
        if !met { throw ClientWaitTimeout(waitingFor: what) }
    }
}

extension Recorder where Element == [ObjectChange] {
    /// Every recorded change, flattened.
    var changes: [ObjectChange] { all.flatMap { $0 } }
}
