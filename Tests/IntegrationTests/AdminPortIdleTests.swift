import Foundation
import LaminaNode
import NIOCore
import NIOPosix
import Testing

/// Issue 35, item 8: the admin port closes connections that stay without a byte either way,
/// while a scraper that asks keeps being answered.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct AdminPortIdleTests {
    @Test func idleAdminConnectionsAreClosed() async throws {
        let node = try await TestNode.start("admin-idle") {
            $0.adminPort = 0
            $0.resources.adminIdleConnectionTimeoutSeconds = 1
        }
        let admin = try #require(node.server.admin)
        let clock = ContinuousClock()
        let start = clock.now
        var silent: [Channel] = []
        for _ in 0..<5 {
            silent.append(
                try await ClientBootstrap(group: Fixtures.group).connect(host: "127.0.0.1", port: admin.port).get())
        }
        for channel in silent { try await channel.closeFuture.get() }
        let took = clock.now - start
        #expect(took >= .milliseconds(900) && took < .seconds(10), "closed after \(took)")
        // A connection that asks is answered.
        #expect(try await HTTPGet.fetch(port: admin.port, path: "/health/ready").status == 200)
        await node.stop()
    }
}
