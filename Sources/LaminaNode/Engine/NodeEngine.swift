import Foundation
import LaminaMerge
import LaminaModel
import LaminaStore
import LaminaWire
import NIOConcurrencyHelpers

/// The relay's brain: sessions, auth, commands, sync, fan-out. Thread-safe.
///
/// Every command commits through `store` in one transaction (effect, feed entries and
/// idempotency record together); the ACK goes out only after that commit returned, and then
/// the new feed entries are fanned out to the live sessions of every user they were appended to.
public final class NodeEngine: Sendable {
    package let store: NodeStore
    public let configuration: NodeEngineConfiguration
    let verifier: IdentityTokenVerifier
    let clock: NIOLockedValueBox<HybridLogicalClock>
    let registry = SessionRegistry()
    let isShuttingDown = NIOLockedValueBox(false)
    /// Per user: storage commands and their bytes (``NodeEngineConfiguration/commandBudget``).
    let commandBudget: TokenBuckets<UserID>
    /// Ends typing indicators not refreshed for 6 s (SPEC §6.1).
    let typingExpiry = TypingExpiry()
    /// Who is online here, their presence and whom they follow (SPEC §6.6): memory only.
    let presenceTable: NIOLockedValueBox<PresenceTable>
    /// Where this node's presence reports go (peer links, the shared store's NOTIFY).
    let presenceSenders = NIOLockedValueBox<[ObjectIdentifier: @Sendable ([PeerPresence.Entry]) -> Void]>([:])
    /// The peer links presence travels on (own, relayed and withdrawn reports), by link.
    let presenceLinks = NIOLockedValueBox<[ObjectIdentifier: PresenceLink]>([:])
    /// The task that announces this node's presence to the shared store's other nodes again.
    let presenceRefresh = NIOLockedValueBox<Task<Void, Never>?>(nil)
    /// When each other node of the shared store was last heard from (its presence reports).
    let presenceHeard = NIOLockedValueBox<[NodeID: ContinuousClock.Instant]>([:])
    /// Presence changes relayed and updates addressed since the start.
    public let presenceCounts = PresenceCounts()
    /// When users went offline, written to the store in batches (SPEC §6.6 `lastSeenAt`).
    let lastSeen = LastSeenRecorder()
    /// Per user: SET_PRESENCE choices (SPEC §6.6: 2 a second, a burst of 10).
    let presenceBudget = TokenBuckets<UserID>(
        rates: [NodeEngine.presenceChoicesPerSecond], bursts: [NodeEngine.presenceChoiceBurst])
    /// SPEC §6.6: the rate of SET_PRESENCE a user's devices may send together.
    public static let presenceChoicesPerSecond = 2.0
    /// SPEC §6.6: the burst of SET_PRESENCE a user's devices may send together.
    public static let presenceChoiceBurst = 10.0
    /// The members of the channels this node has sent to, for live delivery (SPEC §6.8).
    let channelAudience = ChannelAudience()
    /// Users reached by live channel messages since the start.
    public let channelDeliveries = ChannelDeliveryCounts()
    /// Channel notices sent to and received from the nodes sharing the store (PostgreSQL).
    let sharedChannelNotices = NIOLockedValueBox<(sent: Int, received: Int)>((0, 0))
    /// Moves after every commit that may have grown the replication log (peer links wait on it).
    let replicationSignal = ReplicationSignal()
    /// Moves after a commit of replicated messages that reference rich content this node may
    /// lack (the peer content fetcher waits on it).
    let contentSignal = ReplicationSignal()
    /// Parked replicated operations given up since the start (``ParkingLimits``).
    let parkedAbandoned = NIOLockedValueBox(0)
    /// Webhook events written in the commands' transactions (Delivery/).
    let webhooks = WebhookOutbox()
    /// Pushes written in the sends' transactions for devices without a live session (Delivery/).
    let pushes = PushOutbox()
    /// Every user's block list, for the fan-out of messages (Server API block lists).
    let blockLists: BlockLists
    /// The nonces issued and not yet expired, each tied to its connection (SPEC §5.2).
    public let nonces: NonceTable
    /// The memory of large answers in flight (FETCH_HISTORY, SYNC backlogs, snapshots).
    public let answers: AnswerBudget

    /// Reads the latest clock reading this node stored, so its hybrid logical clock continues
    /// after it (positions never go back across a restart, whatever the wall clock says).
    /// Throws when the store cannot be read.
    package init(store: NodeStore, configuration: NodeEngineConfiguration) throws {
        self.store = store
        self.configuration = configuration
        self.presenceTable = NIOLockedValueBox(PresenceTable(node: configuration.nodeID))
        self.nonces = NonceTable(limits: configuration.nonces)
        self.answers = AnswerBudget(limit: configuration.answerBudgetBytes)
        self.verifier = IdentityTokenVerifier(
            providers: configuration.identityProviders, maxClockSkew: configuration.maxClockSkew)
        self.commandBudget = TokenBuckets(
            rates: [configuration.commandBudget.commandsPerSecond, configuration.commandBudget.bytesPerSecond],
            bursts: [configuration.commandBudget.commandBurst, configuration.commandBudget.byteBurst])
        let latest = try store.readNow { reader in try reader.latestHLC(of: configuration.nodeID) }
        self.blockLists = BlockLists(try store.readNow { reader in try reader.allBlocks() })
        self.clock = NIOLockedValueBox(HybridLogicalClock(node: configuration.nodeID, last: latest ?? .zero))
        typingExpiry.start { [weak self] ended in await self?.relayExpiredTyping(ended) }
        pushes.setLiveCheck { [registry] user, device in registry.hasLiveSession(of: user, device: device) }
        startSharedStoreFanOut()
        startSharedStorePresence()
        lastSeen.start(store)
    }

    deinit {
        lastSeen.stop()
        typingExpiry.stop()
        presenceRefresh.withLockedValue { $0?.cancel() }
    }

    /// A new client session on a fresh sync stream (its nonces are tied to
    /// ``SessionOutbound/connectionID``, or to the session alone when that is nil).
    public func openSession(outbound: SessionOutbound) -> NodeSession {
        let session = NodeSession(
            engine: self, outbound: outbound, connection: outbound.connectionID ?? NonceTable.privateOwner())
        registry.add(session)
        if isShuttingDown.withLockedValue({ $0 }) {
            session.fail(WireError(.shuttingDown, "the node is shutting down"))
        }
        return session
    }

    /// Stops taking commands, lets in-flight commits finish, closes sessions (GOAWAY is the server's).
    public func shutdown() async {
        isShuttingDown.withLockedValue { $0 = true }
        typingExpiry.stop()
        presenceRefresh.withLockedValue { $0?.cancel() }
        for session in registry.all() {
            await session.drainAndClose(with: ErrorFrame(WireError(.shuttingDown, "the node is shutting down")))
        }
        // The sessions' users went offline: when, written before the store closes.
        lastSeen.stop()
        await lastSeen.flush(to: store)
    }

    /// The number of open sessions (authenticated or not).
    public var sessionCount: Int { registry.count }

    /// The next HLC reading of this node (a message position or an operation's time).
    func nextHLC() throws(WireError) -> HLCTimestamp {
        do {
            return try clock.withLockedValue { (c: inout HybridLogicalClock) throws(MergeError) -> HLCTimestamp in
                try c.now(.now())
            }
        } catch {
            throw WireError(.internalError, "the node's clock failed: \(error)")
        }
    }

    /// Sends committed feed entries to the live sessions of their users.
    func publish(_ changes: [FeedChange]) {
        replicationSignal.notify()
        guard !changes.isEmpty else { return }
        followNewParticipants(changes)
        guard changes.count <= 16 else {
            var byUser: [UserID: [Change]] = [:]
            byUser.reserveCapacity(changes.count)
            for c in changes { byUser[c.user, default: []].append(c.change) }
            for (user, list) in byUser {
                for session in registry.sessions(of: user) { session.publish(list) }
            }
            return
        }
        // A command's few entries (a send: one per participant) are grouped by user without
        // a dictionary: each user's entries, in order, from the first one of that user.
        for (i, first) in changes.enumerated() where !changes[..<i].contains(where: { $0.user == first.user }) {
            let sessions = registry.sessions(of: first.user)
            guard !sessions.isEmpty else { continue }
            var list = [first.change]
            for later in changes[(i + 1)...] where later.user == first.user { list.append(later.change) }
            for session in sessions { session.publish(list) }
        }
    }

    /// Relays a change outside the feed (typing) to the authenticated sessions of `users`,
    /// here and, when the store is shared, on the other nodes.
    func relay(_ change: Change, to users: Set<UserID>, except excluded: NodeSession?) {
        relayLocally(change, to: users, except: excluded)
        if case .typing(let typing) = change.event { relayToOtherNodes(typing, to: users) }
    }

    /// Relays a change outside the feed to this node's authenticated sessions of `users`.
    func relayLocally(_ change: Change, to users: Set<UserID>, except excluded: NodeSession?) {
        for user in users {
            for session in registry.sessions(of: user) where session !== excluded {
                session.enqueue(.ephemeral(change))
            }
        }
    }
}

/// One feed entry a command appended: who gets it, its seq, the event (encoded once when
/// several feeds get the same event).
struct FeedChange: Sendable {
    var user: UserID
    /// The change as the user's feed has it.
    var change: Change

    init(user: UserID, seq: UInt64, event: ChangeEvent) {
        self.user = user
        self.change = Change(seq: seq, event: event)
    }

    /// The entry of `shared` in `user`'s feed (with the user's own status when each viewer
    /// sees only their own, ``SharedChangeEvent/reportedToEachViewer(_:)``).
    init(user: UserID, seq: UInt64, shared: SharedChangeEvent) {
        self.user = user
        self.change = shared.change(seq: seq, for: user)
    }

    var seq: UInt64 {
        get { change.seq }
        set { change.seq = newValue }
    }

    var event: ChangeEvent { change.event }
}

/// Open sessions, and the authenticated ones by user.
final class SessionRegistry: Sendable {
    private struct State {
        var all: [ObjectIdentifier: NodeSession] = [:]
        var byUser: [UserID: [ObjectIdentifier: NodeSession]] = [:]
    }
    private let state = NIOLockedValueBox(State())

    func add(_ session: NodeSession) {
        state.withLockedValue { $0.all[ObjectIdentifier(session)] = session }
    }

    func authenticated(_ session: NodeSession, as user: UserID) {
        state.withLockedValue { $0.byUser[user, default: [:]][ObjectIdentifier(session)] = session }
    }

    func remove(_ session: NodeSession, user: UserID?) {
        state.withLockedValue { s in
            s.all[ObjectIdentifier(session)] = nil
            if let user {
                s.byUser[user]?[ObjectIdentifier(session)] = nil
                if s.byUser[user]?.isEmpty == true { s.byUser[user] = nil }
            }
        }
    }

    /// A user's authenticated sessions, as they were when asked.
    typealias Sessions = Dictionary<ObjectIdentifier, NodeSession>.Values

    /// `user`'s authenticated sessions: a view of the registry's dictionary as it is now (no
    /// array is made: a fan-out asks once per recipient and message), unchanged by later
    /// additions and removals.
    func sessions(of user: UserID) -> Sessions {
        state.withLockedValue { $0.byUser[user]?.values ?? [:].values }
    }

    func all() -> [NodeSession] { state.withLockedValue { Array($0.all.values) } }

    /// The users with an authenticated session here.
    func onlineUsers() -> [UserID] { state.withLockedValue { Array($0.byUser.keys) } }

    /// How many users have an authenticated session here.
    var onlineUserCount: Int { state.withLockedValue { $0.byUser.count } }

    /// Whether `user`'s `device` has an authenticated session open on this node.
    func hasLiveSession(of user: UserID, device: String) -> Bool {
        sessions(of: user).contains { $0.state.withLockedValue { $0.auth?.device } == device }
    }

    var count: Int { state.withLockedValue { $0.all.count } }
}
