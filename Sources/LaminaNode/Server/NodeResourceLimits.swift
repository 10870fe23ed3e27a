import Foundation

/// The node's limits per connection, per remote address and per node (the per-stream ones are
/// ``SyncStreamLimits``). Declared here once, with their defaults, validated by
/// ``NodeServerConfiguration/validate()``, enforced where the input enters (the listener, the
/// HTTP/2 connection, the sync route). The reasons for the numbers: `Server/RESOURCES.md`.
public struct NodeResourceLimits: Sendable, Hashable, Codable {
    /// Sync sessions not yet authenticated on one connection. A client needs one.
    public var maxUnauthenticatedPerConnection = 8
    /// Sync sessions not yet authenticated from one remote IP address (all its connections).
    public var maxUnauthenticatedPerAddress = 128
    /// Sync sessions not yet authenticated on the whole node: the rest of
    /// ``NodeServerConfiguration/maxSessions`` is kept for authenticated sessions (the node
    /// uses at most 90 % of `maxSessions` here: ``effectiveMaxUnauthenticated(maxSessions:)``).
    public var maxUnauthenticated = 1_000
    /// The retry delay of the `overloaded` ERROR that refuses a session over one of the three.
    public var refusalRetryAfterMilliseconds: UInt32 = 1_000

    /// Open connections (TLS handshakes included). The node lowers it to the soft
    /// `RLIMIT_NOFILE` minus ``fileDescriptorReserve`` when that is smaller.
    public var maxConnections = 10_000
    /// File descriptors kept for everything but client connections: the store (SQLite with
    /// its WAL and shared memory, one writer and the readers), content files being uploaded or
    /// downloaded, the listeners, the admin port, the event loops.
    public var fileDescriptorReserve = 256
    /// Connections one remote address may hold open (TLS handshakes included); more from it
    /// are closed at once, before TLS, while other addresses keep the rest of ``maxConnections``.
    public var maxConnectionsPerAddress = 1_000
    /// TLS handshakes one remote address may have in flight (a connection that sends nothing
    /// holds one until the 10 s handshake timeout); more from it are closed at once.
    public var maxHandshakesPerAddress = 128
    /// An admin-port connection without a byte either way for this long is closed.
    public var adminIdleConnectionTimeoutSeconds = 60
    /// A connection with no open stream for this long (from its TLS handshake, then from its
    /// last stream's close) gets GOAWAY and is closed.
    public var idleConnectionTimeoutSeconds = 60
    /// HTTP/2 frames that make no progress (empty DATA, PRIORITY, PING, SETTINGS) a client may
    /// send per second; one more ends its connection with GOAWAY ENHANCE_YOUR_CALM.
    public var maxUnproductiveFramesPerSecond = 1_000
    /// A connection whose socket takes no byte for this long (the client reads nothing) is
    /// closed and everything queued for it released (a reset could not reach it anyway).
    public var stalledConnectionTimeoutSeconds = 30
    /// A client connection that sent nothing for this long is sent an HTTP/2 PING, and closed
    /// when the ACK does not come back within ``clientPingDeadlineSeconds``: a device that
    /// vanished (no reset: network gone, laptop shut) stops counting as online (its pushes
    /// resume, its session's resources go) within their sum, not TCP's minutes. A live client
    /// answers in its HTTP/2 library, at no cost to the app.
    public var clientPingAfterQuietSeconds = 30
    public var clientPingDeadlineSeconds = 10
    /// The HTTP/2 receive window a stream starts with (SETTINGS_INITIAL_WINDOW_SIZE): what a
    /// client the node does not know yet can make it buffer per stream. A sync stream's window
    /// opens to ``streamWindowBytes`` once it authenticated, an upload's once it was admitted.
    /// Outbound bytes queued over all sync streams before streams holding more than their
    /// share (this over the open streams, at least ``minimumOutboundShareBytes``) are reset as
    /// slow consumers (``NodeOutboundBudget``).
    public var nodeOutboundBudgetBytes = 1_024 * 1_048_576
    public var minimumOutboundShareBytes = 256 * 1_024
    /// Bytes of large answers' pages (FETCH_HISTORY, SYNC backlogs, snapshots) in flight over
    /// the node, from the store read until the page left the stream's paced queue; one user
    /// holds at most half (``AnswerBudget``).
    public var answerBudgetBytes = 16 * 1_048_576
    /// The most members a channel may have (SPEC §6.8), checked where a join enters.
    public var maxChannelMembers = NodeEngineConfiguration.defaultMaxChannelMembers
    public var initialStreamWindowBytes = 16 * 1_024
    public var streamWindowBytes = 256 * 1_024
    /// Per user over all its sessions: storage commands and their bytes (config file keys
    /// `commandsPerUserPerSecond`, `commandBurstPerUser`, `commandBytesPerUserPerSecond`,
    /// `commandByteBurstPerUser`).
    public var commandBudget = CommandBudget()
    /// Nonces: lifetime, and how many one stream, one connection and the node may hold
    /// (config file keys `nonceLifetimeSeconds`, `maxNoncesPerStream`, `maxNoncesPerConnection`,
    /// `maxNonces`).
    public var nonces = NonceLimits()
    /// How often expired nonces and sessions and old idempotency records are deleted
    /// (``StoragePruner``). Nonces also go when their connection closes.
    public var pruneIntervalSeconds = 300

    public init() {}

    /// Refuses values outside their ranges, with a reason.
    public func validate(maxSessions: Int) throws {
        func check(_ ok: Bool, _ reason: String) throws { if !ok { throw NodeServerError.configuration(reason) } }
        try check(maxUnauthenticatedPerConnection >= 1, "resources.maxUnauthenticatedPerConnection must be at least 1")
        try check(
            maxUnauthenticatedPerAddress >= maxUnauthenticatedPerConnection,
            "resources.maxUnauthenticatedPerAddress must be at least maxUnauthenticatedPerConnection")
        try check(
            maxUnauthenticated >= maxUnauthenticatedPerAddress,
            "resources.maxUnauthenticated must be at least maxUnauthenticatedPerAddress")
        try check(maxConnections >= 1, "resources.maxConnections must be at least 1")
        try check(maxConnectionsPerAddress >= 1, "resources.maxConnectionsPerAddress must be at least 1")
        try check(
            (1...86_400).contains(adminIdleConnectionTimeoutSeconds),
            "resources.adminIdleConnectionTimeoutSeconds must be 1...86400")
        try check(
            (1...maxConnectionsPerAddress).contains(maxHandshakesPerAddress),
            "resources.maxHandshakesPerAddress must be 1...maxConnectionsPerAddress")
        try check(fileDescriptorReserve >= 64, "resources.fileDescriptorReserve must be at least 64")
        try check(
            (1...86_400).contains(idleConnectionTimeoutSeconds),
            "resources.idleConnectionTimeoutSeconds must be 1...86400")
        try check(
            (1...3_600).contains(stalledConnectionTimeoutSeconds),
            "resources.stalledConnectionTimeoutSeconds must be 1...3600")
        try check(
            (16_384...Int(Int32.max)).contains(initialStreamWindowBytes)
                && initialStreamWindowBytes <= streamWindowBytes
                && streamWindowBytes <= Int(Int32.max),
            "resources.initialStreamWindowBytes must be at least 16384 (a frame before authentication) and at most streamWindowBytes"
        )
        try check(
            nodeOutboundBudgetBytes >= 1_048_576 && minimumOutboundShareBytes >= 65_536,
            "resources.nodeOutboundBudgetBytes must be at least 1048576 and minimumOutboundShareBytes at least 65536")
        try check(
            (1...1_000_000).contains(maxChannelMembers), "resources.maxChannelMembers must be 1 to 1000000")
        try check(
            answerBudgetBytes >= 2 * 1_048_576,
            "resources.answerBudgetBytes must be at least 2097152 (two pages of a large answer)")
        try check(
            commandBudget.commandsPerSecond >= 1 && commandBudget.commandBurst >= 1,
            "resources.commandsPerUserPerSecond and commandBurstPerUser must be at least 1")
        try check(
            commandBudget.bytesPerSecond >= 65_536 && commandBudget.byteBurst >= 2 * 1_048_576,
            "resources.commandBytesPerUserPerSecond must be at least 65536 and commandByteBurstPerUser at least 2097152 (a largest frame)"
        )
        try check(
            (1...86_400).contains(clientPingAfterQuietSeconds) && (1...3_600).contains(clientPingDeadlineSeconds),
            "resources.clientPingAfterQuietSeconds must be 1...86400 and clientPingDeadlineSeconds 1...3600")
        try check(maxUnproductiveFramesPerSecond >= 10, "resources.maxUnproductiveFramesPerSecond must be at least 10")
        try check((1...86_400).contains(pruneIntervalSeconds), "resources.pruneIntervalSeconds must be 1...86400")
        if let problem = nonces.problem() { throw NodeServerError.configuration(problem) }
    }

    /// ``maxUnauthenticated``, at most 90 % of `maxSessions` (at least 1): a tenth of the
    /// session slots always stays for authenticated sessions.
    public func effectiveMaxUnauthenticated(maxSessions: Int) -> Int {
        min(maxUnauthenticated, max(1, maxSessions - maxSessions / 10))
    }

    /// ``maxConnections`` lowered below a soft file-descriptor limit of `softLimit`, keeping
    /// ``fileDescriptorReserve``; nil when the limit leaves no room for a single connection.
    public func effectiveMaxConnections(softLimit: Int) -> Int? {
        let room = softLimit - fileDescriptorReserve
        guard room >= 1 else { return nil }
        return min(maxConnections, room)
    }

    /// The process's soft `RLIMIT_NOFILE` (Int.max when unlimited or unknown).
    public static func softFileDescriptorLimit() -> Int {
        var limit = rlimit()
        #if os(Linux)
            let rc = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        #else
            let rc = getrlimit(RLIMIT_NOFILE, &limit)
        #endif
        guard rc == 0, limit.rlim_cur < rlim_t(Int.max) else { return Int.max }
        return Int(clamping: limit.rlim_cur)
    }
}
