import Foundation
import LaminaModel
import LaminaWire

/// How a client reaches its node and where it keeps its data.
public struct LaminaConfiguration: Hashable, Sendable {
    /// What the client trusts when it opens TLS to the node.
    public enum Trust: Hashable, Sendable {
        /// A PEM file of certificate authorities; the node's chain must lead to one.
        case certificateAuthorities(URL)
        /// A PEM file holding the one certificate the node must present.
        case pinnedCertificate(URL)
    }

    /// The node, `https://host[:port]`; the sync stream is `POST /v1/sync` on it.
    public var nodeURL: URL
    public var trust: Trust
    /// Where each user's local store lives (one folder per user inside).
    public var dataDirectory: URL
    /// The client's name and version sent in HELLO (at most 1,024 bytes).
    public var agent: String
    public var reconnect: ReconnectPolicy
    /// What to fetch of a conversation's earlier messages when it appears on this device
    /// from the node mid-session (the user was added, or a conversation started elsewhere):
    /// a history policy, or nil for the ``synchronizationPolicy``'s, so the device holds what
    /// a first sync would have given it ("new participants gain access to all previous
    /// messages"). Only used when ``fetchesHistoryOnJoin`` is on and the node offers
    /// history fetch.
    public var historyOnJoin: HistoryPolicy? = nil
    /// Whether a conversation that appears mid-session gets its earlier messages fetched
    /// (by ``historyOnJoin``); off: nothing until the app calls `LaminaClient.fetchHistory`.
    public var fetchesHistoryOnJoin = true
    /// The cluster the node must belong to (its WELCOME names it, SPEC §5.1); nil: any. A node
    /// of another cluster ends the connection with `wrong-cluster`, and the client stops.
    public var cluster: String? = nil
    /// What a new or wiped device holds after its first sync, and a device whose cursor fell
    /// below what the node keeps of the feed: the node sends a snapshot of the user's
    /// conversations (each with its latest message and counts), then the device fetches each
    /// conversation's messages by this policy; older ones page in with `fetchHistory`.
    /// Default `.unreadOnly` (the reference product's default, and a phone's: what the user
    /// has not seen, never their whole history).
    public var synchronizationPolicy: SynchronizationPolicy = .unreadOnly
    /// How many messages one FETCH_HISTORY asks for when a conversation's complete history is
    /// fetched forwards a page at a time (`.completeHistory`, and `fetchHistory` with
    /// `.complete`): 1...10,000 (`FetchHistory.maxPageCount`).
    public var historyPageSize: Int = SyncSession.defaultHistoryPageSize
    /// Tunables of the local store.
    public var store = StoreConfiguration()
    /// Liveness of the connection to the node (SPEC §1.1): after this many seconds without a
    /// byte from the node an HTTP/2 PING goes out, and the connection is dropped (and
    /// reconnected by ``reconnect``) when its ACK is not back within
    /// ``pingDeadlineSeconds``: a node that vanished without a reset (network gone) is noticed
    /// within their sum, not TCP's minutes. 1...3600 each.
    public var pingAfterQuietSeconds = 30
    public var pingDeadlineSeconds = 10

    public init(
        nodeURL: URL, trust: Trust, dataDirectory: URL, agent: String = "lamina-swift/1",
        reconnect: ReconnectPolicy = ReconnectPolicy()
    ) {
        self.nodeURL = nodeURL
        self.trust = trust
        self.dataDirectory = dataDirectory
        self.agent = agent
        self.reconnect = reconnect
    }

    /// The history policy a conversation that appears mid-session is filled by (nil: none):
    /// ``historyOnJoin``, else the one the ``synchronizationPolicy`` fills a first sync's
    /// conversations by.
    var joinHistoryPolicy: HistoryPolicy? {
        guard fetchesHistoryOnJoin else { return nil }
        if let historyOnJoin { return historyOnJoin }
        switch synchronizationPolicy {
        case .completeHistory: return .complete
        case .unreadOnly: return .unreadOnly
        case .lastMessages(let n): return .lastN(UInt32(clamping: n))
        case .feedReplay: return nil
        }
    }

    /// The longest agent string, in UTF-8 bytes (SPEC §3.15 free text).
    public static let maxAgentBytes = 1_024

    /// Checks the URL's form, the agent's length and the reconnect policy.
    public func validate() throws(ClientError) {
        guard nodeURL.scheme?.lowercased() == "https", let host = nodeURL.host, !host.isEmpty else {
            throw ClientError(
                .invalidSetting, "the node URL must be https://host[:port], not '\(nodeURL.absoluteString.prefix(200))'"
            )
        }
        guard nodeURL.port.map({ (1...65_535).contains($0) }) ?? true else {
            throw ClientError(.invalidSetting, "the node URL's port must be 1...65535")
        }
        guard dataDirectory.isFileURL else {
            throw ClientError(.invalidSetting, "the data directory must be a file URL")
        }
        guard !agent.isEmpty, agent.utf8.count <= Self.maxAgentBytes else {
            throw ClientError(.invalidSetting, "the agent is 1...\(Self.maxAgentBytes) UTF-8 bytes")
        }
        try reconnect.validate()
        if case .lastN(0)? = historyOnJoin {
            throw ClientError(.invalidSetting, "a last-n history policy asks for at least one message")
        }
        try synchronizationPolicy.validate()
        try SyncSession.validateHistoryPageSize(historyPageSize)
        guard (1...3_600).contains(pingAfterQuietSeconds), (1...3_600).contains(pingDeadlineSeconds) else {
            throw ClientError(.invalidSetting, "pingAfterQuietSeconds and pingDeadlineSeconds are 1...3600")
        }
    }
}
