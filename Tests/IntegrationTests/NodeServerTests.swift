import Foundation
import LaminaLocalNode
import LaminaNode
import LaminaWire
import NIOCore
import NIOPosix
import Testing

/// The whole node in-process: zero-config bootstrap, admin port, graceful shutdown.
@Suite struct NodeServerTests {
    @Test func firstStartCreatesCertificateKeyAndStoreAndServesAdmin() async throws {
        let configuration = Fixtures.nodeConfiguration("bootstrap")
        let node = try await NodeServer.start(
            configuration: configuration, group: Fixtures.group, logger: Fixtures.logger)
        let data = URL(fileURLWithPath: configuration.dataDirectory)
        let fm = FileManager.default
        #expect(node.prepared.createdCertificate)
        #expect(fm.fileExists(atPath: data.appendingPathComponent(NodeBootstrap.Files.certificate).path))
        #expect(fm.fileExists(atPath: data.appendingPathComponent(NodeBootstrap.Files.privateKey).path))
        #expect(fm.fileExists(atPath: data.appendingPathComponent(NodeBootstrap.Files.store).path))
        #expect(fm.fileExists(atPath: data.appendingPathComponent(NodeBootstrap.Files.nodeID).path))
        #expect(node.prepared.devIdentityProvider != nil)
        #expect(node.prepared.identityProviders.map(\.id) == [DevIdentityProvider.providerID])
        #expect(node.transport.port != 0)

        // A sync stream over TLS trusting the created certificate counts in the metrics.
        let client = try await SyncTestClient.connect(url: node.url, caFile: node.prepared.certificatePath)
        client.send(.hello(Hello(agent: "it")))
        _ = try await client.nextEvent()

        let admin = try #require(node.admin)
        let health = try await HTTPGet.fetch(port: admin.port, path: "/health")
        #expect(health.status == 200)
        #expect(health.body.hasPrefix("ready\n"))
        let metrics = try await HTTPGet.fetch(port: admin.port, path: "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.body.contains("lamina_sessions_opened_total 1"))
        #expect(try await HTTPGet.fetch(port: admin.port, path: "/nope").status == 404)
        await client.close()

        let firstNodeID = node.prepared.nodeID
        await node.shutdown()
        #expect(node.sessionCount == 0)

        // A second start on the same directory reuses what the first created.
        var again = configuration
        again.port = 0
        let second = try await NodeServer.start(configuration: again, group: Fixtures.group, logger: Fixtures.logger)
        #expect(!second.prepared.createdCertificate)
        #expect(second.prepared.nodeID == firstNodeID)
        await second.shutdown()
    }

    @Test func badConfigurationIsRefusedWithAReason() throws {
        var configuration = NodeServerConfiguration()
        configuration.limits.maxFrameSize = 8 * 1024 * 1024
        #expect(throws: NodeServerError.self) { try configuration.validate() }

        let file = Fixtures.temporaryDirectory("config").appendingPathComponent("node.json")
        try Data(#"{"port": 9443, "limits": {"idleTimeoutSeconds": 30}, "maxSessions": 5}"#.utf8).write(to: file)
        var fromFile = NodeServerConfiguration()
        try fromFile.apply(configFile: file.path)
        #expect(fromFile.port == 9443)
        #expect(fromFile.limits.idleTimeoutSeconds == 30)
        #expect(fromFile.maxSessions == 5)
        #expect(fromFile.limits.maxOutboundBytes == SyncStreamLimits().maxOutboundBytes)

        try Data(#"{"port": 70000}"#.utf8).write(to: file)
        var invalid = NodeServerConfiguration()
        #expect(throws: NodeServerError.self) { try invalid.apply(configFile: file.path) }

        // The store's group commit, from the file, and refused out of its range.
        try Data(#"{"storage": {"groupCommitDelayMicroseconds": 2500, "groupCommitTarget": 32}}"#.utf8).write(to: file)
        var storage = NodeServerConfiguration()
        try storage.apply(configFile: file.path)
        #expect(storage.storage.groupCommitDelayMicroseconds == 2_500)
        #expect(storage.storage.groupCommitTarget == 32)
        try Data(#"{"storage": {"groupCommitDelayMicroseconds": -1}}"#.utf8).write(to: file)
        var badStorage = NodeServerConfiguration()
        #expect(throws: NodeServerError.self) { try badStorage.apply(configFile: file.path) }
    }
}

/// A tiny HTTP/1.1 GET over a plain socket (the admin port), via NIO.
enum HTTPGet {
    struct Response {
        var status: Int
        var body: String
    }

    static func fetch(port: Int, path: String) async throws -> Response {
        let channel = try await ClientBootstrap(group: Fixtures.group).connect(host: "127.0.0.1", port: port).get()
        let collector = Collector(promise: channel.eventLoop.makePromise())
        try await channel.pipeline.addHandler(collector).get()
        let request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        try await channel.writeAndFlush(ByteBuffer(string: request)).get()
        let text = try await collector.promise.futureResult.get()
        guard let headerEnd = text.range(of: "\r\n\r\n"),
            let status = Int(text.split(separator: " ", maxSplits: 2).dropFirst().first ?? "")
        else { throw SyncTestTimeout(waitingFor: "an HTTP response, got \(text)") }
        return Response(status: status, body: String(text[headerEnd.upperBound...]))
    }

    final class Collector: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let promise: EventLoopPromise<String>
        var text = ""
        init(promise: EventLoopPromise<String>) { self.promise = promise }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            text += buffer.readString(length: buffer.readableBytes) ?? ""
        }
        func channelInactive(context: ChannelHandlerContext) { promise.succeed(text) }
        func errorCaught(context: ChannelHandlerContext, error: Error) {
            promise.fail(error)
            context.close(promise: nil)
        }
    }
}
