import Foundation
import LaminaLocalNode
import LaminaNode
import LaminaProcess
import Logging
import NIOPosix

/// A real node in-process on 127.0.0.1 (port 0) with a temporary data directory, and a
/// working directory for the CLI with its own client data directory.
final class CLITestNode: @unchecked Sendable {
    private(set) var server: NodeServer
    /// Where the `lamina` processes run (their client stores go in ./.lamina-client).
    let workDirectory: URL

    /// A fresh temporary directory, removed when the test process exits.
    static func temporaryDirectory(_ name: String) -> URL {
        ScratchDirectory.make("lamina-cli-\(name)")
    }

    private init(server: NodeServer, workDirectory: URL) {
        self.server = server
        self.workDirectory = workDirectory
    }

    /// A node with a fresh data directory; the CLI's working directory is `workDirectory`
    /// (default: a fresh one).
    static func start(_ name: String, workDirectory: URL? = nil) async throws -> CLITestNode {
        var configuration = NodeServerConfiguration()
        configuration.port = 0
        configuration.adminPort = -1
        configuration.dataDirectory = temporaryDirectory("\(name)-node").path
        configuration.drainTimeoutSeconds = 2
        var logger = Logger(label: "lamina.cli-tests")
        logger.logLevel = .warning
        let server = try await NodeServer.start(
            configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
        return CLITestNode(server: server, workDirectory: workDirectory ?? temporaryDirectory("\(name)-work"))
    }

    var dev: DevIdentityProvider { server.prepared.devIdentityProvider! }

    /// The connection options for `user`: this node's URL and data directory (the CA file
    /// and dev key are found there by default, as with a zero-config node).
    func options(_ user: String) -> [String] {
        ["--user", user, "--node", server.url, "--node-data", server.prepared.dataDirectory.path]
    }

    /// A generous first-sync bound for the connected commands: the suite runs many nodes at
    /// once on a small machine.
    static func timeout(_ command: String) -> [String] { command == "token" ? [] : ["--connect-timeout", "90"] }

    /// Runs `lamina <command> <options for user> <extra>` to completion.
    func run(_ command: String, _ user: String, _ extra: [String] = [], stdin: String = "") async throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        try await CLIProcess.run(
            "\(command)-\(user)", [command] + options(user) + Self.timeout(command) + extra, in: workDirectory,
            stdin: stdin)
    }

    /// Starts `lamina <command>` for `user`, its standard input left open.
    func start(_ command: String, _ user: String, _ extra: [String] = []) throws -> CLIProcess {
        try CLIProcess(
            "\(command)-\(user)", [command] + options(user) + Self.timeout(command) + extra, in: workDirectory)
    }

    func stop() async { await server.shutdown() }

    /// Starts the node again on the same port and data directory (after `stop`).
    func restart() async throws {
        var configuration = server.configuration
        configuration.port = server.transport.port
        var logger = Logger(label: "lamina.cli-tests")
        logger.logLevel = .warning
        server = try await NodeServer.start(
            configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
    }

    /// Runs `body` with a fresh node, stopping the node afterwards (also when it throws).
    static func with(_ name: String, workDirectory: URL? = nil, _ body: (CLITestNode) async throws -> Void) async throws
    {
        let node = try await start(name, workDirectory: workDirectory)
        do {
            try await body(node)
        } catch {
            await node.stop()
            throw error
        }
        await node.stop()
    }
}
