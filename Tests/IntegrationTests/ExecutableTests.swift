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
    @Test func zeroConfigStartServesAndStopsCleanlyOnSIGTERM() async throws {
        // Ports 7443/7444 may be taken on a shared machine: the defaults are exercised by
        // `swift run lamina-node`; here only the ports move (everything else is default).
        let node = try await NodeProcess.start(in: Fixtures.temporaryDirectory("exe"))
        let syncPort = node.syncPort

        let live = try await HTTPGet.fetch(port: node.adminPort, path: "/health/live")
        #expect(live.status == 200)
        let health = try await HTTPGet.fetch(port: node.adminPort, path: "/health")
        #expect(health.status == 200)
        #expect(health.body.hasPrefix("ready\n"))

        let data = node.dataDirectory
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

        // The binary runs on jemalloc (linked in place of glibc's malloc; RESOURCES.md §14).
        // (read to its end: /proc files have no size, and a one-size read stops at a page)
        let mapsFile = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(node.pid)/maps"))
        let maps = String(decoding: try mapsFile.readToEnd() ?? Data(), as: UTF8.self)
        try mapsFile.close()
        #expect(maps.contains("libjemalloc"))

        let status = try await node.stop()
        #expect(status == 0)
        let text = node.printed
        #expect(text.contains("https://127.0.0.1:\(syncPort)/v1/sync"))
        #expect(text.contains(certificate))
        // With lamina-node's options (CLaminaAllocator's `malloc_conf`), read back from jemalloc.
        #expect(text.contains("allocator:   jemalloc 5."))
        #expect(text.contains("percpu_arena=percpu dirty_decay_ms=1000)"))
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
