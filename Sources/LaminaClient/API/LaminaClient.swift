import Foundation
import LaminaModel
import LaminaWire

/// The SDK's entry point for one user on one device: the local store, the app-facing
/// operations (conversations, messages, receipts, metadata, typing) and the sync engine
/// that carries them to the node. Every operation validates, writes the store (and the
/// outbox, in the same transaction) and returns at once; the engine sends the outbox in
/// order when connected, and again, under the same ids, after a reconnect.
public final class LaminaClient: @unchecked Sendable {
    public let configuration: LaminaConfiguration
    /// The user this client (and its local store) belongs to.
    public let user: UserID
    /// Everything the app reads comes from here.
    public let store: LocalStore
    let environment: SyncEnvironment
    /// Rich content: uploads, downloads, the shared connection (`LaminaClient+Content`).
    let transfers: ContentTransfers
    /// This client's rich content before it is sent (in its data directory, beside the store):
    /// pass it to `MessagePart.with(mimeType:data:staging:)`.
    public let staging: ContentStaging

    private let lock = NSLock()
    private var engine: SyncEngine?
    private var engineTask: Task<Void, Never>?
    private var typingTask: Task<Void, Never>?
    private var indicatorTask: Task<Void, Never>?
    /// The one task that tells the engine the outbox changed, woken by `outboxSignal`: many
    /// sends in a row coalesce into one wake-up (no task per send).
    private var outboxTask: Task<Void, Never>?
    private let outboxSignal: AsyncStream<Void>.Continuation
    private var identity: Identity?
    private var typingScheduler = TypingScheduler()
    private let typingSignal: AsyncStream<Void>.Continuation
    private let typingSignals: AsyncStream<Void>
    /// Others' typing state (their indicators, ended when not refreshed for 6 s).
    private var indicators = TypingIndicators()
    /// The presence of followed users and of the user, as the node last sent it (memory only).
    private var presences: [UserID: Presence] = [:]
    /// The status the app chose last (sent by every session as it goes live).
    private var chosenPresence: PresenceStatus?
    private let indicatorSignal: AsyncStream<Void>.Continuation
    private let eventContinuation: AsyncStream<SyncEvent>.Continuation
    /// The sync engine's events (states, authentication, others' typing, reconnects,
    /// failures) for as long as the client lives. One consumer.
    public let syncEvents: AsyncStream<SyncEvent>

    /// Opens (creating if needed) the local store of `user` under the configuration's data
    /// directory. Nothing connects until `connect`.
    public init(configuration: LaminaConfiguration, user: UserID, environment: SyncEnvironment = .live)
        throws(ClientError)
    {
        try configuration.validate()
        self.configuration = configuration
        self.user = user
        self.environment = environment
        self.store = try LocalStore(
            location: StoreLocation(dataDirectory: configuration.dataDirectory, user: user),
            configuration: configuration.store)
        (typingSignals, typingSignal) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let indicatorSignals: AsyncStream<Void>
        (indicatorSignals, indicatorSignal) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        (syncEvents, eventContinuation) = AsyncStream<SyncEvent>.makeStream(
            bufferingPolicy: .bufferingOldest(SyncEngine.eventBufferLimit))
        let outboxSignals: AsyncStream<Void>
        (outboxSignals, outboxSignal) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        staging = ContentStaging(
            directory: configuration.dataDirectory.appendingPathComponent(
                "staging-\(user.rawValue.utf8.map { String(format: "%02x", $0) }.joined())", isDirectory: true))
        transfers = try ContentTransfers(
            store: store, environment: environment,
            outboxChanged: { [outboxSignal] in outboxSignal.yield() },
            messageFailed: { [continuation = eventContinuation] in continuation.yield(.commandFailed($0)) })
        indicatorTask = Task { [weak self, environment, eventContinuation] in
            // Holds the client only while it looks at the indicators, never across a wait.
            var signals = indicatorSignals.makeAsyncIterator()
            while !Task.isCancelled {
                guard let next = self.map({ $0.nextIndicatorDeadline() }) else { return }
                if let deadline = next {
                    let wait = max(0, deadline.millisecondsSince1970 - environment.now().millisecondsSince1970)
                    do { try await environment.sleep(.milliseconds(wait)) } catch { return }
                    for change in self?.expireIndicators() ?? [] { eventContinuation.yield(.typing(change)) }
                } else if await signals.next() == nil {
                    return
                }
            }
        }
        outboxTask = Task { [weak self] in
            // One wake-up at a time; sends made meanwhile are one buffered signal.
            for await _ in outboxSignals {
                guard let engine = self?.currentEngine else { continue }
                await engine.outboxDidChange()
            }
        }
    }

    deinit {
        transfers.close()
        outboxTask?.cancel()
        outboxSignal.finish()
        engineTask?.cancel()
        typingTask?.cancel()
        typingSignal.finish()
        indicatorTask?.cancel()
        indicatorSignal.finish()
        eventContinuation.finish()
    }

    // MARK: connection

    /// Starts syncing over channels from `connector` (the network integration's TLS +
    /// HTTP/2 stream, or a test's in-memory node). `identityToken` is asked for a token
    /// whenever the node wants one: first authentication and session expiry.
    public func connect(
        using connector: @escaping FrameChannelConnector, identityToken: @escaping IdentityTokenProvider
    ) async throws(ClientError) {
        let engine = try SyncEngine(
            store: store, connector: connector, identityToken: identityToken,
            policy: configuration.reconnect, environment: environment, agent: configuration.agent,
            historyOnJoin: configuration.joinHistoryPolicy, cluster: configuration.cluster,
            synchronization: configuration.synchronizationPolicy,
            historyPageSize: configuration.historyPageSize)
        let previous: SyncEngine? = lock.withLock {
            defer { self.engine = engine }
            return self.engine
        }
        await previous?.stop()
        if let chosen = lock.withLock({ chosenPresence }) { try? await engine.setPresence(chosen) }
        let forward = Task { [weak self, events = engine.events, continuation = eventContinuation] in
            for await event in events {
                switch event {
                case .authenticated(let identity):
                    self?.lock.withLock { self?.identity = identity }
                case .typing(let typing):
                    guard let self, let change = self.receiveIndicator(typing) else { continue }
                    continuation.yield(.typing(change))
                    continue
                case .presence(let update):
                    // Reported once per change of what this device knows.
                    guard let self, self.receivePresence(update) else { continue }
                default:
                    break
                }
                continuation.yield(event)
            }
        }
        let typing = Task { [weak self] in
            guard let self else { return }
            await self.runTypingRefreshes()
        }
        lock.withLock {
            engineTask?.cancel()
            typingTask?.cancel()
            engineTask = forward
            typingTask = typing
        }
        await engine.start()
    }

    /// Stops syncing. Queued commands stay in the outbox for the next `connect`.
    public func disconnect() async {
        transfers.stop()
        let engine: SyncEngine? = lock.withLock {
            defer { self.engine = nil }
            return self.engine
        }
        await engine?.stop()
    }

    /// Disconnects and closes the local store (queued commands stay on disk for the next
    /// client of this user). The client is unusable afterwards.
    public func close() async throws(ClientError) {
        await disconnect()
        transfers.close()
        let tasks = lock.withLock { [engineTask, typingTask, indicatorTask, outboxTask] in
            [engineTask, typingTask, indicatorTask, outboxTask]
        }
        for task in tasks { task?.cancel() }
        outboxSignal.finish()
        typingSignal.finish()
        indicatorSignal.finish()
        try store.close()
    }

    /// Sets this device's push token on the node (APNs with topic and environment, FCM, or
    /// the operator's gateway), replacing the one it had; nil removes it. While the device has
    /// no live session, the node pushes its new messages there; signing out removes the token.
    /// The token is kept in the local store and registered again by every session as it goes
    /// live (so one set while offline, or lost by the node, reaches it). When live, returns once
    /// the node has it: a token of the wrong size, or of a provider the node does not deliver
    /// to, is refused with `invalid-push-token` (and not kept). When not live, returns once it
    /// is kept (a token of the wrong size is refused at once); when the stream ends before the
    /// node answers, it is kept and the error thrown.
    public func setPushToken(_ token: PushToken?) async throws(ClientError) {
        if let token {
            do { try token.validate() } catch {
                throw ClientError(ClientError.Code(rawValue: error.code.rawValue), error.reason)
            }
        }
        var failure: ClientError?
        if let engine = currentEngine {
            do throws(ClientError) {
                try await engine.registerPushToken(token)
            } catch {
                // Refused: not kept. Not live (or the stream ended before the answer): kept
                // below and registered by the next session.
                if error.code == .invalidPushToken { throw error }
                if error.code != .notConnected { failure = error }
            }
        }
        try store.setDevicePushToken(DevicePushToken(token: token))
        if let failure { throw failure }
    }

    /// Signs the user out: ends the session on the node (its token is refused from then on,
    /// SPEC §5.8), then disconnects, closes the store and deletes all of this user's local
    /// data. The client is unusable afterwards. Needs a live session: throws `.notConnected`
    /// otherwise (and when the node cannot be reached before it answers), keeping the data,
    /// so the app can try again once connected.
    public func deauthenticate() async throws(ClientError) {
        guard let engine = currentEngine else {
            throw ClientError(.notConnected, "connect first: signing out ends the session on the node")
        }
        try await engine.endSession()
        await disconnect()
        try store.closeAndWipe()
        lock.withLock { identity = nil }
    }

    /// The identity the node authenticated, once it has.
    public var authenticatedUser: Identity? { lock.withLock { identity } }

    /// The running sync engine, if connected.
    var currentEngine: SyncEngine? { lock.withLock { engine } }

    /// Tells a running engine that the outbox has new entries.
    func outboxDidChange() {
        outboxSignal.yield()
    }

    // MARK: typing

    /// The local user's typing state in a conversation. `started` is re-sent every 2.5 s
    /// until `paused` or `finished` (SPEC §6.1). Indicators are not queued while offline.
    public func typing(_ state: TypingState, in conversation: ConversationID) async throws(ClientError) {
        let id = try store.currentIdentifier(of: conversation)
        guard try store.conversation(id) != nil else {
            throw ClientError(.notFound, "conversation \(conversation) is not in the local store")
        }
        let now = environment.now()
        let frames = try scheduleTyping(state, in: id, now: now)
        typingSignal.yield()
        let engine = lock.withLock { self.engine }
        for frame in frames { await engine?.send(frame) }
    }

    private func scheduleTyping(_ state: TypingState, in id: ConversationID, now: Timestamp) throws(ClientError)
        -> [Typing]
    {
        lock.lock()
        defer { lock.unlock() }
        return try typingScheduler.set(state, in: id, now: now)
    }

    private func runTypingRefreshes() async {
        var signals = typingSignals.makeAsyncIterator()
        while !Task.isCancelled {
            let deadline = lock.withLock { typingScheduler.nextDeadline }
            if let deadline {
                let wait = max(0, deadline.millisecondsSince1970 - environment.now().millisecondsSince1970)
                do { try await environment.sleep(.milliseconds(wait)) } catch { return }
            } else if await signals.next() == nil {
                return
            }
            let now = environment.now()
            let due = lock.withLock { typingScheduler.due(now: now) }
            let engine = lock.withLock { self.engine }
            for frame in due { await engine?.send(frame) }
        }
    }

    /// Who else is typing (or paused) in a conversation: the indicators received, each ended
    /// by `finished` or when not refreshed for 6 s (SPEC §6.1); `syncEvents` reports each
    /// change of this state once.
    public func typingParticipants(in conversation: ConversationID) -> [UserID: TypingState] {
        lock.withLock { indicators.states(in: conversation) }
    }

    /// Records another participant's indicator; returns the change to report, if any.
    private func receiveIndicator(_ typing: TypingChanged) -> TypingChanged? {
        let now = environment.now()
        let change = lock.withLock { indicators.receive(typing, now: now) }
        if change != nil { indicatorSignal.yield() }
        return change
    }

    private func nextIndicatorDeadline() -> Timestamp? { lock.withLock { indicators.nextDeadline } }

    /// Ends others' indicators not refreshed in time; returns the `finished` changes to report.
    /// (Every indicator ends 6 s after its last refresh, so a new deadline is never earlier
    /// than the one waited for: the expiry task only needs waking when none was running.)
    private func expireIndicators() -> [TypingChanged] {
        let now = environment.now()
        return lock.withLock { indicators.expire(now: now) }
    }

    // MARK: presence

    /// Chooses the user's status for all their devices (SPEC §6.6): `available`, `away`,
    /// `busy`, or `invisible` (others then see `offline`). Kept and sent again by every session
    /// as it goes live. Live: returns once the node applied it; not live: throws
    /// `.notConnected` (and the status still goes out with the next session).
    public func setPresence(_ status: PresenceStatus) async throws(ClientError) {
        guard status.isChoosable else {
            throw ClientError(.invalidArgument, "choose invisible to appear offline; offline is the node's to decide")
        }
        lock.withLock { chosenPresence = status }
        guard let engine = currentEngine else {
            throw ClientError(.notConnected, "no sync session is running")
        }
        try await engine.setPresence(status)
    }

    /// `user`'s presence as the node last told this device: users who share a conversation
    /// with this user, and the user themself (`invisible` when they chose it); nil when none
    /// arrived. Each change is reported once on ``syncEvents`` as `.presence`.
    public func presence(of user: UserID) -> Presence? { lock.withLock { presences[user] } }

    /// Records a presence update; false when it changes nothing this device knew.
    private func receivePresence(_ update: PresenceChanged) -> Bool {
        lock.withLock {
            guard presences[update.user] != update.presence else { return false }
            presences[update.user] = update.presence
            return true
        }
    }

    // MARK: reading (the local store)

    public func conversation(_ id: ConversationID) throws(ClientError) -> StoredConversation? {
        try store.conversation(id)
    }
    public func message(_ id: MessageID) throws(ClientError) -> StoredMessage? { try store.message(id) }
    /// A participant's identity (display name, avatar URL, names, email, phone, metadata) as
    /// the app's backend set it; its changes arrive as object changes of `.identity`.
    /// Its `UserIdentity.presence` is the user's presence as the node last told this device
    /// (with when they were last seen, also across a node's restart).
    public func identity(of user: UserID) throws(ClientError) -> UserIdentity? {
        try store.identity(of: user).map(withPresence)
    }
    /// The users this user blocks (from any of their devices or the app's backend), as the node
    /// last told this device: their messages and typing never reach the user.
    public var blockedUsers: Set<UserID> { get throws(ClientError) { try store.blockedUsers() } }

    /// Blocks `user` (the Server API's block list): their later messages and typing never reach
    /// this user's devices, and the user's other devices learn it. Needs a live session; returns
    /// once the node acknowledged it (``blockedUsers`` follows as the change arrives in the feed).
    public func block(_ user: UserID) async throws(ClientError) { try await setBlocked(user, blocking: true) }

    /// Unblocks `user`: their messages reach this user again. Needs a live session.
    public func unblock(_ user: UserID) async throws(ClientError) { try await setBlocked(user, blocking: false) }

    /// Follows `user` (SPEC §6.7): their identity and presence reach this user's devices
    /// without a shared conversation, and the user's other devices learn it. Needs a live
    /// session; returns once the node acknowledged it (``followedUsers`` and the identity follow
    /// as the changes arrive in the feed).
    public func follow(_ user: UserID) async throws(ClientError) { try await setFollowing(user, following: true) }

    /// Unfollows `user`: their identity and presence stop reaching this user unless they share
    /// a conversation. Needs a live session.
    public func unfollow(_ user: UserID) async throws(ClientError) { try await setFollowing(user, following: false) }

    /// The users this user follows explicitly (from any of their devices or the app's backend),
    /// as the node last told this device.
    public var followedUsers: Set<UserID> { get throws(ClientError) { try store.followedUsers() } }

    /// Every identity this device holds: the user's, and those of users sharing a conversation
    /// with them or followed by them (SPEC §6.4, §6.7), by user id.
    /// Each with its `UserIdentity.presence` as the node last told this device.
    public func identities() throws(ClientError) -> [UserIdentity] { try store.identities().map(withPresence) }

    private func withPresence(_ identity: UserIdentity) -> UserIdentity {
        var shown = identity
        shown.presence = presence(of: identity.userID)
        return shown
    }

    private func setFollowing(_ user: UserID, following: Bool) async throws(ClientError) {
        guard let engine = currentEngine else { throw ClientError(.notConnected, "no sync session is running") }
        try await engine.setFollowing(user, following: following)
    }

    private func setBlocked(_ user: UserID, blocking: Bool) async throws(ClientError) {
        guard let engine = currentEngine else { throw ClientError(.notConnected, "no sync session is running") }
        try await engine.setBlocked(user, blocking: blocking)
    }
    public func messages(in conversation: ConversationID) throws(ClientError) -> [StoredMessage] {
        try store.messages(in: conversation)
    }
    public func execute<Object>(_ query: Query<Object>) throws(ClientError) -> [Object] { try store.execute(query) }
    public func count<Object>(_ query: Query<Object>) throws(ClientError) -> Int { try store.count(query) }
    /// A live query controller over the local store (call `start()` on it), reporting updates
    /// only for changes of `updatableProperties` when given, and holding only the first n
    /// (n > 0) or last -n (n < 0) results when `paginationWindow` is given.
    public func queryController<Object>(
        for query: Query<Object>, updatableProperties: Set<String>? = nil,
        paginationWindow: Int? = nil
    ) throws(ClientError) -> QueryController<Object> {
        try QueryController(
            store: store, query: query, updatableProperties: updatableProperties, paginationWindow: paginationWindow)
    }
    /// Every batch of object changes committed from now on.
    public func changes() -> AsyncStream<[ObjectChange]> { store.changes() }
    public func addDelegate(_ delegate: any LaminaClientDelegate) { store.addDelegate(delegate) }
    public func removeDelegate(_ delegate: any LaminaClientDelegate) { store.removeDelegate(delegate) }
    public func waitForCreation(of id: ConversationID, timeout: Duration) async throws(ClientError)
        -> StoredConversation
    {
        try await store.waitForCreation(of: id, timeout: timeout)
    }
    public func waitForCreation(of id: MessageID, timeout: Duration) async throws(ClientError) -> StoredMessage {
        try await store.waitForCreation(of: id, timeout: timeout)
    }
}
