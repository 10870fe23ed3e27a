import Foundation
import LaminaNode
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The built `lamina-node` binary, started with no arguments in an empty directory.
@Suite struct ExecutableTests {
    /// The binary `swift build` made (debug), next to the test bundle.
    static func binary() throws -> URL {
        let candidates = [
            Fixtures.packageRoot.appendingPathComponent(".build/debug/lamina-node"),
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lamina-node"),
        ]
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw SyncTestTimeout(waitingFor: "a built lamina-node (run `swift build` first); looked at \(candidates.map(\.path))")
        }
        return found
    }

    @Test func zeroConfigStartServesAndStopsCleanlyOnSIGTERM() async throws {
        let directory = Fixtures.temporaryDirectory("exe")
        // Ports 7443/7444 may be taken on a shared machine: the defaults are exercised by
        // `swift run lamina-node`; here only the ports move (everything else is default).
        let syncPort = try Self.freePort()
        let adminPort = try Self.freePort()
        let process = Process()
        process.executableURL = try Self.binary()
        process.arguments = ["--listen", "127.0.0.1:\(syncPort)", "--admin", "127.0.0.1:\(adminPort)"]
        process.currentDirectoryURL = directory
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let loop = Fixtures.group.next()
        let exited = PromiseBox(loop.makePromise(of: Int32.self))
        let serving = PromiseBox(loop.makePromise(of: Void.self))
        let printed = NIOLockedValueBox("")
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        // Plain threads (no dispatch sources): one reads the output to EOF, one waits for the exit.
        let reader = output.fileHandleForReading
        Thread.detachNewThread {
            while true {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                let text = printed.withLockedValue { $0 += String(decoding: chunk, as: UTF8.self); return $0 }
                if text.contains("is serving") { serving.promise.succeed(()) }
            }
            serving.promise.fail(SyncTestTimeout(waitingFor: "the node to serve (its output ended)"))
        }
        Thread.detachNewThread {
            process.waitUntilExit()
            exited.promise.succeed(process.terminationStatus)
        }
        // The node prints its welcome once both listeners are up.
        loop.scheduleTask(in: .seconds(60)) { serving.promise.fail(SyncTestTimeout(waitingFor: "the welcome text")) }
        try await serving.promise.futureResult.get()

        let health = try await HTTPGet.fetch(port: adminPort, path: "/health")
        #expect(health.status == 200)
        #expect(health.body == "ok\n")

        let data = directory.appendingPathComponent(".lamina")
        let certificate = data.appendingPathComponent(NodeBootstrap.Files.certificate).path
        #expect(FileManager.default.fileExists(atPath: certificate))
        #expect(FileManager.default.fileExists(atPath: data.appendingPathComponent(NodeBootstrap.Files.store).path))

        // A sync stream over TLS trusting the created certificate.
        let client = try await SyncTestClient.connect(url: "https://127.0.0.1:\(syncPort)", caFile: certificate)
        client.send(.hello(.init(agent: "exe-test")))
        guard case .frame(.welcome) = try await client.nextEvent() else {
            Issue.record("no WELCOME from the binary")
            return
        }
        await client.close()

        kill(process.processIdentifier, SIGTERM)
        let status = try await exited.promise.futureResult.get()
        #expect(status == 0)
        let text = printed.withLockedValue { $0 }
        #expect(text.contains("https://127.0.0.1:\(syncPort)/v1/sync"))
        #expect(text.contains(certificate))
    }

    /// A port free right now (bound to port 0 then closed).
    static func freePort() throws -> Int {
        let channel = try ServerBootstrap(group: Fixtures.group).bind(host: "127.0.0.1", port: 0).wait()
        let port = channel.localAddress!.port!
        try channel.close().wait()
        return port
    }
}

final class PromiseBox<T: Sendable>: Sendable {
    let promise: EventLoopPromise<T>
    init(_ promise: EventLoopPromise<T>) { self.promise = promise }
}
