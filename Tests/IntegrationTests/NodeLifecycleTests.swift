import Foundation
import LaminaNode
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 30: the node's parts start in order, and a start that fails part-way stops what
/// started (one stop path) and names what failed; SIGTERM stops a node process cleanly.
@Suite struct NodeLifecycleTests {
    @Test func aTakenListenPortRollsBackWhatStarted() async throws {
        let taken = try await ServerBootstrap(group: Fixtures.group).bind(host: "127.0.0.1", port: 0).get()
        var configuration = Fixtures.nodeConfiguration("rollback")
        configuration.port = try #require(taken.localAddress?.port)
        let data = URL(fileURLWithPath: configuration.dataDirectory).resolvingSymlinksInPath().path

        do {
            let node = try await NodeServer.start(
                configuration: configuration, group: Fixtures.group, logger: Fixtures.logger)
            await node.shutdown()
            Issue.record("the node started on a taken port")
        } catch let error as NodeServerError {
            guard case .startup(let reason) = error else { throw error }
            #expect(reason.hasPrefix("cannot listen on 127.0.0.1:\(configuration.port)"), "\(reason)")
        }
        try await taken.close()
        // The store, the content files and everything else opened in the data directory are closed.
        #expect(Self.openFiles(under: data) == [])

        // Nothing holds the directory: a start on a free port serves from it.
        configuration.port = 0
        let node = try await NodeServer.start(
            configuration: configuration, group: Fixtures.group, logger: Fixtures.logger)
        #expect(node.runningParts == Set(NodePart.allCases).subtracting([.peers]))  // peering is off
        #expect(!Self.openFiles(under: data).isEmpty)  // the store is open while it serves
        await node.shutdown()
        #expect(node.runningParts.isEmpty)
        #expect(Self.openFiles(under: data) == [])
    }

    @Test func stopOrderHoldsEveryPartOnce() {
        #expect(NodePart.stopOrder.count == NodePart.allCases.count)
        #expect(Set(NodePart.stopOrder) == Set(NodePart.allCases))
        // The admin listener answers "stopping" until the end; the store closes after its users.
        #expect(NodePart.stopOrder.last == .admin)
        let index = { (part: NodePart) in NodePart.stopOrder.firstIndex(of: part)! }
        for user in [NodePart.engine, .content, .webhooks, .pushes, .pruner, .peers] {
            #expect(index(user) < index(.store))
        }
        #expect(index(.engine) < index(.transport))
    }

    /// SIGTERM: the ServiceGroup's graceful shutdown stops the node (exit 0, the stop path
    /// ran); what was committed before is there when the data directory serves again.
    @Test func sigtermStopsTheProcessCleanlyAndItsDataServesAgain() async throws {
        let directory = Fixtures.temporaryDirectory("sigterm")
        let node = try await NodeProcess.start(in: directory)
        let id = try #require(Self.nodeID(in: node.printed))
        let api = try Self.api(node)
        let created = try await api.request(
            "POST", "/conversations", json: #"{"participants":["alice","bob"],"metadata":{"title":"kept"}}"#)
        #expect(created.status == 201)
        let conversation = try #require((created.object["id"] as? String)?.split(separator: "/").last.map(String.init))
        let status = try await node.stop(with: SIGTERM)
        #expect(status == 0)
        #expect(node.logged.contains("shutting down"))
        #expect(node.logged.contains("stopped"))

        let again = try await NodeProcess.start(in: directory)
        #expect(Self.nodeID(in: again.printed) == id)
        let api2 = try Self.api(again, token: api.token)
        let got = try await api2.request("GET", "/conversations/\(conversation)")
        #expect(got.status == 200)
        #expect((got.object["metadata"] as? [String: Any])?["title"] as? String == "kept")
        #expect(try await again.stop(with: SIGINT) == 0)
    }

    /// The Server API of a node process, from what it printed (its token when it made one now).
    static func api(_ node: NodeProcess, token: String? = nil) throws -> CurlAPI {
        let lines = node.printed.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let server = try #require(lines.first { $0.hasPrefix("server API:") }?.split(separator: " ").dropFirst(2).first)
        let appID = try #require(server.split(separator: "/").last.map(String.init))
        let made = lines.first { $0.hasPrefix("API token:") }?.split(separator: " ").dropFirst(2).first.map(String.init)
        let cert = node.dataDirectory.appendingPathComponent(NodeBootstrap.Files.certificate).path
        return CurlAPI(
            url: "https://127.0.0.1:\(node.syncPort)", caFile: cert, appID: appID, token: try #require(token ?? made))
    }

    /// The binary reads a setting from the file, the environment and flags, each over the one
    /// before (`--set`, then the named flags), and names an unknown key.
    @Test func theBinaryReadsSettingsWithTheirPrecedence() async throws {
        let directory = Fixtures.temporaryDirectory("settings")
        let config = directory.appendingPathComponent("node.json")
        try Data(#"{"serverAPI": {"enabled": false}, "maxSessions": 5}"#.utf8).write(to: config)
        let fromFile = try await NodeProcess.start(in: directory, arguments: ["--config", config.path])
        #expect(!fromFile.printed.contains("server API:"))
        #expect(try await fromFile.stop() == 0)

        let fromEnvironment = try await NodeProcess.start(
            in: directory, arguments: ["--config", config.path], environment: ["LAMINA_SERVER_API_ENABLED": "true"])
        #expect(fromEnvironment.printed.contains("server API:"))
        #expect(try await fromEnvironment.stop() == 0)

        let fromFlag = try await NodeProcess.start(
            in: directory,
            arguments: ["--config", config.path, "--set", "serverAPI.enabled=false", "--max-sessions", "9"],
            environment: ["LAMINA_SERVER_API_ENABLED": "true", "LAMINA_MAX_SESSIONS": "7"])
        #expect(!fromFlag.printed.contains("server API:"))
        let health = try await HTTPGet.fetch(port: fromFlag.adminPort, path: "/health")
        // the named flag over the environment and the file
        #expect(health.body.contains("sessions ok 0 of 9\n"), "\(health.body)")
        #expect(try await fromFlag.stop() == 0)

        try Data(#"{"serverAPI": {"enabeld": false}}"#.utf8).write(to: config)
        let refused = try await ExternalCommand.run(
            try BuiltProduct.url("lamina-node").path,
            ["--config", config.path, "--data-dir", directory.appendingPathComponent("refused").path])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("unknown key serverAPI.enabeld"), "\(refused.stderr)")
    }

    static func nodeID(in printed: String) -> String? {
        guard let line = printed.split(separator: "\n").first(where: { $0.hasPrefix("Lamina node ") }) else {
            return nil
        }
        return line.split(separator: " ").dropFirst(2).first.map(String.init)
    }

    /// This process's open descriptors whose path is under `directory`.
    static func openFiles(under directory: String) -> [String] {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.compactMap { fd in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)") else {
                return nil
            }
            return target.hasPrefix(directory + "/") ? target : nil
        }.sorted()
    }
}
