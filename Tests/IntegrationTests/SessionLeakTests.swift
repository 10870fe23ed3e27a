import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// Issue 15, item 1, the must-show's figure: `lamina-node` in its own process (so its
/// resident set is its own, not the test process's) opens and closes 10,000 sync sessions, 500
/// of them reset in the middle of a 512 KiB frame, and its RSS stays within a small bound of
/// where it was, while a healthy pair on the same node keeps talking with bounded latency.
/// (`ResourceLimitTests.closedSessionsAndHalfFramesAreReleased` checks the same in-process
/// with exact counts of live bridges and sessions.) `LAMINA_LEAK_SESSIONS` changes the count;
/// the mid-frame ones stay one in twenty.
@Suite struct SessionLeakTests {
    /// RSS growth allowed over the measured round. Before the fix the round left about
    /// 95 MB (9.5 KB a session) plus 500 × (256 KiB payload + decoder buffer) ≥ 125 MiB behind;
    /// what may grow legitimately: SQLite's page caches (writer and readers, ~2 MiB each) over
    /// a sessions table 10,000 rows longer, and allocator arenas.
    static let allowedGrowthBytes = 32 * 1_048_576
    /// Sessions opened at once (each worker one connection, its sessions one after another).
    static let workers = 16

    static func residentBytes(pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return (Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) * 1024
    }

    @Test func tenThousandClosedSessionsLeaveTheNodesMemoryWhereItWas() async throws {
        let total = ProcessInfo.processInfo.environment["LAMINA_LEAK_SESSIONS"].flatMap(Int.init) ?? 10_000
        // Bob only receives: the node hears nothing from him after his SYNC, and closes a
        // session that sent nothing for the idle timeout (120 s by default). Alone this test
        // takes ~20 s; in a loaded CI run it took 164 s, bob's stream was closed as idle and the
        // healthy round trip failed ("expected a frame, got end"), or both went idle while the
        // test waited for the sessions to settle and the count never came down to 2.
        let node = try await NodeProcess.start(
            in: Fixtures.temporaryDirectory("leak-process"), arguments: ["--idle-timeout", "3600"])
        let data = node.dataDirectory
        let url = "https://127.0.0.1:\(node.syncPort)"
        let certificate = data.appendingPathComponent(NodeBootstrap.Files.certificate).path
        let dev = try DevIdentityProvider.loadOrCreate(in: data.appendingPathComponent(NodeBootstrap.Files.devIdentity))

        func login(_ user: UserID) async throws -> SyncTestClient {
            let client = try await SyncTestClient.connect(url: url, caFile: certificate)
            _ = try await client.hello()
            _ = try await client.authenticate(user: user, device: UUID(), dev: dev)
            _ = try await client.sync(from: 0)
            return client
        }
        let alice = try await login("alice")
        let bob = try await login("bob")
        let healthy = ResourceLimitTests.HealthyPair(
            alice: alice, bob: bob, conversation: try await MessagingTests.conversation(alice, with: ["alice", "bob"]))

        /// Waits (on the node's own readiness report) until only the healthy pair's sessions are open.
        /// Generous: alone a round takes ~12 s, but in a full suite on 2 cores it took 40-70 s and
        /// the node's closing of 10,000 sessions lagged behind by as much (a 60 s wait ran out once).
        func settled() async throws -> Int {
            try await ResourceLimitTests.eventuallyAsync(
                "only the healthy pair's sessions open", timeout: .seconds(180)
            ) {
                (try? await HTTPGet.fetch(port: node.adminPort, path: "/health/ready").body.contains("sessions ok 2 of"))
                    == true
            }
            return Self.residentBytes(pid: node.pid)
        }

        /// `count` sessions over ``workers`` connections: half HELLO then END_STREAM, half
        /// authenticated then reset; one in twenty of those reset after 256 KiB of a 512 KiB
        /// SEND_MESSAGE (a PING in the same write shows the node has been reading it).
        func round(_ count: Int) async throws -> (midFrame: Int, slowest: Duration) {
            let midFrame = ManagedCounter()
            let slowest = try await withThrowingTaskGroup(of: Duration.self) { group in
                for worker in 0..<Self.workers {
                    group.addTask {
                        let first = try await SyncTestClient.connect(url: url, caFile: certificate)
                        var slowest = Duration.zero
                        var n = 0
                        for i in stride(from: worker, to: count, by: Self.workers) {
                            // Worker 0 also checks on the healthy pair every 25 sessions.
                            if worker == 0, n % 25 == 0 { slowest = max(slowest, try await healthy.roundTrip()) }
                            let client = n == 0 ? first : try await first.another()
                            n += 1
                            _ = try await client.hello()
                            if i % 2 == 0 {
                                client.finish()
                                _ = try await client.framesUntilEnd()
                                continue
                            }
                            _ = try await client.authenticate(user: UserID("leak\(i % 50)"), device: UUID(), dev: dev)
                            if i % 20 == 1 {
                                client.sendRaw(
                                    ResourceLimitTests.encoded(.ping(Ping(payload: 5)))
                                        + ResourceLimitTests.header(
                                            type: ResourceLimitTests.sendMessageType, length: 512 * 1024)
                                        + [UInt8](repeating: 3, count: 256 * 1024))
                                #expect(try await client.answerPong(5))
                                midFrame.add()
                            }
                            client.resetStream()
                        }
                        await first.close()
                        return slowest
                    }
                }
                return try await group.reduce(Duration.zero) { max($0, $1) }
            }
            return (midFrame.value, slowest)
        }

        // A first round of a tenth the size lets the allocator and SQLite's caches reach
        // their working set (the same concurrency, so the same peak).
        _ = try await round(max(200, total / 10))
        let before = try await settled()
        let clock = ContinuousClock()
        let start = clock.now
        let measured = try await round(total)
        let took = clock.now - start
        let after = try await settled()
        print(
            "session leak test: \(total) sessions opened and closed (\(measured.midFrame) reset mid-frame) in \(took); node RSS \(before / 1_048_576) -> \(after / 1_048_576) MiB (\((after - before) / max(1, total)) bytes a session); slowest healthy round trip \(measured.slowest)"
        )
        #expect(measured.midFrame == (total + 18) / 20)
        #expect(
            after - before < Self.allowedGrowthBytes,
            "node RSS grew \(after - before) bytes over \(total) closed sessions")
        #expect(measured.slowest < .seconds(10))
        try await healthy.expectHealthy()
        await healthy.close()
        #expect(try await node.stop() == 0)
    }
}

/// A counter the test's tasks add to.
final class ManagedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() {
        lock.lock()
        count += 1
        lock.unlock()
    }
    var value: Int {
        lock.lock()
        defer { lock.unlock() }
        return count
    }
}
