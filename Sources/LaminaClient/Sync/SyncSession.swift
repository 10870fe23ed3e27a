import Foundation
import LaminaModel
import LaminaWire

/// The phase of one sync session (one stream): HELLO → (RESUME_SESSION, or NONCE_REQUEST →
/// identity token → AUTHENTICATE) → SYNC from the stored cursor → flush the outbox → live.
public enum SyncSessionState: Hashable, Sendable {
    case negotiating
    case resuming
    case requestingNonce
    case awaitingIdentityToken
    case authenticating
    case syncing
    case live
    case ended
}

/// Something the sync engine reports to the client.
public enum SyncEvent: Hashable, Sendable {
    case state(SyncSessionState)
    /// The node authenticated the session for this identity.
    case authenticated(Identity)
    /// Another participant's typing indicator.
    case typing(TypingChanged)
    /// A followed user's presence, or the user's own (SPEC §6.6), as the node sent it.
    case presence(PresenceChanged)
    /// The engine will reconnect after `delay` (attempt counts from 0).
    case reconnecting(attempt: Int, delay: Duration)
    /// The engine stopped for good (authentication or sync refused, or the store failed).
    case failed(ClientError)
    /// The node ended or refused the session (expired or revoked): the engine authenticates
    /// anew, asking the app's identity token provider for a token (the docs' challenge).
    case sessionExpired
    /// The node refused a command for good; it left the outbox (see `LocalStore.outboxFailures()`).
    case commandFailed(OutboxFailure)
    /// A snapshot's first sync finished (SPEC §6.3): each of its `conversations` holds what
    /// the `SynchronizationPolicy` says (`failed` of their fetches were refused or cut short).
    case snapshotSynced(conversations: Int, failed: Int)
}

/// How a session ended.
public enum SyncSessionEnd: Hashable, Sendable {
    /// The stream ended (or was closed); reconnect with backoff.
    case closed
    /// The node ended or refused the session: reconnect at once and authenticate anew.
    case sessionExpired
    /// The node refused the identity token, or the app could not provide one.
    case authenticationFailed(ClientError)
    /// The node closed the stream with a fatal error, or broke the protocol.
    case fatal(ClientError)
    /// The node refused the SYNC request itself: reconnecting would be refused the same way.
    case syncRefused(ClientError)
    /// The session was ended for good on the node (END_SESSION, SPEC §5.8): do not reconnect.
    case signedOut
    /// The node belongs to another cluster than the client's (WELCOME, SPEC §5.1): do not reconnect.
    case wrongCluster(ClientError)
}

/// One session over one `FrameChannel`: the client side of SPEC §5–§7. It applies the
/// node's changes to the store (idempotently, advancing the cursor in the same
/// transaction), sends the outbox in order and completes its entries from ACKs and ERRORs,
/// and sends delivery receipts for messages from others.
public actor SyncSession {
    /// The most outbox entries handed to the channel per store read.
    public static let flushBatch = 100
    /// How long to wait before retrying a transient ERROR without `retryAfterMilliseconds`.
    public static let defaultRetryDelay: Duration = .seconds(1)

    let store: LocalStore
    let channel: any FrameChannel
    let identityToken: IdentityTokenProvider
    let environment: SyncEnvironment
    let agent: String
    /// The cluster the node must belong to (nil: any).
    let cluster: String?
    let historyOnJoin: HistoryPolicy?
    let synchronization: SynchronizationPolicy
    /// Messages per FETCH_HISTORY page when complete history is fetched forwards.
    let historyPageSize: UInt32
    let onEvent: @Sendable (SyncEvent) -> Void

    public private(set) var state: SyncSessionState = .negotiating
    public private(set) var features: FeatureSet = []
    public private(set) var identity: Identity?
    /// Whether the session got as far as live (the engine then resets its backoff).
    public private(set) var reachedLive = false
    /// The status the app chose (``SyncEngine/setPresence(_:)``), sent again as the session goes live.
    var chosenPresence: PresenceStatus?
    private var cursor: UInt64 = 0
    /// The node this session talks to (WELCOME): the cursor counts in its feed.
    private var node = NodeID(0)
    /// Every request sent and not answered yet (SYNC, commands, history, awaited requests).
    var pending = PendingRequests()
    var flushing = false
    /// Closed when the session ends: see `SendGate`.
    let sendGate = SendGate()
    var flushAgain = false
    /// The largest frame payload the node accepts (WELCOME; until then the protocol's).
    public private(set) var maxFrameSize = WireLimits.protocolMaxFrameSize
    /// FETCH_HISTORY (and SEARCH_MESSAGES) frames registered and not written yet, in
    /// `pending.historyOrder`'s order; one task at a time writes them (`sendRegisteredHistory`),
    /// so the wire order is that order.
    var historyUnsent: [Frame] = []
    var sendingHistory = false
    /// The snapshot being received and the fetches that fill its conversations.
    var snapshot = SnapshotSync()
    /// The one pending retry of the outbox after a transient ERROR (cancelled when the session ends).
    var retryTask: Task<Void, Never>?
    /// FETCH_CHANNEL requests in flight: their channel and the cursor they read after (SPEC §6.8).
    var channelFetches: [UUID: ChannelFetch] = [:]

    public init(
        store: LocalStore, channel: any FrameChannel, identityToken: @escaping IdentityTokenProvider,
        environment: SyncEnvironment = .live, agent: String = "lamina-swift/1", historyOnJoin: HistoryPolicy? = nil,
        cluster: String? = nil, synchronization: SynchronizationPolicy = .feedReplay,
        historyPageSize: Int = SyncSession.defaultHistoryPageSize,
        onEvent: @escaping @Sendable (SyncEvent) -> Void = { _ in }
    ) {
        self.synchronization = synchronization
        self.historyPageSize = UInt32(
            clamping: Swift.max(1, Swift.min(historyPageSize, Int(FetchHistory.maxPageCount))))
        self.store = store
        self.channel = channel
        self.identityToken = identityToken
        self.environment = environment
        self.agent = agent
        self.historyOnJoin = historyOnJoin
        self.cluster = cluster
        self.onEvent = onEvent
    }

    private func enter(_ next: SyncSessionState) {
        state = next
        onEvent(.state(next))
    }

    /// Runs the session until the stream ends. Never throws: how it ended is the result.
    public func run() async -> SyncSessionEnd {
        let end = await runSession()
        sendGate.close()
        retryTask?.cancel()
        retryTask = nil
        enter(.ended)
        await failPendingRequests()
        return end
    }

    private func runSession() async -> SyncSessionEnd {
        do {
            try await handshake()
        } catch let end as SessionEnding {
            return end.end
        } catch let error as ClientError {
            return error.code == .disconnected ? .closed : .fatal(error)
        } catch {
            return .fatal(ClientError(.protocolError, String(describing: error)))
        }
        do {
            enter(.syncing)
            cursor = try await store.syncCursorAsync(on: node)
            snapshot = SnapshotSync(cursorBefore: cursor)
            let syncID = UUID()
            pending.register(sync: syncID)
            try await channel.send(.sync(SyncRequest(requestID: syncID, cursor: cursor)))
            while let frame = try await channel.receive() {
                if let end = try await handle(frame) { return end }
            }
            return .closed
        } catch let error as ClientError {
            return error.code == .disconnected ? .closed : .fatal(error)
        } catch {
            return .fatal(ClientError(.protocolError, String(describing: error)))
        }
    }

    private struct SessionEnding: Error { var end: SyncSessionEnd }

    /// The next frame of the handshake; PINGs are answered on the way.
    private func handshakeFrame() async throws -> Frame {
        while true {
            guard let frame = try await channel.receive() else {
                throw ClientError(.disconnected, "the stream ended during the handshake")
            }
            if case .ping(let p) = frame {
                try await channel.send(.pong(p))
                continue
            }
            if case .error(let e) = frame, e.isFatal, !Self.sessionCodes.contains(e.code) {
                throw SessionEnding(
                    end: Self.isAuthenticationCode(e.code)
                        ? .authenticationFailed(Self.clientError(e, .authenticationFailed))
                        : .fatal(Self.clientError(e, .protocolError)))
            }
            return frame
        }
    }

    static let sessionCodes: Set<WireError.Code> = [.sessionExpired, .sessionRevoked]

    static func isAuthenticationCode(_ code: WireError.Code) -> Bool { code.wireValue / 100 == 2 }

    static func clientError(_ e: ErrorFrame, _ code: ClientError.Code) -> ClientError {
        ClientError(code, "\(e.code.name): \(e.reason)")
    }

    private func handshake() async throws {
        enter(.negotiating)
        let offered: FeatureSet =
            synchronization == .feedReplay
            ? FeatureSet.all.union(.presence) : FeatureSet.all.union([.snapshots, .presence])
        try await channel.send(.hello(Hello(features: offered, agent: agent)))
        guard case .welcome(let welcome) = try await handshakeFrame() else {
            throw SessionEnding(end: .fatal(ClientError(.protocolError, "the node did not answer HELLO with WELCOME")))
        }
        if let cluster, welcome.cluster != cluster {
            throw SessionEnding(
                end: .wrongCluster(
                    ClientError(
                        .wrongCluster,
                        "node \(String(welcome.nodeID.rawValue, radix: 16)) belongs to cluster \"\(welcome.cluster)\", this client is configured for \"\(cluster)\""
                    )))
        }
        features = welcome.features
        node = welcome.nodeID
        maxFrameSize = min(Int(welcome.maxFrameSize), WireLimits.protocolMaxFrameSize)
        let deviceID = try await store.deviceIDAsync()
        var authenticated: Authenticated?
        if let token = try await store.sessionTokenAsync() {
            enter(.resuming)
            let id = UUID()
            try await channel.send(
                .resumeSession(ResumeSession(requestID: id, sessionToken: token, deviceID: deviceID)))
            switch try await handshakeFrame() {
            case .authenticated(let a) where a.requestID == id:
                authenticated = a
            case .error(let e) where Self.sessionCodes.contains(e.code) || Self.isAuthenticationCode(e.code):
                try await store.setSessionTokenAsync(nil)  // authenticate anew below
                onEvent(.sessionExpired)
            default:
                throw SessionEnding(
                    end: .fatal(
                        ClientError(
                            .protocolError,
                            "the node did not answer RESUME_SESSION with AUTHENTICATED or a session error")))
            }
        }
        if authenticated == nil {
            enter(.requestingNonce)
            let nonceID = UUID()
            try await channel.send(.nonceRequest(NonceRequest(requestID: nonceID)))
            var nonce: Nonce?
            while nonce == nil {
                switch try await handshakeFrame() {
                case .nonce(let n): nonce = n  // ours, or one the node sent unasked after a session error
                case .error(let e) where e.requestID == nonceID:
                    throw SessionEnding(end: .authenticationFailed(Self.clientError(e, .authenticationFailed)))
                case .error(let e) where Self.sessionCodes.contains(e.code): continue
                default:
                    throw SessionEnding(
                        end: .fatal(ClientError(.protocolError, "the node did not answer NONCE_REQUEST with NONCE")))
                }
            }
            enter(.awaitingIdentityToken)
            guard let token = try? await identityToken(nonce!.nonce) else {
                throw SessionEnding(
                    end: .authenticationFailed(ClientError(.authenticationFailed, "the app provided no identity token"))
                )
            }
            enter(.authenticating)
            let authID = UUID()
            try await channel.send(
                .authenticate(Authenticate(requestID: authID, identityToken: token, deviceID: deviceID)))
            while authenticated == nil {
                switch try await handshakeFrame() {
                case .authenticated(let a) where a.requestID == authID: authenticated = a
                case .nonce: continue  // an extra unasked nonce
                case .error(let e) where e.requestID == authID || e.requestID == nil:
                    throw SessionEnding(end: .authenticationFailed(Self.clientError(e, .authenticationFailed)))
                default:
                    throw SessionEnding(
                        end: .fatal(
                            ClientError(.protocolError, "the node did not answer AUTHENTICATE with AUTHENTICATED")))
                }
            }
        }
        let a = authenticated!
        guard a.identity.userID == store.localUser else {
            throw SessionEnding(
                end: .authenticationFailed(
                    ClientError(
                        .storeMismatch,
                        "the node authenticated \(a.identity.userID), but this client's store belongs to \(store.localUser)"
                    )))
        }
        try await store.setSessionTokenAsync(a.sessionToken)
        identity = a.identity
        onEvent(.authenticated(a.identity))
    }

    /// Handles one frame of a synced session; returns how the session ends, if it does.
    private func handle(_ frame: Frame) async throws -> SyncSessionEnd? {
        switch frame {
        case .change(let change):
            try await apply([change])
        case .changeBatch(let batch):
            try await apply(batch.changes)
        case .ack(let ack):
            return try await acknowledged(ack, frame)
        case .error(let e):
            return try await refused(e, frame)
        case .ping(let p):
            try await channel.send(.pong(p))
        case .pong, .nonce, .welcome, .authenticated:
            break  // late or unasked handshake answers change nothing once synced
        default:
            try? await channel.send(
                .error(
                    ErrorFrame(
                        code: .unexpectedFrame, reason: "a \(frame.type.name) frame is not sent to clients",
                        isFatal: true)))
            return .fatal(ClientError(.protocolError, "the node sent a \(frame.type.name) frame"))
        }
        return nil
    }

    /// An ACK: completes the pending request it answers.
    private func acknowledged(_ ack: Ack, _ frame: Frame) async throws -> SyncSessionEnd? {
        if channelFetches[ack.requestID] != nil {
            try await channelFetchAnswered(ack.requestID, cursor: ack.cursor)
            return nil
        }
        switch pending[ack.requestID] {
        case .awaited(let request)?:
            if request.frame == .endSession { try await store.setSessionTokenAsync(nil) }
            await finishAwaited(ack.requestID, .success(()))
            if request.frame == .endSession { return .signedOut }
        case .history?:
            if try await finishHistory(ack.requestID, .success(())) != nil { try await sendRegisteredHistory() }
            try await continueSnapshot()
        case .sync?:
            pending.remove(ack.requestID)
            if let c = ack.cursor, c > cursor {
                try await store.setSyncCursorAsync(c)
                cursor = c
            }
            reachedLive = true
            enter(.live)
            try await flushOutbox()
            try await registerStoredPushToken()
            try await restorePresence()
            try await startSnapshotFetches(acked: ack.cursor ?? 0)
            try await fetchChannelsBehind()
        case .command?, nil:
            if let completion = ChangeDecoder.completion(frame) { try await complete(completion) }
        }
        return nil
    }

    /// An ERROR: fails the pending request it names, or ends the session.
    private func refused(_ e: ErrorFrame, _ frame: Frame) async throws -> SyncSessionEnd? {
        if let id = e.requestID, channelFetches.removeValue(forKey: id) != nil, !e.isFatal { return nil }
        switch e.requestID.flatMap({ pending[$0] }) {
        case .awaited?:
            await finishAwaited(e.requestID!, .failure(ClientError(ClientError.Code(rawValue: e.code.name), e.reason)))
            return e.isFatal ? .fatal(Self.clientError(e, .protocolError)) : nil
        case .history?:
            _ = try await finishHistory(
                e.requestID!, .failure(ClientError(ClientError.Code(rawValue: e.code.name), e.reason)))
            try await continueSnapshot()
            return nil
        case .sync? where e.code != .authenticationRequired && !Self.sessionCodes.contains(e.code):
            return .syncRefused(Self.clientError(e, .syncRefused))
        case .sync?, .command?, nil:
            break
        }
        if e.code == .authenticationRequired {
            // The node lost the session: the command goes back to the outbox, and the
            // session starts again with a fresh authentication.
            if let id = e.requestID, pending[command: id] != nil {
                pending[command: id] = nil
                try await store.requeueAsync(id)
            }
            try await store.setSessionTokenAsync(nil)
            onEvent(.sessionExpired)
            return .sessionExpired
        }
        if let completion = ChangeDecoder.completion(frame) { try await complete(completion) }
        if e.isFatal || e.requestID == nil {
            if Self.sessionCodes.contains(e.code) {
                try await store.setSessionTokenAsync(nil)
                onEvent(.sessionExpired)
                return .sessionExpired
            }
            if e.isFatal { return .fatal(Self.clientError(e, .protocolError)) }
        }
        return nil
    }

    private func apply(_ entries: [Change]) async throws {
        let decoded = ChangeDecoder.decode(
            entries, after: cursor, localUser: store.localUser, receivedAt: environment.now())
        for t in decoded.typing { onEvent(.typing(t)) }
        for p in decoded.presence { onEvent(.presence(p)) }
        noteHistory(entries)
        if state == .syncing {
            snapshot.received(decoded.unsequencedConversations)
            if decoded.cursor != nil || decoded.duplicatesSkipped > 0 { snapshot.sawFeedEntries = true }
        }
        let receipts = try await receiptEntries(for: decoded)
        let joined = try await newConversations(in: decoded).filter { !snapshot.contains($0) }
        if !decoded.changes.isEmpty || decoded.cursor != nil || !receipts.isEmpty {
            try await applyTolerant(decoded.changes, cursor: decoded.cursor, outbox: receipts)
            if let c = decoded.cursor { cursor = c }
        }
        if !receipts.isEmpty, state == .live { try await flushOutbox() }
        for id in joined { try await requestHistory(of: id) }
        if state == .live { try await fetchChannels(after: entries) }
    }

    /// Delivery receipts for the messages from others in `decoded`, only where the
    /// conversation wants them (the node would ignore the rest); queued in the transaction
    /// that stores the messages, so a stored message always has its receipt on the way.
    private func receiptEntries(for decoded: DecodedChanges) async throws -> [OutboxEntry] {
        guard features.contains(.deliveryReceipts), !decoded.receivedFromOthers.isEmpty else { return [] }
        var receiptsOn: [ConversationID: Bool] = [:]
        for case .conversation(let c) in decoded.changes { receiptsOn[c.id] = c.deliveryReceiptsEnabled }
        var received: [Message] = []
        for m in decoded.receivedFromOthers {
            if receiptsOn[m.conversationID] == nil {
                receiptsOn[m.conversationID] =
                    try await store.conversationAsync(m.conversationID)?.conversation.deliveryReceiptsEnabled ?? false
            }
            if receiptsOn[m.conversationID] == true { received.append(m) }
        }
        let now = environment.now()
        var entries: [OutboxEntry] = []
        for var receipt in ChangeDecoder.deliveryReceipts(for: received) {
            // One receipt per conversation waits in the outbox: the new one reaches at least as
            // far as those not sent yet, and replaces them (a device catching up sends one
            // receipt per conversation, not one per batch).
            for pending in try await store.pendingEntriesAsync(
                kind: OutboxCommandKind.deliveryReceipt.rawValue, objectID: receipt.conversationID.uuid)
            {
                if case .deliveryReceipt(let earlier) = try OutboxEncoder.frame(for: pending) {
                    receipt.upTo = max(receipt.upTo, earlier.upTo)
                }
            }
            var entry = try OutboxEncoder.entry(for: .deliveryReceipt(receipt), createdAt: now)
            entry.replacesPending = true
            entries.append(entry)
        }
        return entries
    }

    /// Applies in one transaction; when a change names something this device does not hold
    /// (e.g. a conversation deleted here), applies the others one by one, skipping it.
    /// Through GRDB's async API: the session suspends while the writer runs the transaction.
    func applyTolerant(
        _ changes: [RemoteChange], cursor: UInt64?, outbox: [OutboxEntry] = [], acknowledged: UUID? = nil
    ) async throws {
        do {
            try await store.applyAsync(changes, cursor: cursor, outbox: outbox, acknowledged: acknowledged)
            return
        } catch {
            guard error.code == .notFound else { throw error }
        }
        for change in changes {
            do { try await store.applyAsync([change]) } catch { if error.code != .notFound { throw error } }
        }
        if cursor != nil || !outbox.isEmpty || acknowledged != nil {
            try await store.applyAsync([], cursor: cursor, outbox: outbox, acknowledged: acknowledged)
        }
    }

    /// Sends a typing indicator when live and the node relays them; dropped otherwise
    /// (typing is never queued).
    public func sendTyping(_ typing: Typing) async {
        guard state == .live, features.contains(.typingIndicators) else { return }
        try? await channel.send(.typing(typing))
    }
}
