import Foundation
import LaminaModel
import LaminaWire
import NIOConcurrencyHelpers

/// Keeps one user's device in sync: opens a channel, runs a `SyncSession` on it, and when
/// the stream ends reconnects with the `ReconnectPolicy`'s backoff. A session that ends
/// because the node expired it reconnects at once and asks the app for a new identity
/// token. Authentication refused by the node stops the engine (`SyncEvent.failed`).
public actor SyncEngine {
    let store: LocalStore
    let connector: FrameChannelConnector
    let identityToken: IdentityTokenProvider
    let policy: ReconnectPolicy
    let environment: SyncEnvironment
    let agent: String
    /// The cluster the node must belong to (nil: any).
    let cluster: String?
    let historyOnJoin: HistoryPolicy?
    let synchronization: SynchronizationPolicy
    let historyPageSize: Int
    private let continuation: AsyncStream<SyncEvent>.Continuation
    /// Every state change, authentication, typing indicator, reconnect and failure.
    public nonisolated let events: AsyncStream<SyncEvent>

    private var task: Task<Void, Never>?
    /// The running session, held once: the outbox's wake-ups read it without passing through
    /// the engine (one executor hop per wake-up, not two).
    private nonisolated let liveSession = NIOLockedValueBox<SyncSession?>(nil)
    private var session: SyncSession? {
        get { liveSession.withLockedValue { $0 } }
        set { liveSession.withLockedValue { $0 = newValue } }
    }
    private var channel: (any FrameChannel)?
    /// The presence status the app chose last (sent by each session as it goes live).
    private var chosenPresence: PresenceStatus?

    /// The most events buffered for a slow reader of `events` (older ones are kept).
    public static let eventBufferLimit = 10_000

    public init(
        store: LocalStore, connector: @escaping FrameChannelConnector, identityToken: @escaping IdentityTokenProvider,
        policy: ReconnectPolicy = ReconnectPolicy(), environment: SyncEnvironment = .live,
        agent: String = "lamina-swift/1",
        historyOnJoin: HistoryPolicy? = nil, cluster: String? = nil,
        synchronization: SynchronizationPolicy = .feedReplay,
        historyPageSize: Int = SyncSession.defaultHistoryPageSize
    ) throws(ClientError) {
        try policy.validate()
        try synchronization.validate()
        try SyncSession.validateHistoryPageSize(historyPageSize)
        self.historyPageSize = historyPageSize
        self.synchronization = synchronization
        self.store = store
        self.connector = connector
        self.identityToken = identityToken
        self.policy = policy
        self.environment = environment
        self.agent = agent
        self.historyOnJoin = historyOnJoin
        self.cluster = cluster
        (events, continuation) = AsyncStream<SyncEvent>.makeStream(
            bufferingPolicy: .bufferingOldest(Self.eventBufferLimit))
    }

    deinit { continuation.finish() }

    /// `SyncEvent` under a name code that has its own `SyncEvent` can reach.
    public typealias Event = SyncEvent

    /// Starts connecting (no-op when running).
    public func start() {
        guard task == nil else { return }
        task = Task { await self.loop() }
    }

    /// Stops: closes the stream and ends the reconnect loop. In-flight commands go back to
    /// the outbox and are sent again, under the same ids, after the next `start`.
    public func stop() async {
        let running = task
        task = nil
        running?.cancel()
        await channel?.close()
        await running?.value
    }

    /// The outbox has new entries: send them now when live.
    public nonisolated func outboxDidChange() async {
        await liveSession.withLockedValue { $0 }?.flush()
    }

    /// Sends a typing indicator when live.
    public func send(_ typing: Typing) async {
        await session?.sendTyping(typing)
    }

    /// Fetches messages of a conversation from the node (see `SyncSession.fetchHistory`).
    /// Throws `.notConnected` between sessions.
    public func fetchHistory(of conversation: ConversationID, policy: HistoryPolicy, before: MessagePosition?)
        async throws(ClientError) -> [MessageID]
    {
        guard let session else { throw ClientError(.notConnected, "no sync session is running") }
        return try await session.fetchHistory(of: conversation, policy: policy, before: before)
    }

    /// Searches the user's messages on the node (see `SyncSession.searchMessages`). Throws
    /// `.notConnected` between sessions.
    public func searchMessages(_ text: String, in conversation: ConversationID?, limit: Int, offset: Int)
        async throws(ClientError) -> [MessageID]
    {
        guard let session else { throw ClientError(.notConnected, "no sync session is running") }
        return try await session.searchMessages(text, in: conversation, limit: limit, offset: offset)
    }

    /// Ends the session on the node for good (SPEC §5.8, see `SyncSession.endSession`); the
    /// engine then stops without reconnecting. Throws `.notConnected` unless a session is live.
    public func endSession() async throws(ClientError) {
        guard let session else { throw ClientError(.notConnected, "no sync session is running") }
        try await session.endSession()
    }

    /// Sets (or removes) this device's push token on the node (see `SyncSession.registerPushToken`).
    /// Throws `.notConnected` unless a session is live.
    public func registerPushToken(_ token: PushToken?) async throws(ClientError) {
        guard let session else { throw ClientError(.notConnected, "no sync session is running") }
        try await session.registerPushToken(token)
    }

    /// Chooses the user's presence status (SPEC §6.6): sent now when live (returning once the
    /// node applied it), and again by every later session as it goes live. Not live: kept for
    /// the next session, and `.notConnected` thrown.
    public func setPresence(_ status: PresenceStatus) async throws(ClientError) {
        guard status.isChoosable else {
            throw ClientError(.invalidArgument, "choose invisible to appear offline; offline is the node's to decide")
        }
        chosenPresence = status
        guard let session else { throw ClientError(.notConnected, "no sync session is running") }
        try await session.setPresence(status)
    }

    /// Sends a channel command (see `SyncSession.sendChannelCommand`). Throws `.notConnected`
    /// unless a session is live.
    public func sendChannelCommand(_ frame: Frame) async throws(ClientError) {
        guard let session else { throw ClientError(.notConnected, "no sync session is running") }
        try await session.sendChannelCommand(frame)
    }

    /// Follows or unfollows `user` on the node (see `SyncSession.setFollowing`). Throws
    /// `.notConnected` unless a session is live.
    public func setFollowing(_ user: UserID, following: Bool) async throws(ClientError) {
        guard let session else { throw ClientError(.notConnected, "no sync session is running") }
        try await session.setFollowing(user, following: following)
    }

    /// Blocks or unblocks `user` on the node (see `SyncSession.setBlocked`). Throws
    /// `.notConnected` unless a session is live.
    public func setBlocked(_ user: UserID, blocking: Bool) async throws(ClientError) {
        guard let session else { throw ClientError(.notConnected, "no sync session is running") }
        try await session.setBlocked(user, blocking: blocking)
    }

    /// The current session's state, nil between sessions.
    public var sessionState: SyncSessionState? {
        get async { await session?.state }
    }

    private func loop() async {
        var attempt = 0
        let emit: @Sendable (SyncEvent) -> Void = { [continuation] in continuation.yield($0) }
        while !Task.isCancelled {
            var end: SyncSessionEnd = .closed
            do {
                let channel = try await connector()
                self.channel = channel
                if Task.isCancelled {
                    await channel.close()
                    break
                }
                let session = SyncSession(
                    store: store, channel: channel, identityToken: identityToken,
                    environment: environment, agent: agent, historyOnJoin: historyOnJoin, cluster: cluster,
                    synchronization: synchronization, historyPageSize: historyPageSize, onEvent: emit)
                self.session = session
                await session.choosePresence(chosenPresence)
                end = await session.run()
                if await session.reachedLive { attempt = 0 }
                self.session = nil
                self.channel = nil
                await channel.close()
            } catch {
                end = .closed
            }
            do { try await store.requeueInFlightAsync() } catch {
                emit(.failed(error))
                break
            }
            if Task.isCancelled { break }
            switch end {
            case .authenticationFailed(let error), .syncRefused(let error), .wrongCluster(let error):
                emit(.failed(error))
                task = nil
                return
            case .sessionExpired:
                continue
            case .signedOut:
                task = nil
                return
            case .closed, .fatal:
                let delay = policy.delay(attempt: attempt, random: environment.random())
                emit(.reconnecting(attempt: attempt, delay: delay))
                attempt += 1
                do { try await environment.sleep(delay) } catch { break }
            }
        }
    }
}
