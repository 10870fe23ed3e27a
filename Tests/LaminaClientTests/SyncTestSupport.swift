import Foundation
import LaminaModel
import LaminaWire
import Testing

@testable import LaminaClient

/// A thread-safe counter and log for closures the SDK calls.
final class Recorder<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [Value] = []
    private var waiters: [(condition: @Sendable ([Value]) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []

    func append(_ value: Value) {
        let ready = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            items.append(value)
            let now = items
            let (done, rest) = (waiters.filter { $0.condition(now) }, waiters.filter { !$0.condition(now) })
            waiters = rest
            return done.map(\.continuation)
        }
        ready.forEach { $0.resume() }
    }

    var all: [Value] { lock.withLock { items } }
    var count: Int { lock.withLock { items.count } }

    /// Suspends until `condition` holds for everything recorded (checked on each append).
    func waitUntil(_ condition: @escaping @Sendable ([Value]) -> Bool) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let done = lock.withLock { () -> Bool in
                if condition(items) { return true }
                waiters.append((condition, c))
                return false
            }
            if done { c.resume() }
        }
    }

    func waitFor(_ what: String, timeout: Duration = testWaitLimit, _ condition: @escaping @Sendable ([Value]) -> Bool)
        async throws
    {
        try await withTimeout(what, timeout) { await self.waitUntil(condition) }
    }
}

/// A delegate that records the operations it is told failed.
final class FailureRecordingDelegate: LaminaClientDelegate {
    let failures = Recorder<OutboxFailure>()
    func objectsDidChange(_ changes: [ObjectChange]) {}
    func didFailOperation(_ failure: OutboxFailure) { failures.append(failure) }
}

/// How long a test waits for something before it fails. Generous: a fake-node test takes
/// milliseconds alone, but when the whole suite starts at once (hundreds of tests, dozens of
/// real nodes) a test's tasks can wait tens of seconds for a cooperative thread.
let testWaitLimit: Duration = .seconds(90)

struct TimedOut: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Runs `body`, failing with `TimedOut` when it does not finish within `timeout`.
func withTimeout<T: Sendable>(
    _ what: String, _ timeout: Duration = testWaitLimit, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw TimedOut(what: what)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

/// Waits until `condition` holds, re-checking after every batch of object changes the
/// client's store commits (no polling).
func eventually(
    _ client: LaminaClient, _ what: String, timeout: Duration = testWaitLimit,
    _ condition: @escaping @Sendable () throws -> Bool
) async throws {
    let stream = client.changes()
    if try condition() { return }
    try await withTimeout(what, timeout) {
        for await _ in stream where try condition() { return }
        throw TimedOut(what: "\(what) (the store closed)")
    }
}

extension FakeNode {
    func waitFor(
        _ what: String, timeout: Duration = testWaitLimit, _ condition: @escaping @Sendable (NodeSnapshot) -> Bool
    ) async throws {
        try await withTimeout(what, timeout) { await self.waitUntil(condition) }
    }
}

/// A client of `user` in its own data directory, on the fake node. Its reconnect sleeps
/// wait for the node to be reachable (then take at most 2 ms of real time); `delays`
/// records every delay the engine asked for.
final class TestDevice: Sendable {
    let client: LaminaClient
    let node: FakeNode
    let user: UserID
    let tokenRequests = Recorder<String>()
    let delays = Recorder<Duration>()
    let events = Recorder<SyncEvent>()
    let badTokens: Bool

    /// With a `clock`, time is virtual: `now` reads it and every sleep advances it by the
    /// delay asked for, at once (after a scheduler yield).
    init(user: UserID, node: FakeNode, directory: URL, badTokens: Bool = false, clock: VirtualClock? = nil) throws {
        self.node = node
        self.user = user
        self.badTokens = badTokens
        let delays = self.delays
        let environment = SyncEnvironment(
            now: { clock?.now ?? Timestamp.now() },
            sleep: { d in
                delays.append(d)
                await node.waitUntilReachable()
                if let clock {
                    await Task.yield()
                    try Task.checkCancellation()
                    clock.advance(by: d)
                } else {
                    try await Task.sleep(for: min(d, .milliseconds(2)))
                }
            },
            random: { 0.5 })
        var config = LaminaConfiguration(
            nodeURL: URL(string: "https://node.test:7443")!,
            trust: .pinnedCertificate(directory.appendingPathComponent("node.pem")),
            dataDirectory: directory)
        // The fake node does not model history fetches: conversations that appear stay as sent.
        config.fetchesHistoryOnJoin = false
        client = try LaminaClient(configuration: config, user: user, environment: environment)
    }

    func connect() async throws {
        let node = self.node
        let user = self.user
        let tokens = tokenRequests
        let bad = badTokens
        try await client.connect(
            using: { () throws(ClientError) in try await node.connect() },
            identityToken: { nonce in
                tokens.append(nonce)
                return bad ? "\(user)|forged" : "\(user)|\(nonce)"
            })
        let events = self.events
        let stream = client.syncEvents
        Task { for await e in stream { events.append(e) } }
    }

    func text(_ s: String) throws -> MessageDraft { try client.newMessage(parts: [.with(text: s)]) }
}

/// Fresh directories for the devices of a test, removed afterwards.
func withDevices<T>(_ body: (URL) async throws -> T) async throws -> T {
    try await withTemporaryDirectory { dir in try await body(dir) }
}

func deviceDirectory(_ root: URL, _ name: String) throws -> URL {
    let dir = root.appendingPathComponent(name, isDirectory: true)
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
}

/// A wall clock that only moves when told.
final class VirtualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var ms: Int64
    init(start: Int64 = 1_000_000) { ms = start }
    var now: Timestamp { lock.withLock { Timestamp(millisecondsSince1970: ms) } }
    func advance(by d: Duration) {
        let add = d.components.seconds * 1_000 + d.components.attoseconds / 1_000_000_000_000_000
        lock.withLock { ms += add }
    }
}
