/// Every setting of a node, each defined once: the key (config file, `LAMINA_…` variable,
/// `--set`), where it lives, and its doc; the default is the configuration's initial value.
/// Ranges are checked by ``NodeServerConfiguration/validate()``.
extension NodeServerConfiguration {
    public static let settings: [NodeSetting] = [
        .init("host", \.host, "Sync listener host (--listen)."),
        .init("port", \.port, "Sync listener port; 0 picks a free one (--listen)."),
        .init(
            "publicURL", \.publicURL,
            "The node's public https://host[:port], in the URLs of Server API answers and webhooks; none: the listener's."
        ),
        .init("adminHost", \.adminHost, "Admin listener (metrics, health) host (--admin)."),
        .init("adminPort", \.adminPort, "Admin listener port; -1 disables it (--admin off)."),
        .init("dataDirectory", \.dataDirectory, "Where the store, the certificate and the dev identity key live."),
        .init(
            "store", \.store,
            "PostgreSQL store URL postgres://user[:password]@host[:port]/database; none: SQLite in the data directory."),
        .init(
            "certificatePath", \.certificatePath,
            "TLS certificate chain (PEM); none: self-signed, created in the data directory."),
        .init("privateKeyPath", \.privateKeyPath, "TLS private key (PEM) of certificatePath."),
        .init(
            "identityProviders", \.identityProviders,
            "Identity providers: [{\"id\", \"publicKeyPath\", \"algorithms\"}]."),
        .init("devIdentityProvider", \.devIdentityProvider, "Trust the dev identity provider."),
        .init(
            "devIdentityDirectory", \.devIdentityDirectory,
            "The dev identity provider's key directory; none: <data-dir>/dev-identity."),
        .init("maxSessions", \.maxSessions, "Concurrent sync sessions; more are refused."),
        .init(
            "mallocArenas", \.mallocArenas,
            "glibc malloc arenas of the node process; 0: one per core, at least 2"
                + " (not on jemalloc, which lamina-node links: MALLOC_CONF=narenas:N)."),
        .init("maxStreamsPerConnection", \.maxStreamsPerConnection, "HTTP/2 streams per connection."),
        .init(
            "drainTimeoutSeconds", \.drainTimeoutSeconds, "How long a graceful shutdown waits for connections to drain."
        ),
        .init(
            "sessionLifetimeSeconds", \.sessionLifetimeSeconds,
            "How long a session lives after its login (1...31536000); then it is answered session-expired."),
        .init(
            "nodeID", \.nodeID,
            "This node's id in hexadecimal; none: made at first start and kept in the data directory.",
            parse: { value in
                switch value {
                case .null: return .some(nil)
                case .string(let hex), .text(let hex):
                    guard let id = UInt64(hex, radix: 16), id != 0 else { return nil }
                    return .some(id)
                default: return nil
                }
            },
            show: { $0.map { String($0, radix: 16) } ?? "(none)" }, kind: "a non-zero hexadecimal number"),

        .init("limits.maxFrameSize", \.limits.maxFrameSize, "Largest inbound frame payload in bytes."),
        .init(
            "limits.maxOutboundBytes", \.limits.maxOutboundBytes,
            "Outbound bytes queued per session before a slow consumer is disconnected."),
        .init(
            "limits.idleTimeoutSeconds", \.limits.idleTimeoutSeconds,
            "Seconds without an inbound frame before a session is closed."),
        .init(
            "limits.maxUnansweredFrames", \.limits.maxUnansweredFrames,
            "Inbound frames not yet answered before a stream stops reading."),
        .init(
            "limits.unauthenticatedMaxFrameSize", \.limits.unauthenticatedMaxFrameSize,
            "Largest frame payload before authentication."),
        .init(
            "limits.authenticationTimeoutSeconds", \.limits.authenticationTimeoutSeconds,
            "Seconds from a stream's opening to AUTHENTICATED."),
        .init(
            "limits.unauthenticatedMaxUnansweredFrames", \.limits.unauthenticatedMaxUnansweredFrames,
            "maxUnansweredFrames before authentication."),
        .init(
            "limits.unauthenticatedMaxOutboundBytes", \.limits.unauthenticatedMaxOutboundBytes,
            "Queued answers before authentication above which a stream stops reading."),
        .init(
            "limits.pacedAnswerQueueBytes", \.limits.pacedAnswerQueueBytes,
            "Queued bytes below which a large answer adds its next frame."),
        .init(
            "limits.stalledReaderTimeoutSeconds", \.limits.stalledReaderTimeoutSeconds,
            "Seconds a client waiting for a large answer may read nothing."),

        .init(
            "resources.maxUnauthenticatedPerConnection", \.resources.maxUnauthenticatedPerConnection,
            "Unauthenticated sessions per connection."),
        .init(
            "resources.maxUnauthenticatedPerAddress", \.resources.maxUnauthenticatedPerAddress,
            "Unauthenticated sessions per remote address."),
        .init("resources.maxUnauthenticated", \.resources.maxUnauthenticated, "Unauthenticated sessions on the node."),
        .init(
            "resources.maxConnections", \.resources.maxConnections,
            "Open connections (lowered to the file-descriptor limit less the reserve)."),
        .init(
            "resources.maxConnectionsPerAddress", \.resources.maxConnectionsPerAddress,
            "Connections one remote address may hold open."),
        .init(
            "resources.maxHandshakesPerAddress", \.resources.maxHandshakesPerAddress,
            "TLS handshakes one remote address may have in flight."),
        .init(
            "resources.adminIdleConnectionTimeoutSeconds", \.resources.adminIdleConnectionTimeoutSeconds,
            "Seconds an admin-port connection may stay without a byte either way."),
        .init(
            "resources.fileDescriptorReserve", \.resources.fileDescriptorReserve,
            "File descriptors kept for everything but client connections."),
        .init(
            "resources.idleConnectionTimeoutSeconds", \.resources.idleConnectionTimeoutSeconds,
            "Seconds a connection with no open stream is kept."),
        .init(
            "resources.stalledConnectionTimeoutSeconds", \.resources.stalledConnectionTimeoutSeconds,
            "Seconds a socket may take no byte before it is closed."),
        .init(
            "resources.clientPingAfterQuietSeconds", \.resources.clientPingAfterQuietSeconds,
            "Seconds of client silence before an HTTP/2 PING."),
        .init(
            "resources.clientPingDeadlineSeconds", \.resources.clientPingDeadlineSeconds,
            "Seconds the PING's ACK may take before the connection is closed."),
        .init(
            "resources.initialStreamWindowBytes", \.resources.initialStreamWindowBytes,
            "A stream's HTTP/2 receive window before it is admitted."),
        .init(
            "resources.nodeOutboundBudgetBytes", \.resources.nodeOutboundBudgetBytes,
            "Outbound bytes queued over all sync streams."),
        .init(
            "resources.answerBudgetBytes", \.resources.answerBudgetBytes,
            "Bytes of large answers' pages in flight over the node."),
        .init(
            "resources.maxChannelMembers", \.resources.maxChannelMembers,
            "The most members a channel may have (SPEC §6.8)."),
        .init(
            "resources.minimumOutboundShareBytes", \.resources.minimumOutboundShareBytes,
            "A stream's least share of the outbound budget."),
        .init(
            "resources.streamWindowBytes", \.resources.streamWindowBytes,
            "A stream's HTTP/2 receive window once admitted."),
        .init(
            "resources.commandsPerUserPerSecond", \.resources.commandBudget.commandsPerSecond,
            "Storage commands per user per second."),
        .init(
            "resources.commandBurstPerUser", \.resources.commandBudget.commandBurst,
            "Storage commands a user may send at once above the rate."),
        .init(
            "resources.commandBytesPerUserPerSecond", \.resources.commandBudget.bytesPerSecond,
            "Storage command bytes per user per second."),
        .init(
            "resources.commandByteBurstPerUser", \.resources.commandBudget.byteBurst,
            "Storage command bytes a user may send at once above the rate."),
        .init(
            "resources.maxUnproductiveFramesPerSecond", \.resources.maxUnproductiveFramesPerSecond,
            "HTTP/2 frames without progress a client may send per second."),
        .init(
            "resources.pruneIntervalSeconds", \.resources.pruneIntervalSeconds,
            "Seconds between prunings of expired nonces, sessions and idempotency records."),
        .init("resources.nonceLifetimeSeconds", \.resources.nonces.lifetimeSeconds, "Seconds a nonce stays good."),
        .init("resources.maxNoncesPerStream", \.resources.nonces.perStream, "Nonces one stream may hold."),
        .init("resources.maxNoncesPerConnection", \.resources.nonces.perConnection, "Nonces one connection may hold."),
        .init("resources.maxNonces", \.resources.nonces.perNode, "Nonces the node holds."),

        .init(
            "content.directory", \.content.directory,
            "Directory of the rich content files; none: <data-dir>/content (--content-dir)."),
        .init("content.quotaBytes", \.content.quotaBytes, "Rich content quota per user, in bytes."),
        .init(
            "content.maxConcurrentUploadsPerUser", \.content.maxConcurrentUploadsPerUser,
            "Rich content uploads per user at once."),
        .init(
            "content.abandonedUploadAgeSeconds", \.content.abandonedUploadAgeSeconds,
            "Seconds after which an unfinished upload is collected."),
        .init(
            "content.unreferencedContentAgeSeconds", \.content.unreferencedContentAgeSeconds,
            "Seconds after which complete content no message references is collected."),
        .init(
            "content.sweepIntervalSeconds", \.content.sweepIntervalSeconds,
            "Seconds between content collection sweeps (0 disables)."),
        .init("content.downloadChunkBytes", \.content.downloadChunkBytes, "Bytes read from a file per download chunk."),
        .init(
            "content.uploadBufferBytes", \.content.uploadBufferBytes,
            "Upload bytes buffered in memory before the stream stops reading."),
        .init(
            "content.uploadSyncIntervalBytes", \.content.uploadSyncIntervalBytes,
            "Upload bytes written between two fsyncs."),
        .init(
            "content.retryAfterSeconds", \.content.retryAfterSeconds,
            "Seconds a client over its concurrent uploads is told to wait."),
        .init(
            "content.uploadStallTimeoutSeconds", \.content.uploadStallTimeoutSeconds,
            "Seconds an upload may deliver no byte before 408."),

        .init(
            "webhooks.allowPrivateTargets", \.webhooks.allowPrivateTargets,
            "Allow webhook targets on loopback and private addresses."),
        .init(
            "webhooks.caFile", \.webhooks.caFile,
            "PEM file of CAs webhook targets' certificates chain to; none: the system's."),
        .init(
            "webhooks.retryPeriodSeconds", \.webhooks.retryPeriodSeconds,
            "Seconds an event is retried before its webhook is deactivated."),
        .init("webhooks.initialBackoffMilliseconds", \.webhooks.initialBackoffMilliseconds, "The first retry's delay."),
        .init("webhooks.maxBackoffSeconds", \.webhooks.maxBackoffSeconds, "The longest retry delay."),
        .init(
            "webhooks.connectTimeoutSeconds", \.webhooks.connectTimeoutSeconds,
            "Seconds to connect (TCP and TLS) to a target."),
        .init(
            "webhooks.responseTimeoutSeconds", \.webhooks.responseTimeoutSeconds,
            "Seconds from a request's first byte to its response's last."),
        .init(
            "webhooks.maxInFlightPerTarget", \.webhooks.maxInFlightPerTarget,
            "Requests in flight to one target and to each webhook."),

        .init(
            "push.apns", \.push.apns, "APNs: {\"teamID\", \"keyID\", \"keyFile\", \"productionURL\"?, \"sandboxURL\"?}."
        ),
        .init("push.fcm", \.push.fcm, "FCM HTTP v1: {\"serviceAccountFile\", \"sendURL\"?, \"tokenURL\"?}."),
        .init(
            "push.gateway", \.push.gateway,
            "A push gateway: {\"url\", \"authorization\"?, \"maxInFlight\"?, \"caFile\"?} (its CA file; none: push.caFile, else webhooks.caFile)."
        ),
        .init(
            "push.caFile", \.push.caFile,
            "PEM file of CAs the push providers' certificates chain to; none: the system's."),
        .init(
            "push.expirationSeconds", \.push.expirationSeconds,
            "Seconds after its message a push not delivered is dropped."),
        .init("push.initialBackoffMilliseconds", \.push.initialBackoffMilliseconds, "The first retry's delay."),
        .init("push.maxBackoffSeconds", \.push.maxBackoffSeconds, "The longest retry delay."),
        .init("push.connectTimeoutSeconds", \.push.connectTimeoutSeconds, "Seconds to connect to a provider."),
        .init("push.responseTimeoutSeconds", \.push.responseTimeoutSeconds, "Seconds a provider's response may take."),
        .init(
            "push.maxInFlightPerProvider", \.push.maxInFlightPerProvider, "Pushes in flight to APNs and to FCM at once."
        ),
        .init(
            "push.connectionsPerProvider", \.push.connectionsPerProvider,
            "HTTP/2 connections per APNs environment and to FCM."),

        .init(
            "storage.groupCommitDelayMicroseconds", \.storage.groupCommitDelayMicroseconds,
            "Group commit: microseconds between the starts of two commits under load,"
                + " less the mean gap between commands (0 commits at once)."),
        .init(
            "storage.inlineCommitMicroseconds", \.storage.inlineCommitMicroseconds,
            "SQLite: an event loop commits a command itself while the writer is idle, commits take at most"
                + " this many microseconds and commands come at least twice that far apart (0: never)."),
        .init(
            "storage.groupCommitTarget", \.storage.groupCommitTarget, "Group commit: commands per commit it waits for."),
        .init(
            "storage.readerPageCacheKiB", \.storage.readerPageCacheKiB,
            "SQLite's page cache of each read connection, in KiB."),
        .init(
            "storage.readerMemoryMapBytes", \.storage.readerMmapBytes,
            "Bytes of the store each read connection maps into memory (0: reads copy pages instead)."),

        .init("serverAPI.enabled", \.serverAPI.enabled, "Serve the Server API on the sync port."),
        .init(
            "serverAPI.requestsPerSecond", \.serverAPI.requestsPerSecond, "Server API requests per token per second."),
        .init("serverAPI.burst", \.serverAPI.burst, "Server API requests a token may make at once above the rate."),
        .init(
            "serverAPI.failedTokenBurst", \.serverAPI.failedTokenBurst,
            "Wrong Server API tokens one address may present at once before further ones get 429."),
        .init(
            "serverAPI.failedTokensPerSecond", \.serverAPI.failedTokensPerSecond,
            "Wrong Server API tokens per second one address may present on average."),
        .init("clientAPI.enabled", \.clientAPI.enabled, "Serve Layer's Client API (REST) on the sync port."),
        .init(
            "clientAPI.requestsPerSecond", \.clientAPI.requestsPerSecond,
            "Client API requests per session per second."),
        .init("clientAPI.burst", \.clientAPI.burst, "Client API requests a session may make at once above the rate."),

        .init(
            "webSocket.maxFrameBytes", \.webSocket.maxFrameBytes, "Client API WebSocket: largest frame (1009 past it)."),
        .init(
            "webSocket.maxMessageBytes", \.webSocket.maxMessageBytes,
            "Client API WebSocket: largest message, fragments joined (1009 past it)."),
        .init(
            "webSocket.maxOutboundBytes", \.webSocket.maxOutboundBytes,
            "Client API WebSocket: bytes queued for a client before it is closed as a slow reader (1008)."),
        .init(
            "webSocket.maxConnections", \.webSocket.maxConnections, "Client API WebSockets open at once on the node."),
        .init(
            "webSocket.pingAfterQuietSeconds", \.webSocket.pingAfterQuietSeconds,
            "Client API WebSocket: seconds without a frame before the node sends a PING."),
        .init(
            "webSocket.idleTimeoutSeconds", \.webSocket.idleTimeoutSeconds,
            "Client API WebSocket: seconds without a frame before the socket is closed (1001)."),

        .init("peers.host", \.peers.host, "Peer listener host (--peer-listen)."),
        .init("peers.port", \.peers.port, "Peer listener port; -1: peering off (--peer-listen)."),
        .init("peers.cluster", \.peers.cluster, "The cluster's name; nodes of another cluster are refused."),
        .init(
            "peers.peers", \.peers.peers,
            "Peer listeners this node dials, https://host:port (JSON array, or comma-separated)."),
        .init("peers.caFile", \.peers.caFile, "The cluster CA (PEM) that signs every node's peer certificate."),
        .init(
            "peers.certificateFile", \.peers.certificateFile,
            "This node's peer certificate (PEM), CN lamina-node-<node id in hex>, signed by the cluster CA."),
        .init("peers.keyFile", \.peers.keyFile, "The private key (PEM) of the peer certificate."),
        .init(
            "peers.reconnectMinimumMilliseconds", \.peers.reconnectMinimumMilliseconds,
            "First reconnect delay after a lost peer link."),
        .init("peers.reconnectMaximumMilliseconds", \.peers.reconnectMaximumMilliseconds, "Longest reconnect delay."),
        .init(
            "peers.connectTimeoutMilliseconds", \.peers.connectTimeoutMilliseconds,
            "Milliseconds a dial's TCP connection may take."),
        .init(
            "peers.pingAfterQuietMilliseconds", \.peers.pingAfterQuietMilliseconds,
            "Milliseconds of peer link silence before a PING."),
        .init(
            "peers.pingDeadlineMilliseconds", \.peers.pingDeadlineMilliseconds,
            "Milliseconds the PING's ACK may take before the link is lost."),
    ]

    /// A setting by its key.
    public static func setting(_ key: String) -> NodeSetting? { settingsByKey[key] }

    static let settingsByKey = Dictionary(uniqueKeysWithValues: settings.map { ($0.key, $0) })
    /// Keys that hold objects of settings (`limits`, `peers`, …).
    static let settingGroups = Set(
        settings.compactMap { $0.key.split(separator: ".").dropLast().first.map(String.init) })
}
