import LaminaModel
import LaminaStore
import LaminaWire

/// Everything the engine needs to know, with sensible defaults.
public struct NodeEngineConfiguration: Sendable {
    /// This node's id in HLC positions.
    public var nodeID: NodeID
    /// The identity providers whose tokens the node accepts (JWT `iss` -> key and algorithms).
    public var identityProviders: [IdentityProvider]
    /// How long a session token stays valid. Default 30 days.
    public var sessionLifetime: Duration
    /// Nonces: lifetime, and how many per stream, per connection and per node (``NonceTable``).
    public var nonces = NonceLimits()
    /// Leeway for JWT `iat`/`exp`. Default 60 s.
    public var maxClockSkew: Duration
    /// The largest frame payload the node's streams accept, announced in WELCOME.
    public var maxFrameSize: Int = WireLimits.default.maxFrameSize
    /// What one user may submit to the store over all its sessions; over it a command is
    /// answered `overloaded` with the wait.
    public var commandBudget = CommandBudget()
    /// The cluster this node belongs to, named in WELCOME (SPEC §5.1, §6.5).
    public var cluster = "lamina"
    /// Bytes of large answers' pages in flight over the node (``AnswerBudget``).
    public var answerBudgetBytes = 16 * 1_048_576
    /// The most members a channel may have (SPEC §6.8), checked where a join enters.
    public var maxChannelMembers = NodeEngineConfiguration.defaultMaxChannelMembers
    /// The default of ``maxChannelMembers``.
    public static let defaultMaxChannelMembers = 10_000
    /// Bounds on replicated operations parked until their conversation arrives (SPEC §6.5).
    package var parking = ParkingLimits()

    public init(
        nodeID: NodeID,
        identityProviders: [IdentityProvider] = [],
        sessionLifetime: Duration = .seconds(30 * 24 * 3600),
        maxClockSkew: Duration = .seconds(60)
    ) {
        self.nodeID = nodeID
        self.identityProviders = identityProviders
        self.sessionLifetime = sessionLifetime
        self.maxClockSkew = maxClockSkew
    }
}

/// What one user may submit to the store over all its sessions: token buckets of storage
/// commands and of their encoded bytes, refilled continuously. The count is high on purpose
/// (one busy session pipelines thousands a second); the bytes bound what one member can make
/// the single writer store (a user sending 1 MiB messages as fast as the writer took them
/// delayed every other user's ACKs).
public struct CommandBudget: Sendable, Hashable, Codable {
    public var commandsPerSecond = 20_000.0
    public var commandBurst = 20_000.0
    public var bytesPerSecond = 16.0 * 1_048_576
    public var byteBurst = 64.0 * 1_048_576

    public init() {}
}

/// An identity provider the node trusts.
public struct IdentityProvider: Sendable, Hashable {
    /// The JWT `iss`.
    public var id: String
    /// The provider's public key (SubjectPublicKeyInfo PEM).
    public var publicKeyPEM: String
    /// The accepted JWS algorithms: a subset of ["RS256", "ES256"].
    public var algorithms: Set<String>

    public init(id: String, publicKeyPEM: String, algorithms: Set<String>) {
        self.id = id
        self.publicKeyPEM = publicKeyPEM
        self.algorithms = algorithms
    }
}

extension NodeEngineConfiguration {
    /// The most messages one FETCH_HISTORY answers with (storage's page limit).
    package var maxHistoryMessages: Int { StorageLimits.maxPageSize }
}
