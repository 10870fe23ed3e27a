import ArgumentParser
import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import Logging
import Metrics
import NIOCore
import NIOPosix
import Prometheus
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#endif

@main
struct LaminaNodeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lamina-node",
        abstract: "The Lamina relay node. With no arguments: a development node on 127.0.0.1:7443, data in ./.lamina.",
        subcommands: [Serve.self, Token.self, DevCluster.self, PeerCertificate.self, Settings.self],
        defaultSubcommand: Serve.self)
}

/// Flags shared by the subcommands that read the data directory. Settings are read from, each
/// over the one before: defaults, `--config`, the environment (`LAMINA_…`), `--set`, named flags.
struct DataOptions: ParsableArguments {
    @Option(name: .customLong("config"), help: "A JSON config file (the environment and flags override it).")
    var configFile: String?

    @Option(
        name: .customLong("set"),
        help: ArgumentHelp(
            "A setting, KEY=VALUE (repeatable; keys as in the config file, e.g. limits.maxFrameSize=65536).",
            discussion: "`lamina-node settings` lists them, with their variables and defaults."))
    var settings: [String] = []

    @Option(name: .customLong("data-dir"), help: "Data directory (default ./.lamina).")
    var dataDirectory: String?

    @Option(
        name: .customLong("store"),
        help:
            "The store: postgres://user[:password]@host[:port]/database for PostgreSQL (default: SQLite in the data directory)."
    )
    var store: String?

    func configuration() throws -> NodeServerConfiguration {
        var overrides: [(key: String, value: String)] = []
        for setting in settings {
            guard let eq = setting.firstIndex(of: "="), eq != setting.startIndex else {
                throw ValidationError("--set must be KEY=VALUE, not \(setting)")
            }
            overrides.append((String(setting[..<eq]), String(setting[setting.index(after: eq)...])))
        }
        var configuration = try NodeServerConfiguration.load(
            configFile: configFile, environment: ProcessInfo.processInfo.environment, overrides: overrides)
        if let dataDirectory { configuration.dataDirectory = dataDirectory }
        if let store { configuration.store = store }
        return configuration
    }
}

/// A flag's help: the doc, default and key of the setting it sets (``NodeServerConfiguration/settings``).
func setting(_ key: String) -> ArgumentHelp {
    guard let setting = NodeServerConfiguration.setting(key) else { preconditionFailure("no setting \(key)") }
    return ArgumentHelp("\(setting.doc) (default \(setting.value(in: NodeServerConfiguration())); setting \(key))")
}

/// Lists every setting: its config file key, variable, default and doc.
struct Settings: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the settings: config file key, environment variable, default, what it does.")

    func run() throws {
        let defaults = NodeServerConfiguration()
        for setting in NodeServerConfiguration.settings {
            print(
                "\(setting.key)  \(setting.environmentVariable)  default: \(setting.value(in: defaults))\n    \(setting.doc)"
            )
        }
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Start the node and serve until SIGTERM or SIGINT.")

    @OptionGroup var data: DataOptions

    @Option(help: "Sync listener address, host:port (default 127.0.0.1:7443).")
    var listen: String?

    @Option(help: "Admin listener (metrics, health), host:port (default 127.0.0.1:7444); 'off' disables it.")
    var admin: String?

    @Option(
        help:
            "Event-loop threads for the network (default: one per core but one, at least one; the storage writer has a thread of its own)."
    )
    var eventLoops: Int?

    @Option(help: "TLS certificate chain (PEM); default: self-signed, created in the data directory.")
    var certificate: String?

    @Option(name: .customLong("key"), help: "TLS private key (PEM) for --certificate.")
    var privateKey: String?

    @Option(
        name: .customLong("identity-provider"),
        help: "An identity provider: id=PATH_TO_PUBLIC_KEY_PEM[,ES256|RS256...] (repeatable).")
    var identityProviders: [String] = []

    @Flag(help: "Do not trust the dev identity provider.")
    var noDevIdentityProvider = false

    @Option(
        help:
            "The dev identity provider's key directory (made when missing; default <data-dir>/dev-identity). Nodes given the same one accept each other's development tokens."
    )
    var devIdentity: String?

    @Option(help: setting("limits.maxFrameSize")) var maxFrameSize: Int?
    @Option(help: setting("limits.maxOutboundBytes")) var maxOutboundBytes: Int?
    @Option(help: setting("limits.idleTimeoutSeconds")) var idleTimeout: Int?
    @Option(help: setting("maxSessions")) var maxSessions: Int?
    @Option(help: setting("storage.groupCommitDelayMicroseconds")) var groupCommitDelay: Int?
    @Option(
        name: .customLong("content-dir"),
        help: ArgumentHelp(
            "Directory of the rich content files (default <data-dir>/content; config key content.directory).",
            discussion:
                "Nodes sharing one PostgreSQL store must all use one shared directory (e.g. an NFS or shared volume mount), so content uploaded through one node downloads through any."
        ))
    var contentDirectory: String?
    @Option(help: setting("content.quotaBytes")) var contentQuota: UInt64?
    @Option(help: setting("content.maxConcurrentUploadsPerUser")) var maxConcurrentUploads: Int?
    @Option(help: setting("content.abandonedUploadAgeSeconds")) var abandonedUploadAge: Int?
    @Option(help: setting("content.unreferencedContentAgeSeconds")) var unreferencedContentAge: Int?
    @Option(help: setting("content.sweepIntervalSeconds")) var contentSweepInterval: Int?

    @Flag(help: setting("webhooks.allowPrivateTargets")) var allowPrivateWebhookTargets = false
    @Option(help: setting("webhooks.caFile")) var webhookCAFile: String?
    @Option(help: "APNs: the team's .p8 signing key (PEM); with --apns-team-id and --apns-key-id.") var apnsKeyFile:
        String?
    @Option(help: "APNs: the team id (the provider token's issuer).") var apnsTeamId: String?
    @Option(help: "APNs: the signing key's id.") var apnsKeyId: String?
    @Option(help: "FCM HTTP v1: the service account's JSON key file.") var fcmServiceAccount: String?
    @Option(help: "A push gateway's https:// URL: one JSON POST per notification.") var pushGatewayUrl: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    @Option(
        help:
            "This node's id, in hexadecimal: 1...ffffffffffffffff, e.g. 2a for 42 (default: made at first start and kept in the data directory)."
    )
    var nodeID: String?
    @Option(help: "Peer listener address, host:port (mutual TLS, POST /v1/peer); peering is off without it.")
    var peerListen: String?
    @Option(help: setting("peers.cluster")) var cluster: String?
    @Option(name: .customLong("peer"), help: "A peer's listener, https://host:port (repeatable): this node dials it.")
    var peerURLs: [String] = []
    @Option(help: setting("peers.caFile")) var peerCA: String?
    @Option(help: setting("peers.certificateFile")) var peerCertificate: String?
    @Option(help: setting("peers.keyFile")) var peerKey: String?

    func run() async throws {
        var configuration = try data.configuration()
        if let listen {
            (configuration.host, configuration.port) = try Self.parseAddress(listen, what: "--listen")
        }
        if let admin {
            if admin == "off" {
                configuration.adminPort = -1
            } else {
                (configuration.adminHost, configuration.adminPort) = try Self.parseAddress(admin, what: "--admin")
            }
        }
        if certificate != nil || privateKey != nil {
            configuration.certificatePath = certificate
            configuration.privateKeyPath = privateKey
        }
        for spec in identityProviders {
            configuration.identityProviders.append(try Self.parseProvider(spec))
        }
        if noDevIdentityProvider { configuration.devIdentityProvider = false }
        if let devIdentity { configuration.devIdentityDirectory = devIdentity }
        if let maxFrameSize { configuration.limits.maxFrameSize = maxFrameSize }
        if let maxOutboundBytes { configuration.limits.maxOutboundBytes = maxOutboundBytes }
        if let idleTimeout { configuration.limits.idleTimeoutSeconds = idleTimeout }
        if let maxSessions { configuration.maxSessions = maxSessions }
        if let groupCommitDelay { configuration.storage.groupCommitDelayMicroseconds = groupCommitDelay }
        if let contentDirectory { configuration.content.directory = contentDirectory }
        if let contentQuota { configuration.content.quotaBytes = contentQuota }
        if let maxConcurrentUploads { configuration.content.maxConcurrentUploadsPerUser = maxConcurrentUploads }
        if let abandonedUploadAge { configuration.content.abandonedUploadAgeSeconds = abandonedUploadAge }
        if let unreferencedContentAge { configuration.content.unreferencedContentAgeSeconds = unreferencedContentAge }
        if let contentSweepInterval { configuration.content.sweepIntervalSeconds = contentSweepInterval }
        if let nodeID {
            guard let id = UInt64(nodeID, radix: 16), id != 0 else {
                throw ValidationError(
                    "--node-id must be a non-zero hexadecimal number (1...ffffffffffffffff), not \(nodeID)")
            }
            configuration.nodeID = id
        }
        if let peerListen {
            (configuration.peers.host, configuration.peers.port) = try Self.parseAddress(
                peerListen, what: "--peer-listen")
        }
        if let cluster { configuration.peers.cluster = cluster }
        if !peerURLs.isEmpty { configuration.peers.peers = peerURLs }
        if let peerCA { configuration.peers.caFile = peerCA }
        if let peerCertificate { configuration.peers.certificateFile = peerCertificate }
        if let peerKey { configuration.peers.keyFile = peerKey }
        if allowPrivateWebhookTargets { configuration.webhooks.allowPrivateTargets = true }
        if let webhookCAFile { configuration.webhooks.caFile = webhookCAFile }
        if let apnsKeyFile {
            guard let apnsTeamId, let apnsKeyId else {
                throw ValidationError("--apns-key-file needs --apns-team-id and --apns-key-id")
            }
            configuration.push.apns = PushSettings.APNs(teamID: apnsTeamId, keyID: apnsKeyId, keyFile: apnsKeyFile)
        }
        if let fcmServiceAccount { configuration.push.fcm = PushSettings.FCM(serviceAccountFile: fcmServiceAccount) }
        if let pushGatewayUrl { configuration.push.gateway = PushSettings.Gateway(url: pushGatewayUrl) }
        do { try configuration.validate() } catch { throw ValidationError("\(error)") }

        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("unknown log level \(logLevel)")
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let logger = Logger(label: "lamina.node")

        // Past a file-size limit (`ulimit -f`) writes fail with EFBIG, which the store reports
        // and /health/ready shows, instead of the signal killing the node.
        signal(SIGXFSZ, SIG_IGN)

        // Before the event loops and the store's threads start allocating (RESOURCES.md §5).
        if ProcessMemory.limitMallocArenas(configuration.mallocArenas, cores: System.coreCount) == nil,
            configuration.mallocArenas > 0
        {
            logger.warning(
                "mallocArenas limits glibc's malloc; this node runs on \(ProcessMemory.allocator): set MALLOC_CONF=narenas:\(configuration.mallocArenas) in its environment instead"
            )
        }
        if let eventLoops, !(1...1024).contains(eventLoops) { throw ValidationError("--event-loops must be 1…1024") }
        let group = MultiThreadedEventLoopGroup(
            numberOfThreads: eventLoops ?? NodeServerConfiguration.defaultEventLoops(cores: System.coreCount))
        // SIGTERM or SIGINT: the group's graceful shutdown, which the node service answers by
        // stopping (GOAWAY, drain, flush); a start that fails has rolled back when run() throws.
        let node = NodeService(configuration: configuration, group: group, logger: logger, registry: registry) {
            Self.printWelcome($0)
        }
        let services = ServiceGroup(services: [node], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        do { try await services.run() } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try? await group.shutdownGracefully()
    }

    private static func printWelcome(_ server: NodeServer) {
        let prepared = server.prepared
        var lines = [
            "Lamina node \(prepared.nodeID) is serving.",
            "  sync:        \(server.url)\(NodeServer.syncPath)  (TLS + HTTP/2)",
            "  data:        \(prepared.dataDirectory.path)",
            "  store:       \(prepared.storePath)",
            "  allocator:   \(ProcessMemory.allocator)",
            "  certificate: \(prepared.certificatePath)\(prepared.createdCertificate ? "  (created now, self-signed)" : "")",
            "  trust it:    clients use \(prepared.certificatePath) as their CA file",
            "               e.g. curl --cacert \(prepared.certificatePath) --http2 ...",
        ]
        if let peers = server.peers {
            lines.append(
                "  peers:       https://\(server.configuration.peers.host):\(peers.transport.port)\(PeerService.path)  cluster '\(server.configuration.peers.cluster)', dialing \(server.configuration.peers.peers.count)"
            )
        }
        if let admin = server.admin {
            let host = server.configuration.adminHost
            lines.append("  admin:       http://\(host):\(admin.port)/metrics  http://\(host):\(admin.port)/health")
        }
        if prepared.devIdentityProvider != nil {
            lines.append(
                "  identity:    dev provider '\(DevIdentityProvider.providerID)', key in \(prepared.devIdentityKeyDirectory.path)"
            )
            lines.append("  a token:     ask the node for a nonce (NONCE_REQUEST), then")
            lines.append(
                "               lamina-node token "
                    + (server.configuration.devIdentityDirectory.map { "--dev-identity \($0)" }
                        ?? "--data-dir \(prepared.dataDirectory.path)")
                    + " --user alice --nonce <nonce>")
            lines.append("  chat:        \(Self.chatCommand(server))   (README: Try it)")
        }
        if server.configuration.clientAPI.enabled {
            lines.append("  client API:  \(server.url)  (Layer's Client API: REST, WebSocket at /websocket)")
            if server.configuration.devIdentityProvider, prepared.devIdentityProvider != nil {
                lines.append("  web chat:    \(server.url)/  (open in a browser; accept the self-signed certificate)")
            }
        }
        if let api = server.serverAPICredentials {
            let tokens = prepared.dataDirectory.appendingPathComponent("server-api/tokens").path
            lines.append("  server API:  \(server.url)/apps/\(api.appID)  (HTTP/1.1 or HTTP/2, Layer's Platform API)")
            if let token = api.newToken {
                lines.append("  API token:   \(token)  (created now; kept in \(tokens))")
            } else {
                lines.append("  API tokens:  in \(tokens)")
            }
            lines.append(
                "  try it:      curl --cacert \(prepared.certificatePath) -H 'Authorization: Bearer \(api.newToken ?? "<token>")' "
                    + "-H 'Accept: application/vnd.layer+json; version=3.0' -H 'Content-Type: application/json' "
                    + "-d '{\"participants\":[\"alice\",\"bob\"]}' \(server.url)/apps/\(api.appID)/conversations")
        }
        lines.append("  stop:        Ctrl-C or SIGTERM (graceful: GOAWAY, drain, flush)")
        print(lines.joined(separator: "\n"))
        fflush(nil)
    }

    /// The `lamina chat` command that reaches this node from the current directory: no
    /// options for a zero-config node, else the URL and data directory it needs.
    static func chatCommand(_ server: NodeServer) -> String {
        var command = "swift run lamina chat --user alice --with bob"
        let defaults = NodeServerConfiguration()
        if server.url != "https://\(defaults.host):\(defaults.port)" { command += " --node \(server.url)" }
        let cwd = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
        let defaultData = cwd.appendingPathComponent(defaults.dataDirectory).standardizedFileURL.path
        if server.prepared.dataDirectory.standardizedFileURL.path != defaultData {
            command += " --node-data \(server.prepared.dataDirectory.path)"
        }
        return command
    }

    static func parseAddress(_ text: String, what: String) throws -> (String, Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (0...65535).contains(port)
        else { throw ValidationError("\(what) must be host:port, not \(text)") }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ValidationError("\(what) has no host: \(text)") }
        return (host, port)
    }

    static func parseProvider(_ spec: String) throws -> NodeServerConfiguration.ProviderFile {
        guard let eq = spec.firstIndex(of: "=") else {
            throw ValidationError("--identity-provider must be id=path[,ALG...], not \(spec)")
        }
        let id = String(spec[..<eq])
        let rest = spec[spec.index(after: eq)...].split(separator: ",").map(String.init)
        guard !id.isEmpty, let path = rest.first else {
            throw ValidationError("--identity-provider \(spec): id and path needed")
        }
        let algs = rest.count > 1 ? Array(rest.dropFirst()) : ["ES256", "RS256"]
        return .init(id: id, publicKeyPath: path, algorithms: algs)
    }
}

/// Mints a dev identity token for a nonce the node issued.
struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Mint an identity token with the dev identity provider.")

    @OptionGroup var data: DataOptions
    @Option(help: "The user id (prn).") var user: String
    @Option(help: "The nonce the node sent (NONCE frame).") var nonce: String
    @Option(help: "Display name claim.") var displayName: String?
    @Option(
        help:
            "The dev identity key directory the node was given (serve --dev-identity); default <data-dir>/dev-identity."
    )
    var devIdentity: String?

    func run() async throws {
        let configuration = try data.configuration()
        let directory =
            devIdentity.map { URL(fileURLWithPath: $0) }
            ?? configuration.dataDirectoryURL.appendingPathComponent(NodeBootstrap.Files.devIdentity)
        guard FileManager.default.fileExists(atPath: directory.path) else {
            throw ValidationError("no dev identity key in \(directory.path): start the node once first")
        }
        let provider = try DevIdentityProvider.loadOrCreate(in: directory)
        let userID: UserID
        do { userID = try UserID(user) } catch { throw ValidationError("bad user id: \(error)") }
        print(try provider.mintToken(user: userID, nonce: nonce, displayName: displayName))
    }
}
