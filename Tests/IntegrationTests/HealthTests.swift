import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaProcess
import LaminaWire
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The admin port's liveness and readiness (issue 15, item 10): readiness fails when the
/// store cannot write or the session slots are nearly all taken, says why, and recovers.
@Suite struct HealthTests {
    /// The value of an unlabelled counter in a `/metrics` body.
    static func counter(_ name: String, in body: String) -> Int? {
        body.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Int($0.split(separator: " ")[1]) }
    }

    @Test func readinessFailsWhileSessionSlotsAreNearlyExhaustedAndLivenessStays() async throws {
        let node = try await TestNode.start("health-slots") {
            $0.adminPort = 0
            $0.maxSessions = 4
        }
        let admin = try #require(node.server.admin)
        let ready = try await HTTPGet.fetch(port: admin.port, path: "/health/ready")
        #expect(ready.status == 200)
        #expect(ready.body.hasPrefix("ready\n"))
        #expect(ready.body.contains("store ok writable"))
        #expect(ready.body.contains("sessions ok 0 of 4"))

        // Every slot taken (95 % of 4 is 3.8).
        var clients: [SyncTestClient] = []
        for i in 0..<4 { clients.append(try await node.session(UserID("h\(i)"), device: UUID())) }
        let full = try await HTTPGet.fetch(port: admin.port, path: "/health/ready")
        #expect(full.status == 503)
        #expect(full.body.hasPrefix("not ready\n"))
        #expect(full.body.contains("sessions failing 4 of 4 (nearly exhausted)"))
        #expect(try await HTTPGet.fetch(port: admin.port, path: "/health").status == 503)
        #expect(try await HTTPGet.fetch(port: admin.port, path: "/health/live").status == 200)
        // Not ready for new clients; the connected ones keep sending and receiving.
        let pair = ResourceLimitTests.HealthyPair(
            alice: clients[0], bob: clients[1],
            conversation: try await MessagingTests.conversation(clients[0], with: ["h0", "h1"]))
        try await pair.expectHealthy()

        await clients.removeLast().close()
        try await ResourceLimitTests.eventually("a slot to free up") { node.server.sessionCount == 3 }
        let again = try await HTTPGet.fetch(port: admin.port, path: "/health/ready")
        #expect(again.status == 200, "\(again.body)")
        #expect(again.body.contains("sessions ok 3 of 4"))

        let metrics = try await HTTPGet.fetch(port: admin.port, path: "/metrics")
        #expect(metrics.body.contains("lamina_connections_open 3"))
        #expect(metrics.body.contains("lamina_storage_errors_total 0"))
        // Group commits and the commands they carried: both grow with one more send, and a
        // group carries at least one command.
        let commits = try #require(Self.counter("lamina_storage_transactions_total", in: metrics.body))
        let commands = try #require(Self.counter("lamina_storage_commands_committed_total", in: metrics.body))
        #expect(commits >= 1 && commands >= commits, "\(commits) commits of \(commands) commands")
        // Of those, the ones an event loop committed itself (how many depends on the disk's speed).
        let inline = try #require(Self.counter("lamina_storage_inline_commits_total", in: metrics.body))
        #expect(inline <= commits)
        try await pair.expectHealthy()
        let later = try await HTTPGet.fetch(port: admin.port, path: "/metrics").body
        #expect(try #require(Self.counter("lamina_storage_transactions_total", in: later)) > commits)
        #expect(try #require(Self.counter("lamina_storage_commands_committed_total", in: later)) > commands)
        for client in clients { await client.close() }
        await node.stop()
    }

    /// The node as a process whose file-size limit is lowered while it runs (what a full disk
    /// looks like to SQLite: writes that cannot grow a file fail): sends fail with an error,
    /// the node logs and counts the storage errors, readiness fails naming the store, and all
    /// recovers once the limit is lifted. The node keeps running (SIGXFSZ is ignored).
    @Test func aStoreThatCannotWriteMakesTheNodeNotReadyUntilItCanAgain() async throws {
        let node = try await NodeProcess.start(in: Fixtures.temporaryDirectory("health-disk"))
        let data = node.dataDirectory
        let certificate = data.appendingPathComponent(NodeBootstrap.Files.certificate).path
        let dev = try DevIdentityProvider.loadOrCreate(in: data.appendingPathComponent(NodeBootstrap.Files.devIdentity))
        let client = try await SyncTestClient.connect(url: "https://127.0.0.1:\(node.syncPort)", caFile: certificate)
        _ = try await client.hello()
        let device = UUID()
        let session = try await client.authenticate(user: "disk", device: device, dev: dev)
        let conversation = try await MessagingTests.conversation(client, with: ["disk", "other"])
        _ = try await MessagingTests.send(client, conversation, "before")
        #expect(try await HTTPGet.fetch(port: node.adminPort, path: "/health/ready").status == 200)

        // No file of the data directory may grow by more than 64 KiB from here.
        let largest =
            try FileManager.default.contentsOfDirectory(at: data, includingPropertiesForKeys: [.fileSizeKey])
            .compactMap { try $0.resourceValues(forKeys: [.fileSizeKey]).fileSize }.max() ?? 0
        try Self.prlimit(pid: node.pid, fileSize: "\(largest + 64 * 1024)")

        let text = String(repeating: "x", count: 2_000)
        var failure: CommandFailed?
        for _ in 0..<2_000 {
            do {
                _ = try await MessagingTests.send(client, conversation, text)
            } catch {
                failure = try #require(error as? CommandFailed)
                break
            }
        }
        let refused = try #require(failure, "every send succeeded under the file-size limit")
        #expect(!refused.error.isFatal, "\(refused)")
        #expect(node.isRunning)
        let notReady = try await HTTPGet.fetch(port: node.adminPort, path: "/health/ready")
        #expect(notReady.status == 503)
        #expect(notReady.body.contains("store failing"), "\(notReady.body)")
        let metrics = try await HTTPGet.fetch(port: node.adminPort, path: "/metrics").body
        let errors = Self.counter("lamina_storage_errors_total", in: metrics)
        #expect((errors ?? 0) >= 1, "\(errors.map(String.init) ?? "no lamina_storage_errors_total")")
        #expect(node.logged.contains("storage error") || node.logged.contains("group commit failed"))
        // A new client is still handed a nonce (nonces are not written to the store), and the
        // device's session resumes on a new connection (a read).
        let newcomer = try await SyncTestClient.connect(url: "https://127.0.0.1:\(node.syncPort)", caFile: certificate)
        _ = try await newcomer.hello()
        _ = try await newcomer.nonce()
        let resumeID = UUID()
        newcomer.send(
            .resumeSession(ResumeSession(requestID: resumeID, sessionToken: session.sessionToken, deviceID: device)))
        guard case .authenticated = try await newcomer.answer(to: resumeID) else {
            Issue.record("the session did not resume while the store could not write")
            return
        }
        await newcomer.close()
        // A login needs a small write (its session): it passes where that still fits (here: the
        // files may not grow by a send's worth), else it gets a clear retryable answer
        // (`overloaded`, not fatal, a 1 s wait, a reason naming the store), never a dead stream,
        // and the same stream logs in once the store writes again (below).
        let login = try await SyncTestClient.connect(url: "https://127.0.0.1:\(node.syncPort)", caFile: certificate)
        _ = try await login.hello()
        var loginRefused = false
        do {
            _ = try await login.authenticate(user: "early", device: UUID(), dev: dev)
        } catch let refusal as CommandFailed {
            loginRefused = true
            #expect(refusal.error.code == .overloaded, "\(refusal)")
            #expect(!refusal.error.isFatal && refusal.error.retryAfterMilliseconds == 1_000, "\(refusal)")
            #expect(refusal.error.reason.contains("cannot store a new session"), "\(refusal)")
        }
        print(
            "health: a login while the store could not grow \(loginRefused ? "was refused (overloaded, 1 s)" : "passed")"
        )

        // Room again: the same session sends, and the node is ready at once (issue 35, item 7:
        // the condition, not a timer; it stayed 503 for up to 10 s), and a login passes.
        try Self.prlimit(pid: node.pid, fileSize: "unlimited")
        _ = try await MessagingTests.send(client, conversation, "after")
        let ready = try await HTTPGet.fetch(port: node.adminPort, path: "/health/ready")
        #expect(ready.status == 200, "\(ready.body)")
        if loginRefused { _ = try await login.authenticate(user: "early", device: UUID(), dev: dev) }
        await login.close()
        let late = try await SyncTestClient.connect(url: "https://127.0.0.1:\(node.syncPort)", caFile: certificate)
        _ = try await late.hello()
        _ = try await late.authenticate(user: "late", device: UUID(), dev: dev)
        await late.close()
        await client.close()
        #expect(try await node.stop() == 0)
    }

    /// Sets the soft RLIMIT_FSIZE of a running process (util-linux `prlimit`).
    static func prlimit(pid: Int32, fileSize: String) throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
        process.arguments = ["--pid", "\(pid)", "--fsize=\(fileSize):"]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw SyncTestTimeout(waitingFor: "prlimit to succeed") }
    }
}
