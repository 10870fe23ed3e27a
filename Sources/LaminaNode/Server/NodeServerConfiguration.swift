import Foundation
import LaminaLocalNode
import LaminaStore

/// Everything `lamina-node` can be told, by flags or a JSON config file; every field has a
/// default, so an empty configuration starts a working development node.
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
    /// Rich content: quota, concurrent uploads, collection (Protocol/CONTENT.md §7).
    public var content = ContentServiceSettings()
    /// The Server API (Layer's Platform API) on the sync port.
    public var serverAPI = ServerAPISettings()
    /// This node's id (hex in flags and files); nil: the data directory's, made at first start.
    /// A store keeps the id it was made with: a different one is refused at start-up.
    public var nodeID: UInt64?
    /// Peer nodes (off unless the peer listener's port is set).
    public var peers = PeerSettings()
    /// Webhook delivery: private targets, trust, retries, timeouts.
    public var webhooks = WebhookSettings()
    /// Push notifications: providers (APNs, FCM, a gateway), their credentials, retries.
    public var push = PushSettings()
    /// The store: group commit spacing, caches, queue bounds (`LaminaStore/Writer/WRITE-PATH.md`).
    package var storage = StorageConfiguration()

    public init() {}

    /// The data directory as an absolute URL.
    public var dataDirectoryURL: URL {
        URL(fileURLWithPath: dataDirectory, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
            .standardizedFileURL
    }

    /// Applies a JSON config file: every key optional (same names as the fields; `limits` nested).
    public mutating func apply(configFile path: String) throws {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw NodeServerError.configuration("cannot read config file \(path): \(error.localizedDescription)")
        }
        let file: ConfigFile
        do { file = try JSONDecoder().decode(ConfigFile.self, from: data) } catch {
            throw NodeServerError.configuration("config file \(path) is not valid: \(error)")
        }
        if let v = file.host { host = v }
        if let v = file.port { port = v }
        if let v = file.adminHost { adminHost = v }
        if let v = file.adminPort { adminPort = v }
        if let v = file.dataDirectory { dataDirectory = v }
        if let v = file.store { store = v }
        if let v = file.certificatePath { certificatePath = v }
        if let v = file.privateKeyPath { privateKeyPath = v }
        if let v = file.identityProviders { identityProviders = v }
        if let v = file.devIdentityProvider { devIdentityProvider = v }
        if let v = file.devIdentityDirectory { devIdentityDirectory = v }
        if let v = file.maxSessions { maxSessions = v }
        if let v = file.maxStreamsPerConnection { maxStreamsPerConnection = v }
        if let v = file.drainTimeoutSeconds { drainTimeoutSeconds = v }
        if let c = file.content { content.apply(c) }
        if let w = file.webhooks { webhooks.apply(w) }
        if let p = file.push { push.apply(p) }
        if let s = file.storage {
            if let v = s.groupCommitDelayMicroseconds { storage.groupCommitDelayMicroseconds = v }
            if let v = s.groupCommitTarget { storage.groupCommitTarget = v }
        }
        if let a = file.serverAPI {
            if let v = a.enabled { serverAPI.enabled = v }
            if let v = a.requestsPerSecond { serverAPI.requestsPerSecond = v }
            if let v = a.burst { serverAPI.burst = v }
        }
        if let p = file.peers {
            if let v = p.host { peers.host = v }
            if let v = p.port { peers.port = v }
            if let v = p.cluster { peers.cluster = v }
            if let v = p.peers { peers.peers = v }
            if let v = p.caFile { peers.caFile = v }
            if let v = p.certificateFile { peers.certificateFile = v }
            if let v = p.keyFile { peers.keyFile = v }
            if let v = p.reconnectMinimumMilliseconds { peers.reconnectMinimumMilliseconds = v }
            if let v = p.reconnectMaximumMilliseconds { peers.reconnectMaximumMilliseconds = v }
            if let v = p.connectTimeoutMilliseconds { peers.connectTimeoutMilliseconds = v }
            if let v = p.pingAfterQuietMilliseconds { peers.pingAfterQuietMilliseconds = v }
            if let v = p.pingDeadlineMilliseconds { peers.pingDeadlineMilliseconds = v }
        }
        if let v = file.nodeID {
            guard let id = UInt64(v, radix: 16), id != 0 else { throw NodeServerError.configuration("nodeID must be a non-zero hex number, not \(v)") }
            nodeID = id
        }
        if let l = file.limits {
            if let v = l.maxFrameSize { limits.maxFrameSize = v }
            if let v = l.maxOutboundBytes { limits.maxOutboundBytes = v }
            if let v = l.idleTimeoutSeconds { limits.idleTimeoutSeconds = v }
            if let v = l.maxUnansweredFrames { limits.maxUnansweredFrames = v }
            if let v = l.unauthenticatedMaxFrameSize { limits.unauthenticatedMaxFrameSize = v }
            if let v = l.authenticationTimeoutSeconds { limits.authenticationTimeoutSeconds = v }
            if let v = l.unauthenticatedMaxUnansweredFrames { limits.unauthenticatedMaxUnansweredFrames = v }
            if let v = l.unauthenticatedMaxOutboundBytes { limits.unauthenticatedMaxOutboundBytes = v }
            if let v = l.pacedAnswerQueueBytes { limits.pacedAnswerQueueBytes = v }
            if let v = l.stalledReaderTimeoutSeconds { limits.stalledReaderTimeoutSeconds = v }
        }
        if let r = file.resources {
            if let v = r.maxUnauthenticatedPerConnection { resources.maxUnauthenticatedPerConnection = v }
            if let v = r.maxUnauthenticatedPerAddress { resources.maxUnauthenticatedPerAddress = v }
            if let v = r.maxUnauthenticated { resources.maxUnauthenticated = v }
            if let v = r.maxConnections { resources.maxConnections = v }
            if let v = r.fileDescriptorReserve { resources.fileDescriptorReserve = v }
            if let v = r.idleConnectionTimeoutSeconds { resources.idleConnectionTimeoutSeconds = v }
            if let v = r.stalledConnectionTimeoutSeconds { resources.stalledConnectionTimeoutSeconds = v }
            if let v = r.clientPingAfterQuietSeconds { resources.clientPingAfterQuietSeconds = v }
            if let v = r.clientPingDeadlineSeconds { resources.clientPingDeadlineSeconds = v }
            if let v = r.initialStreamWindowBytes { resources.initialStreamWindowBytes = v }
            if let v = r.nodeOutboundBudgetBytes { resources.nodeOutboundBudgetBytes = v }
            if let v = r.minimumOutboundShareBytes { resources.minimumOutboundShareBytes = v }
            if let v = r.streamWindowBytes { resources.streamWindowBytes = v }
            if let v = r.commandsPerUserPerSecond { resources.commandBudget.commandsPerSecond = v }
            if let v = r.commandBurstPerUser { resources.commandBudget.commandBurst = v }
            if let v = r.commandBytesPerUserPerSecond { resources.commandBudget.bytesPerSecond = v }
            if let v = r.commandByteBurstPerUser { resources.commandBudget.byteBurst = v }
            if let v = r.maxUnproductiveFramesPerSecond { resources.maxUnproductiveFramesPerSecond = v }
            if let v = r.pruneIntervalSeconds { resources.pruneIntervalSeconds = v }
            if let v = r.nonceLifetimeSeconds { resources.nonces.lifetimeSeconds = v }
            if let v = r.maxNoncesPerStream { resources.nonces.perStream = v }
            if let v = r.maxNoncesPerConnection { resources.nonces.perConnection = v }
            if let v = r.maxNonces { resources.nonces.perNode = v }
        }
        try validate()
    }

    /// Refuses values outside their ranges, with a reason.
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
        try check((1...3_600).contains(limits.authenticationTimeoutSeconds), "authenticationTimeoutSeconds must be 1...3600")
        try check(limits.unauthenticatedMaxUnansweredFrames >= 2, "unauthenticatedMaxUnansweredFrames must be at least 2")
        try check(
            (1_024...limits.maxOutboundBytes).contains(limits.unauthenticatedMaxOutboundBytes),
            "unauthenticatedMaxOutboundBytes must be 1024...maxOutboundBytes")
        try check(
            (1...limits.maxOutboundBytes / 2).contains(limits.pacedAnswerQueueBytes),
            "pacedAnswerQueueBytes must be 1...maxOutboundBytes / 2")
        try check((1...3_600).contains(limits.stalledReaderTimeoutSeconds), "stalledReaderTimeoutSeconds must be 1...3600")
        try check(maxSessions >= 1, "maxSessions must be at least 1")
        try check(maxStreamsPerConnection >= 1, "maxStreamsPerConnection must be at least 1")
        try resources.validate(maxSessions: maxSessions)
        try check((certificatePath == nil) == (privateKeyPath == nil), "certificatePath and privateKeyPath go together")
        try content.validate()
        try webhooks.validate()
        try push.validate()
        do { try storage.validate() } catch { throw NodeServerError.configuration("storage: \(error.reason)") }
        try check(serverAPI.requestsPerSecond > 0 && serverAPI.burst >= 1, "serverAPI needs requestsPerSecond > 0 and burst >= 1")
        for provider in identityProviders {
            try check(!provider.algorithms.isEmpty, "identity provider \(provider.id) allows no algorithm")
            for alg in provider.algorithms {
                try check(["ES256", "RS256"].contains(alg), "identity provider \(provider.id): unsupported algorithm \(alg)")
            }
        }
    }

    private struct ConfigFile: Decodable {
        struct Limits: Decodable {
            var maxFrameSize: Int?
            var maxOutboundBytes: Int?
            var idleTimeoutSeconds: Int?
            var maxUnansweredFrames: Int?
            var unauthenticatedMaxFrameSize: Int?
            var authenticationTimeoutSeconds: Int?
            var unauthenticatedMaxUnansweredFrames: Int?
            var unauthenticatedMaxOutboundBytes: Int?
            var pacedAnswerQueueBytes: Int?
            var stalledReaderTimeoutSeconds: Int?
        }
        struct Resources: Decodable {
            var maxUnauthenticatedPerConnection: Int?
            var maxUnauthenticatedPerAddress: Int?
            var maxUnauthenticated: Int?
            var maxConnections: Int?
            var fileDescriptorReserve: Int?
            var idleConnectionTimeoutSeconds: Int?
            var stalledConnectionTimeoutSeconds: Int?
            var clientPingAfterQuietSeconds: Int?
            var clientPingDeadlineSeconds: Int?
            var initialStreamWindowBytes: Int?
            var nodeOutboundBudgetBytes: Int?
            var minimumOutboundShareBytes: Int?
            var streamWindowBytes: Int?
            var commandsPerUserPerSecond: Double?
            var commandBurstPerUser: Double?
            var commandBytesPerUserPerSecond: Double?
            var commandByteBurstPerUser: Double?
            var maxUnproductiveFramesPerSecond: Int?
            var pruneIntervalSeconds: Int?
            var nonceLifetimeSeconds: Int?
            var maxNoncesPerStream: Int?
            var maxNoncesPerConnection: Int?
            var maxNonces: Int?
        }
        var host: String?
        var port: Int?
        var adminHost: String?
        var adminPort: Int?
        var dataDirectory: String?
        var store: String?
        var certificatePath: String?
        var privateKeyPath: String?
        var identityProviders: [ProviderFile]?
        var devIdentityProvider: Bool?
        var devIdentityDirectory: String?
        var maxSessions: Int?
        var maxStreamsPerConnection: UInt32?
        var drainTimeoutSeconds: Int?
        var limits: Limits?
        var resources: Resources?
        var content: ContentServiceSettings.File?
        var webhooks: WebhookSettings.File?
        var push: PushSettings.File?
        struct StorageFile: Decodable {
            var groupCommitDelayMicroseconds: Int?
            var groupCommitTarget: Int?
        }
        var storage: StorageFile?
        struct ServerAPIFile: Decodable {
            var enabled: Bool?
            var requestsPerSecond: Double?
            var burst: Double?
        }
        var serverAPI: ServerAPIFile?
        struct PeersFile: Decodable {
            var host: String?
            var port: Int?
            var cluster: String?
            var peers: [String]?
            var caFile: String?
            var certificateFile: String?
            var keyFile: String?
            var reconnectMinimumMilliseconds: Int?
            var reconnectMaximumMilliseconds: Int?
            var connectTimeoutMilliseconds: Int?
            var pingAfterQuietMilliseconds: Int?
            var pingDeadlineMilliseconds: Int?
        }
        var peers: PeersFile?
        var nodeID: String?
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
