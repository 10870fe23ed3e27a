import Foundation
import LaminaModel
import LaminaWire
import NIOConcurrencyHelpers

/// One client session. The server calls these in stream order from the stream's event loop.
///
/// `receive` never blocks: frames go into the session's inbox and one task works through it
/// in order (storage calls are awaited there, off the event loop). Live changes for the
/// session pass through the same inbox, so they never overtake a SYNC backlog.
public final class NodeSession: Sendable {
    /// The most inputs (client frames and live changes) waiting in the inbox; beyond it the
    /// session is closed with `slow-consumer`.
    public static let maxPendingInputs = 4096
    /// The most commands of one session queued for group commit and not yet answered; the
    /// session reads its next input only when one of them completes.
    public static let maxCommandsInFlight = 128
    /// The retry delay an `overloaded` ERROR carries (the storage write queue was full).
    public static let overloadedRetryMilliseconds: UInt32 = 100

    enum Input: Sendable {
        case frame(Frame)
        case live([Change])
        case ephemeral(Change)
        /// Another node committed to this user's feed (or the listener reconnected): read
        /// the feed from what was sent (`State.queuedWake` says how far).
        case wake
    }

    enum Phase: Sendable { case awaitingHello, open, closed }

    /// Who the session is, once authenticated.
    struct Auth: Sendable {
        var user: UserID
        var device: String
        var tokenHash: [UInt8]
    }

    struct State: Sendable {
        var phase = Phase.awaitingHello
        var features = FeatureSet()
        var auth: Auth?
        /// Nonces issued on this stream that may still be open (bounded by
        /// ``NonceLimits/perStream``, counting the open ones: SPEC §5.2).
        var nonces: [String] = []
        /// Set once SYNC ran: live feed entries are sent from then on.
        var live = false
        /// The feed seq this session has sent every entry up to (SYNC's cursor, then live).
        var sentThrough: UInt64 = 0
        /// Inputs in the inbox, not yet taken by the worker.
        var pending = 0
        /// The worker is handling an input.
        var processing = false
        /// A `.wake` is queued, up to this head (`.max`: read whatever there is); more
        /// wakes before it is handled only raise it, so a busy feed queues one input.
        var queuedWake: UInt64?

        /// Nothing waits in the inbox and nothing is being handled there: an input may be
        /// handled at once by its caller without overtaking an earlier one.
        var inboxIdle: Bool { pending == 0 && !processing }
    }

    /// Commands queued for group commit and not yet answered, and the inbox task waiting
    /// for one of them to complete (at most one: the inbox is worked through by one task).
    /// Changes of `inFlight` between 0, 1 and 2 go to the store's ``CommandSources``.
    private struct Window {
        var inFlight = 0
        var waiter: CheckedContinuation<Void, Never>?
        /// Waiting for `inFlight` to reach 0 (shutdown).
        var drained: [CheckedContinuation<Void, Never>] = []
    }

    let engine: NodeEngine
    let outbound: SessionOutbound
    /// The connection this session's stream travels on: the owner of the nonces it is issued.
    let connection: UInt64
    let state = NIOLockedValueBox(State())
    private let window = NIOLockedValueBox(Window())
    private let continuation: AsyncStream<Input>.Continuation
    private let worker: NIOLockedValueBox<Task<Void, Never>?> = NIOLockedValueBox(nil)
    /// Ends the session with `session-expired` when its login's lifetime is over (``SessionExpiry``).
    let expiry: NIOLockedValueBox<Task<Void, Never>?> = NIOLockedValueBox(nil)

    init(engine: NodeEngine, outbound: SessionOutbound, connection: UInt64) {
        self.engine = engine
        self.outbound = outbound
        self.connection = connection
        let (stream, continuation) = AsyncStream<Input>.makeStream()
        self.continuation = continuation
        let task = Task { [weak self] in
            for await input in stream {
                guard let self else { return }
                self.state.withLockedValue {
                    $0.pending -= 1
                    $0.processing = true
                }
                await self.process(input)
                self.state.withLockedValue { $0.processing = false }
            }
        }
        worker.withLockedValue { $0 = task }
    }

    /// Processes one decoded frame from the client, in order. A storage command of an
    /// authenticated session whose inbox is idle goes to group commit at once, on the
    /// caller's thread (no hop through the inbox); everything else is queued.
    public func receive(_ frame: Frame) {
        if NodeEngine.isStorageCommand(frame),
            let auth = admitDirectCommand(needing: Self.requiredFeature(of: frame) ?? [])
        {
            engine.submit(frame, in: self, as: auth, mayCommitInline: true)
            return
        }
        enqueue(.frame(frame))
    }

    /// The session's identity when a storage command may bypass the inbox: open,
    /// authenticated, inbox idle, the features it needs agreed (else the inbox answers
    /// `forbidden`), node not shutting down, and a command slot free (taken).
    private func admitDirectCommand(needing features: FeatureSet) -> Auth? {
        let auth = state.withLockedValue { s -> Auth? in
            s.phase == .open && s.inboxIdle && s.features.isSuperset(of: features) ? s.auth : nil
        }
        guard let auth, !engine.isShuttingDown.withLockedValue({ $0 }), tryAcquireCommandSlot() else { return nil }
        return auth
    }

    /// The decoder failed: the engine sends an error frame with the wire error's code and closes.
    public func receiveFailed(_ error: WireError) {
        fail(error)
    }

    /// The transport went away (reset, connection closed, idle timeout).
    public func closed() {
        let auth = state.withLockedValue { s -> Auth? in
            s.phase = .closed
            return s.auth
        }
        continuation.finish()
        expiry.withLockedValue { $0 }?.cancel()
        engine.answers.abandon(owner: ObjectIdentifier(self))
        engine.registry.remove(self, user: auth?.user)
        if let auth {
            engine.deviceGone(auth.user, device: auth.device)
            engine.presenceSessionEnded(auth.user, device: auth.device)
        }
    }

    /// The user this session authenticated as, if it did.
    public var user: UserID? { state.withLockedValue { $0.auth?.user } }

    /// Live feed entries of this session's user, from the commit that made them durable.
    /// Sent at once when they continue exactly where the session is and its inbox is idle
    /// (no hop through the inbox); otherwise queued, where gaps are filled in order.
    ///
    /// The frames are queued on the stream while the session's lock is held: two commits
    /// published at once from two threads (the writer and the completion thread) reach the
    /// stream in seq order. Queued apart from the lock, the later one could pass the earlier,
    /// and the device, whose cursor then passed the earlier entry, dropped it as already seen.
    func publish(_ changes: [Change]) {
        let sent = state.withLockedValue { s -> Bool in
            guard s.phase != .closed, s.live, s.inboxIdle, let first = changes.first, first.seq == s.sentThrough + 1,
                zip(changes, changes.dropFirst()).allSatisfy({ $1.seq == $0.seq + 1 })
            else { return false }
            s.sentThrough = changes[changes.count - 1].seq
            outbound.send(FeedCoding.frames(changes, for: s.features))
            return true
        }
        if !sent { enqueue(.live(changes)) }
    }

    /// Another node committed this user's feed up to `head` (nil: up to whatever there
    /// is): the session reads the entries it has not sent, in order, through its inbox.
    func wake(through head: UInt64?) {
        let wanted = head ?? .max
        let queue = state.withLockedValue { s -> Bool in
            guard s.phase != .closed, s.live, wanted > s.sentThrough else { return false }
            if let queued = s.queuedWake {
                s.queuedWake = max(queued, wanted)
                return false
            }
            s.queuedWake = wanted
            return true
        }
        if queue { enqueue(.wake) }
    }

    func enqueue(_ input: Input) {
        let accepted = state.withLockedValue { s -> Bool? in
            guard s.phase != .closed else { return nil }
            guard s.pending < Self.maxPendingInputs else { return false }
            s.pending += 1
            return true
        }
        switch accepted {
        case nil: return
        case false?: fail(WireError(.slowConsumer, "more than \(Self.maxPendingInputs) inputs wait for this session"))
        case true?: continuation.yield(input)
        }
    }

    /// Counts one more command in flight if fewer than `maxCommandsInFlight` are (and no
    /// command waits for a slot); false otherwise.
    func tryAcquireCommandSlot() -> Bool {
        window.withLockedValue { w -> Bool in
            guard w.inFlight < Self.maxCommandsInFlight, w.waiter == nil else { return false }
            w.inFlight += 1
            if w.inFlight <= 2 { engine.store.commandSources.moved(from: w.inFlight - 1, to: w.inFlight) }
            return true
        }
    }

    /// Waits until fewer than `maxCommandsInFlight` commands are in flight, then counts one more.
    func acquireCommandSlot() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let proceed = window.withLockedValue { w -> Bool in
                guard w.inFlight >= Self.maxCommandsInFlight else {
                    w.inFlight += 1
                    if w.inFlight <= 2 { engine.store.commandSources.moved(from: w.inFlight - 1, to: w.inFlight) }
                    return true
                }
                w.waiter = continuation
                return false
            }
            if proceed { continuation.resume() }
        }
    }

    /// A command in flight completed (answered or failed).
    func releaseCommandSlot() {
        let (waiter, drained) = window.withLockedValue {
            w -> (CheckedContinuation<Void, Never>?, [CheckedContinuation<Void, Never>]) in
            guard let waiter = w.waiter else {
                w.inFlight -= 1
                if w.inFlight < 2 { engine.store.commandSources.moved(from: w.inFlight + 1, to: w.inFlight) }
                guard w.inFlight == 0 else { return (nil, []) }
                defer { w.drained = [] }
                return (nil, w.drained)
            }
            // The slot passes straight to the waiting command.
            w.waiter = nil
            return (waiter, [])
        }
        waiter?.resume()
        for d in drained { d.resume() }
    }

    /// The feature bits a client frame needs (SPEC §5.1), nil for a frame that needs none.
    static func requiredFeature(of frame: Frame) -> FeatureSet? {
        switch frame {
        case .typing: .typingIndicators
        case .deliveryReceipt: .deliveryReceipts
        case .fetchHistory(let f):
            switch f.policy {
            case .pageAfter: [.historyFetch, .historyPaging]
            case .thread: [.historyFetch, .replies]
            default: .historyFetch
            }
        case .sendMessage(let f) where f.replyTo != nil: .replies
        case .updateMessageParts: .partUpdates
        case .react: .reactions
        case .blockUser: .blockLists
        case .setPresence: .presence
        case .followUser: .following
        case .searchMessages: .messageSearch
        case .setNotificationLevel: .notificationLevels
        // The old single flag (both switches alike) needs no bit; the two switches set apart do.
        case .createConversation(let f) where !f.options.receiptSwitches.isSingleFlag: .receiptSwitches
        case .createChannel, .joinChannel, .leaveChannel, .sendChannelMessage, .fetchChannel, .deleteChannel: .channels
        default: nil
        }
    }

    /// For an authenticated session, the features `frame` needs that the session did not
    /// agree (answered `forbidden`, SPEC §5.7); nil when it may be carried out (or the
    /// session is not authenticated: that answer comes first).
    private func refusedFeature(_ frame: Frame) -> FeatureSet? {
        guard let needed = Self.requiredFeature(of: frame) else { return nil }
        return state.withLockedValue { s -> FeatureSet? in
            guard s.auth != nil, !s.features.isSuperset(of: needed) else { return nil }
            return needed.subtracting(s.features)
        }
    }

    /// Whether `frame` waits for the session's commands in flight before it is handled:
    /// everything but storage commands (they queue behind them) and PING/PONG (liveness).
    static func waitsForEarlierCommands(_ frame: Frame) -> Bool {
        switch frame {
        case .ping, .pong: false
        default: !NodeEngine.isStorageCommand(frame)
        }
    }

    /// Returns once no command of this session is in flight.
    func commandsDrained() async {
        guard window.withLockedValue({ $0.inFlight > 0 }) else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = window.withLockedValue { w -> Bool in
                guard w.inFlight > 0 else { return true }
                w.drained.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Sends `error` as a fatal ERROR and closes the session.
    func fail(_ error: WireError) {
        var frame = ErrorFrame(error)
        frame.isFatal = true
        close(with: frame)
    }

    func close(with frame: ErrorFrame?) {
        let wasOpen = state.withLockedValue { s -> Bool in
            defer { s.phase = .closed }
            return s.phase != .closed
        }
        guard wasOpen else { return }
        outbound.close(with: frame)
        closed()
    }

    /// Lets queued inputs finish, then closes with `frame` (shutdown).
    func drainAndClose(with frame: ErrorFrame) async {
        continuation.finish()
        await worker.withLockedValue { $0 }?.value
        await commandsDrained()
        close(with: frame)
    }

    var isOpen: Bool { state.withLockedValue { $0.phase != .closed } }

    func send(_ frames: [Frame]) {
        guard isOpen, !frames.isEmpty else { return }
        outbound.send(frames)
    }

    func send(_ frame: Frame) { send([frame]) }

    /// Sends the frames of a large answer as the client reads: each waits until the outbound
    /// has room (``SessionOutbound/roomForPacedAnswer()``). False when the session closed first.
    func sendPaced(_ frames: [Frame]) async -> Bool {
        for frame in frames {
            guard isOpen, await outbound.roomForPacedAnswer(), isOpen else { return false }
            outbound.send([frame])
        }
        return isOpen
    }

    /// A lease of the node's ``AnswerBudget`` for one page of a large answer, waited for
    /// (the outbound watches the client meanwhile); nil when the session closed first.
    func answerLease(_ bytes: Int) async -> AnswerBudget.Lease? {
        guard let user else { return nil }
        outbound.waitsForAnswerBudget(true)
        defer { outbound.waitsForAnswerBudget(false) }
        return await engine.answers.acquire(user: user, bytes: bytes, owner: ObjectIdentifier(self)) {
            [weak self] in self?.isOpen ?? false
        }
    }

    /// Releases `lease` once its page's frames left the stream's queue (or the session closed).
    func settle(_ lease: AnswerBudget.Lease) async {
        if isOpen { _ = await outbound.pacedAnswerDrained() }
        lease.release()
    }

    /// A non-fatal ERROR for a command (fatal ones close the session).
    func reply(_ error: WireError, requestID: UUID?, conversationID: ConversationID? = nil) {
        var frame = ErrorFrame(error, requestID: requestID)
        frame.conversationID = conversationID
        if error.code == .overloaded { frame.retryAfterMilliseconds = Self.overloadedRetryMilliseconds }
        if frame.isFatal {
            close(with: frame)
        } else {
            send(.error(frame))
        }
    }

    // MARK: - The inbox

    private func process(_ input: Input) async {
        guard isOpen else { return }
        switch input {
        case .live(let changes):
            await deliverLive(changes)
        case .wake:
            await catchUp()
        case .ephemeral(let change):
            let needed: FeatureSet =
                switch change.event.kind {
                case 14: .presence
                case 12: .identities
                case 16...19: .channels
                default: .typingIndicators
                }
            if state.withLockedValue({ $0.features.contains(needed) }) { send(.change(change)) }
        case .frame(let frame):
            await handle(frame)
        }
    }

    /// Sends live feed entries in feed order, each once. Commits finish (and publish) in any
    /// order, so entries can arrive here out of seq order: those already sent are dropped,
    /// and a gap is filled from the store (an entry is published after its commit, and every
    /// lower seq of the feed committed no later), so the device's cursor never passes an
    /// entry it did not get.
    private func deliverLive(_ changes: [Change]) async {
        let (live, features, through, user) = state.withLockedValue {
            ($0.live, $0.features, $0.sentThrough, $0.auth?.user)
        }
        guard live, let user else { return }
        let fresh = changes.filter { $0.seq > through }.sorted { $0.seq < $1.seq }
        guard let first = fresh.first else { return }
        let contiguous = first.seq == through + 1 && zip(fresh, fresh.dropFirst()).allSatisfy { $1.seq == $0.seq + 1 }
        if contiguous {
            send(FeedCoding.frames(fresh, for: features))
            state.withLockedValue { $0.sentThrough = fresh[fresh.count - 1].seq }
            return
        }
        do {
            let reached = try await engine.sendFeed(of: user, after: through, to: self, features: features)
            state.withLockedValue { $0.sentThrough = max($0.sentThrough, reached) }
        } catch {
            fail(WireError(.internalError, "reading the feed failed: \(error)"))
        }
    }

    /// Reads and sends the feed after what was sent, when a wake asks for more than that.
    private func catchUp() async {
        let (wanted, live, features, through, user) = state.withLockedValue { s in
            defer { s.queuedWake = nil }
            return (s.queuedWake ?? 0, s.live, s.features, s.sentThrough, s.auth?.user)
        }
        guard live, let user, wanted > through else { return }
        do {
            let reached = try await engine.sendFeed(of: user, after: through, to: self, features: features)
            state.withLockedValue { $0.sentThrough = max($0.sentThrough, reached) }
        } catch {
            fail(WireError(.internalError, "reading the feed failed: \(error)"))
        }
    }

    private func handle(_ frame: Frame) async {
        let phase = state.withLockedValue { $0.phase }
        if phase == .awaitingHello {
            switch frame {
            case .hello(let hello): return negotiate(hello)
            case .peerHello, .versionVector, .replicate, .peerAck, .peerPresence, .peerPresenceRelayed,
                .peerPresenceWithdrawn:
                return fail(WireError(.forbidden, "peer frames are not allowed on a client session"))
            default:
                return fail(WireError(.unexpectedFrame, "the first frame must be HELLO, got \(frame.type.name)"))
            }
        }
        // SPEC §6: a frame sees the effect of every earlier command of its stream and is
        // answered after them. A storage command joins the writer's queue behind them; any
        // other frame but PING and PONG waits until none of the session's commands is in
        // flight (at once when none is: reads with nothing pending keep their fast path).
        if Self.waitsForEarlierCommands(frame) { await commandsDrained() }
        if let missing = refusedFeature(frame) {
            let bits = (0..<64).filter { missing.rawValue & (1 << $0) != 0 }.map(String.init).joined(separator: " and ")
            return reply(
                WireError(
                    .forbidden,
                    "\(frame.type.name) needs feature bit \(bits) (SPEC §5.1), which this session did not agree in HELLO"
                ),
                requestID: frame.commandID)
        }
        switch frame {
        case .ping(let ping): send(.pong(ping))
        case .pong: break
        case .nonceRequest(let request): issueNonce(requestID: request.requestID)
        case .authenticate(let request): await authenticate(request)
        case .resumeSession(let request): await resume(request)
        case .endSession(let request):
            guard let auth = state.withLockedValue({ $0.auth }) else {
                return reply(
                    WireError(.authenticationRequired, "authenticate before END_SESSION"), requestID: request.requestID)
            }
            await endSession(request, as: auth)
        case .blockUser(let request):
            guard let auth = state.withLockedValue({ $0.auth }) else {
                return reply(
                    WireError(.authenticationRequired, "authenticate before BLOCK_USER"), requestID: request.requestID)
            }
            await blockUser(request, as: auth)
        case .followUser(let request):
            guard let auth = state.withLockedValue({ $0.auth }) else {
                return reply(
                    WireError(.authenticationRequired, "authenticate before FOLLOW_USER"), requestID: request.requestID)
            }
            await followUser(request, as: auth)
        case .setNotificationLevel(let request):
            guard let auth = state.withLockedValue({ $0.auth }) else {
                return reply(
                    WireError(.authenticationRequired, "authenticate before SET_NOTIFICATION_LEVEL"),
                    requestID: request.requestID)
            }
            await setNotificationLevel(request, as: auth)
        case .setPresence(let request):
            guard let auth = state.withLockedValue({ $0.auth }) else {
                return reply(
                    WireError(.authenticationRequired, "authenticate before SET_PRESENCE"), requestID: request.requestID
                )
            }
            setPresence(request, as: auth)
        case .createChannel, .joinChannel, .leaveChannel, .sendChannelMessage, .fetchChannel, .deleteChannel:
            guard let auth = state.withLockedValue({ $0.auth }) else {
                return reply(
                    WireError(.authenticationRequired, "authenticate before \(frame.type.name)"),
                    requestID: frame.commandID)
            }
            await handleChannelCommand(frame, as: auth)
        case .registerPushToken(let request):
            guard let auth = state.withLockedValue({ $0.auth }) else {
                return reply(
                    WireError(.authenticationRequired, "authenticate before REGISTER_PUSH_TOKEN"),
                    requestID: request.requestID)
            }
            await registerPushToken(request, as: auth)
        case .error(let error):
            // Logged by the stream; a fatal one ends the session without a frame (SPEC §5.6).
            if error.isFatal { close(with: nil) }
        case .hello, .welcome, .nonce, .authenticated, .ack, .change, .changeBatch:
            fail(WireError(.unexpectedFrame, "a client does not send \(frame.type.name) here"))
        case .peerHello, .versionVector, .replicate, .peerAck, .peerPresence, .peerPresenceRelayed,
            .peerPresenceWithdrawn:
            fail(WireError(.forbidden, "peer frames are not allowed on a client session"))
        default:
            guard let auth = state.withLockedValue({ $0.auth }) else {
                return reply(
                    WireError(.authenticationRequired, "authenticate before \(frame.type.name)"),
                    requestID: frame.commandID)
            }
            if engine.isShuttingDown.withLockedValue({ $0 }) {
                return reply(WireError(.shuttingDown, "the node is shutting down"), requestID: frame.commandID)
            }
            await engine.execute(frame, in: self, as: auth)
        }
    }

    private func negotiate(_ hello: Hello) {
        guard hello.minVersion >= 1, hello.minVersion <= hello.maxVersion else {
            return fail(WireError(.malformed, "HELLO needs 1 <= min version <= max version"))
        }
        let version = WireProtocol.version
        guard (hello.minVersion...hello.maxVersion).contains(version) else {
            return fail(
                WireError(
                    .unsupportedVersion,
                    "this node speaks version \(version), the client \(hello.minVersion)...\(hello.maxVersion)"))
        }
        let features = hello.features.intersection(.supported)
        state.withLockedValue {
            $0.phase = .open
            $0.features = features
        }
        send(
            .welcome(
                Welcome(
                    version: version, features: features, nodeID: engine.configuration.nodeID,
                    serverTime: .now(), maxFrameSize: UInt32(clamping: engine.configuration.maxFrameSize),
                    cluster: engine.configuration.cluster
                )))
    }
}
