import ArgumentParser
import LaminaCLI

/// The options every connected command takes.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "Your user id (e.g. alice).")
    var user: String

    @Option(help: "The node's URL (default \(ConnectionSettings.defaultNodeURL)).")
    var node: String?

    @Option(
        help:
            "The CA file to trust the node with (default: the certificate the node wrote in --node-data, tls/node-cert.pem)."
    )
    var ca: String?

    @Option(
        name: .customLong("node-data"),
        help:
            "The node's data directory, holding its dev identity key (default \(ConnectionSettings.defaultNodeDataDirectory))."
    )
    var nodeData: String?

    @Option(
        help:
            "The client's data directory: one local store per user inside (default \(ConnectionSettings.defaultClientDataDirectory))."
    )
    var data: String?

    @Flag(help: "Print the sync engine's events (connection states, reconnects) on standard error.")
    var verbose = false

    @Option(name: .customLong("connect-timeout"), help: "Seconds to wait for the first sync with the node, 1...600.")
    var connectTimeout: Int = Int(ClientSession.defaultConnectTimeout.components.seconds)

    mutating func validate() throws {
        guard (1...600).contains(connectTimeout) else { throw ValidationError("--connect-timeout is 1...600 seconds") }
    }

    /// How long to wait for the first sync.
    var connectTimeoutDuration: Duration { .seconds(connectTimeout) }

    /// Where `--verbose` sends the sync engine's events.
    var trace: (@Sendable (String) -> Void)? {
        guard verbose else { return nil }
        return { line in Console.err(line) }
    }

    func settings() throws(CLIError) -> ConnectionSettings {
        try ConnectionSettings(user: user, node: node, ca: ca, nodeData: nodeData, data: data)
    }

    /// A session on the node, in sync (the first sync done), or a clear error.
    func connectedSession() async throws(CLIError) -> ClientSession {
        let session = try ClientSession(settings: settings())
        do {
            try await session.connect(timeout: connectTimeoutDuration, trace: trace)
        } catch {
            await session.close()
            throw error
        }
        return session
    }

    /// Runs `body` with a connected session, closing it afterwards (also on errors).
    func withSession<T>(_ body: (ClientSession) async throws -> T) async throws -> T {
        let session = try await connectedSession()
        do {
            let result = try await body(session)
            await session.close()
            return result
        } catch {
            await session.close()
            throw error
        }
    }
}
