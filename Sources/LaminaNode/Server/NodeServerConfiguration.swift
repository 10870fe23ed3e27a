import Foundation
import LaminaLocalNode
import LaminaStore
import LaminaTransport

/// Everything `lamina-node` can be told; every field has a default, so an empty configuration
/// starts a working development node. The settings read from a config file, the environment
/// and flags are listed once in ``settings`` (`Configuration/`).
public struct NodeServerConfiguration: Sendable, Hashable {
    /// An identity provider read from files: its id (the JWT `iss`), a PEM public key, algorithms.
    public struct ProviderFile: Sendable, Hashable, Codable {
        public var id: String
        public var publicKeyPath: String
        public var algorithms: [String]

        public init(id: String, publicKeyPath: String, algorithms: [String] = ["ES256", "RS256"]) {
            self.id = id
            self.publicKeyPath = publicKeyPath
            self.algorithms = algorithms
        }
    }

    /// Network event-loop threads when none are asked for: one per core but one, at least one.
    /// The storage writer is a thread of its own that keeps a core busy under write load, and
    /// every loop holding a recipient of a message is woken for it: on 2 cores one loop spent
    /// 6–12 % less node CPU per message than two, and reached up to 12 % less peak throughput
    /// where a load generator shared the two cores (WRITE-PATH.md).
    public static func defaultEventLoops(cores: Int) -> Int { max(1, cores - 1) }

    /// Sync listener host and port (port 0: pick a free one).
    public var host = LocalNode.defaultHost
    public var port = LocalNode.defaultPort
    /// The node's public URL, `https://host[:port]`: what the URLs in Server API answers and
    /// webhook payloads start with (never a request's Host). nil: `https://<host>:<port>` of the
    /// listener (`localhost` for a wildcard host).
    public var publicURL: String?
    /// Admin (metrics, health) host and port; port -1 disables the admin listener.
    public var adminHost = "127.0.0.1"
    public var adminPort = 7444
    /// Where the store, the certificate and the dev identity key live.
    public var dataDirectory = LocalNode.defaultDataDirectory
    /// The store: nil for SQLite in the data directory (the default), or a PostgreSQL URL
    /// `postgres://user[:password]@host[:port]/database` (`?host=/socket/dir` for a unix socket).
    public var store: String?
    /// TLS certificate chain and key; default: a self-signed pair created in the data directory.
    public var certificatePath: String?
    public var privateKeyPath: String?
    /// Identity providers besides the dev provider.
    public var identityProviders: [ProviderFile] = []
    /// Whether the dev identity provider (key in the data directory) is trusted.
    public var devIdentityProvider = true
    /// Where the dev identity provider's key is (made there when missing); nil: `dev-identity`
    /// in the data directory. Nodes of a development cluster share one, so a user's token
    /// opens a session on any of them.
    public var devIdentityDirectory: String?
    /// Per-stream limits.
    public var limits = SyncStreamLimits()
    /// Concurrent sync sessions accepted; more are refused with 503.
    public var maxSessions = 10_000
    /// Limits per connection, per remote address and per node (unauthenticated sessions,
    /// connections, idle connections, frame floods): `Server/RESOURCES.md`.
    public var resources = NodeResourceLimits()
    /// HTTP/2 streams per connection.
    public var maxStreamsPerConnection: UInt32 = 100
    /// How long a graceful shutdown waits for connections to drain.
    public var drainTimeoutSeconds = 10
    /// How long a session lives after its login (Layer's session TTL): then its token is
    /// refused and its open streams end with `session-expired`; the SDK logs in again.
    public var sessionLifetimeSeconds = 30 * 24 * 3600
    /// glibc malloc arenas of the node process (0: one per core, at least 2), set by
    /// `lamina-node` at start (``ProcessMemory``). glibc's own default is 8 per core: each
    /// thread that allocates may get an arena whose freed memory stays resident, which made
    /// 32 concurrent history answers grow the node by ~60 MiB instead of ~30 (RESOURCES.md §5).
    /// Not applied on jemalloc, which `lamina-node` links (RESOURCES.md §14).
    public var mallocArenas = 0
    /// Rich content: quota, concurrent uploads, collection (Protocol/CONTENT.md §7).
    public var content = ContentServiceSettings()
    /// The Server API (Layer's Platform API) on the sync port.
    public var serverAPI = ServerAPISettings()
    /// Layer's Client API (REST) on the sync port.
    public var clientAPI = ClientAPISettings()
    /// This node's id (hex in flags and files); nil: the data directory's, made at first start.
    /// A store keeps the id it was made with: a different one is refused at start-up.
    public var nodeID: UInt64?
    /// Peer nodes (off unless the peer listener's port is set).
    public var peers = PeerSettings()
    /// Webhook delivery: private targets, trust, retries, timeouts.
    public var webhooks = WebhookSettings()
    /// Push notifications: providers (APNs, FCM, a gateway), their credentials, retries.
    public var push = PushSettings()
    /// The Client API's WebSocket (`/websocket`): frame, message and outbound bounds, keepalive,
    /// the most sockets open.
    public var webSocket = WebSocketSettings()
    /// The store: group commit spacing, caches, queue bounds (`LaminaStore/Writer/WRITE-PATH.md`).
    package var storage = StorageConfiguration()

    public init() {}

    /// The data directory as an absolute URL.
    public var dataDirectoryURL: URL {
        URL(fileURLWithPath: dataDirectory, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
            .standardizedFileURL
    }

    /// Refuses values outside their ranges, with a reason.
    /// The session lifetimes a node accepts: a second to a year.
    public static let sessionLifetimeRange = 1...31_536_000

    public func validate() throws {
        func check(_ ok: Bool, _ reason: String) throws { if !ok { throw NodeServerError.configuration(reason) } }
        try check((0...65535).contains(port), "port must be 0...65535, not \(port)")
        try check(nodeID != 0, "nodeID must not be 0")
        try peers.validate()
        try check(adminPort == -1 || (0...65535).contains(adminPort), "adminPort must be -1 or 0...65535")
        try check((8...4 * 1024 * 1024).contains(limits.maxFrameSize), "maxFrameSize must be 8...4194304")
        try check(limits.maxOutboundBytes >= 64 * 1024, "maxOutboundBytes must be at least 65536")
        try check((1...86_400).contains(limits.idleTimeoutSeconds), "idleTimeoutSeconds must be 1...86400")
        try check(limits.maxUnansweredFrames >= 2, "maxUnansweredFrames must be at least 2")
        try check(
            (8_448...4 * 1024 * 1024).contains(limits.unauthenticatedMaxFrameSize),
            "unauthenticatedMaxFrameSize must be 8448...4194304 (AUTHENTICATE must fit)")
        try check(
            (1...3_600).contains(limits.authenticationTimeoutSeconds), "authenticationTimeoutSeconds must be 1...3600")
        try check(
            limits.unauthenticatedMaxUnansweredFrames >= 2, "unauthenticatedMaxUnansweredFrames must be at least 2")
        try check(
            (1_024...limits.maxOutboundBytes).contains(limits.unauthenticatedMaxOutboundBytes),
            "unauthenticatedMaxOutboundBytes must be 1024...maxOutboundBytes")
        try check(
            (1...limits.maxOutboundBytes / 2).contains(limits.pacedAnswerQueueBytes),
            "pacedAnswerQueueBytes must be 1...maxOutboundBytes / 2")
        try check(
            (1...3_600).contains(limits.stalledReaderTimeoutSeconds), "stalledReaderTimeoutSeconds must be 1...3600")
        try check(maxSessions >= 1, "maxSessions must be at least 1")
        try check(
            (Self.sessionLifetimeRange).contains(sessionLifetimeSeconds),
            "sessionLifetimeSeconds must be \(Self.sessionLifetimeRange.lowerBound)...\(Self.sessionLifetimeRange.upperBound)"
        )
        try check((0...64).contains(mallocArenas), "mallocArenas must be 0...64 (0: one per core)")
        try check(maxStreamsPerConnection >= 1, "maxStreamsPerConnection must be at least 1")
        try resources.validate(maxSessions: maxSessions)
        try check((certificatePath == nil) == (privateKeyPath == nil), "certificatePath and privateKeyPath go together")
        try content.validate()
        try webhooks.validate()
        try push.validate()
        if let problem = webSocket.problems.first { throw NodeServerError.configuration("webSocket: \(problem)") }
        do { try storage.validate() } catch { throw NodeServerError.configuration("storage: \(error.reason)") }
        try check(
            serverAPI.requestsPerSecond > 0 && serverAPI.burst >= 1,
            "serverAPI needs requestsPerSecond > 0 and burst >= 1")
        try check(
            serverAPI.failedTokensPerSecond > 0 && serverAPI.failedTokenBurst >= 1,
            "serverAPI needs failedTokensPerSecond > 0 and failedTokenBurst >= 1")
        if let publicURL {
            let parts = URLComponents(string: publicURL)
            try check(
                parts?.scheme == "https" && parts?.host?.isEmpty == false && parts?.user == nil
                    && parts?.query == nil && parts?.fragment == nil && ["", "/"].contains(parts?.path ?? ""),
                "publicURL must be https://host[:port] (no path, query or credentials), not \(publicURL)")
        }
        try check(
            clientAPI.requestsPerSecond > 0 && clientAPI.burst >= 1,
            "clientAPI needs requestsPerSecond > 0 and burst >= 1")
        for provider in identityProviders {
            try check(!provider.algorithms.isEmpty, "identity provider \(provider.id) allows no algorithm")
            for alg in provider.algorithms {
                try check(
                    ["ES256", "RS256"].contains(alg), "identity provider \(provider.id): unsupported algorithm \(alg)")
            }
        }
    }
}

/// A node server failure with a reason (configuration, start-up).
public enum NodeServerError: Error, CustomStringConvertible {
    case configuration(String)
    case startup(String)

    public var description: String {
        switch self {
        case .configuration(let reason): "configuration: \(reason)"
        case .startup(let reason): "start-up: \(reason)"
        }
    }
}
