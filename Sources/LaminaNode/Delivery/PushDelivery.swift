import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Carries the push outbox to the providers after the commits that wrote it: one lane per
/// configured provider takes the pushes that are due (the earliest first, up to
/// ``PushSettings/inFlightLimit(_:)`` at once) and sends them; the outcomes are recorded
/// in batches beside the sending. A push leaves the queue
/// only on the provider's answer (accepted, refused, or the token is gone — then the token is
/// removed too) or when it expires; failures are retried with the webhooks' backoff (exponential,
/// jitter, `Retry-After`). One provider's trouble never holds another's pushes.
final class PushDelivery: Sendable {
    let store: NodeStore
    let outbox: PushOutbox
    let settings: PushSettings
    let metrics: PushMetrics
    private let logger: Logger
    private let providers: [PushToken.Kind: any PushProvider]
    private let lanes = NIOLockedValueBox<[PushToken.Kind: PushLane]>([:])
    /// Whether this node drains the outbox: always on SQLite once started; on PostgreSQL while
    /// it holds the pushes' lease (one node at a time, POSTGRES.md).
    private let draining = NIOLockedValueBox(false)
    private let stopped = NIOLockedValueBox(false)
    /// Lease changes, one after the other.
    private let serial = SerialTasks()
    /// How long an idle lane waits before looking at its queue anyway (PostgreSQL only: another
    /// node's wake-up can be lost).
    var idlePoll: Duration? { store.isShared ? OutboxLease.idlePollInterval : nil }

    /// Loads every configured provider's credentials; one that does not parse fails here with
    /// the reason (the node does not start).
    init(
        store: NodeStore, outbox: PushOutbox, settings: PushSettings, group: EventLoopGroup, logger: Logger,
        metrics: PushMetrics, webhooksCAFile: String? = nil
    ) throws {
        self.store = store
        self.outbox = outbox
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
        var providers: [PushToken.Kind: any PushProvider] = [:]
        if settings.isEnabled {
            let trust: TLSConfiguration.Trust = settings.caFile.map { .caFile($0) } ?? .systemDefault
            var h2 = TLSConfiguration.client(trust: trust)
            h2.handshakeTimeout = .seconds(Int64(settings.connectTimeoutSeconds))
            var h1 = h2
            h1.offersHTTP1 = true
            let connect = TimeAmount.seconds(Int64(settings.connectTimeoutSeconds))
            let timeout = TimeAmount.seconds(Int64(settings.responseTimeoutSeconds))
            if let apns = settings.apns {
                providers[.apns] = try APNsProvider(
                    apns, connections: settings.connectionsPerProvider, tls: try TLSContext(h2), group: group,
                    connectTimeout: connect, timeout: timeout)
            }
            if let fcm = settings.fcm {
                providers[.fcm] = try FCMProvider(
                    fcm, connections: settings.connectionsPerProvider, tls: try TLSContext(h1), h2: try TLSContext(h2),
                    group: group,
                    connectTimeout: connect, timeout: timeout)
            }
            if let gateway = settings.gateway {
                // The gateway's own trust: its CA file, the providers', or the webhooks' one.
                var tls = TLSConfiguration.client(
                    trust: settings.gatewayTrust(webhooksCAFile: webhooksCAFile).map { .caFile($0) } ?? .systemDefault)
                tls.handshakeTimeout = .seconds(Int64(settings.connectTimeoutSeconds))
                tls.offersHTTP1 = true
                providers[.gateway] = try GatewayProvider(
                    gateway, tls: try TLSContext(tls), group: group, connectTimeout: connect, timeout: timeout)
            }
        }
        self.providers = providers
    }

    /// Before the node takes commands: the outbox learns the providers (so sends queue pushes
    /// for their tokens) and whom to wake.
    func prepare() {
        outbox.configure(kinds: Set(providers.keys), expirationSeconds: settings.expirationSeconds) {
            [weak self] counts in
            guard let self else { return }
            // Another node drains the outbox: it is told.
            if store.isShared, !draining.withLockedValue({ $0 }) { return store.wakeOutbox(.pushes) }
            for kind in counts.keys { lanes.withLockedValue { $0[kind] }?.signal() }
        }
    }

    /// Starts a lane per provider (each first sends what a previous run left queued).
    func start() async throws {
        guard !providers.isEmpty else { return }
        guard store.isShared else {
            draining.withLockedValue { $0 = true }
            try await startLanes()
            return
        }
        store.observeOutbox(
            .pushes,
            OutboxObserver(
                held: { [weak self] held in self?.serial.enqueue { [weak self] in await self?.leaseChanged(held) } },
                wake: { [weak self] in
                    guard let self else { return }
                    for lane in lanes.withLockedValue({ Array($0.values) }) { lane.signal() }
                },
                subscriptionsChanged: nil))
    }

    private func startLanes() async throws {
        let depths = try await store.read { r in try r.pushQueueDepths() }
        for (kind, provider) in providers {
            metrics.queueDepth(kind).set(Int64(depths[kind] ?? 0))
            let lane = PushLane(provider: provider, delivery: self)
            lanes.withLockedValue { $0[kind] = lane }
        }
    }

    /// PostgreSQL: this node took (true: a lane per provider, from the queue's oldest due push)
    /// or lost (false: the lanes stop) the pushes' lease.
    private func leaseChanged(_ held: Bool) async {
        guard !stopped.withLockedValue({ $0 }) else { return }
        draining.withLockedValue { $0 = held }
        let previous = lanes.withLockedValue { l -> [PushLane] in
            defer { l = [:] }
            return Array(l.values)
        }
        for lane in previous { await lane.stop() }
        guard held else { return }
        do { try await startLanes() } catch {
            logger.error("push lease taken but the push queue is unreadable", metadata: ["error": "\(error)"])
        }
    }

    /// Stops the lanes (queued pushes stay queued for the next start): no new attempt starts,
    /// the providers' connections close (failing what is in flight at once), the lanes end.
    func shutdown() async {
        stopped.withLockedValue { $0 = true }
        await serial.drain()
        let all = lanes.withLockedValue { l -> [PushLane] in
            defer { l = [:] }
            return Array(l.values)
        }
        for lane in all { lane.cancel() }
        for provider in providers.values { await provider.shutdown() }
        for lane in all { await lane.stop() }
    }

    fileprivate func log(_ message: Logger.Message, _ metadata: Logger.Metadata, level: Logger.Level = .warning) {
        logger.log(level: level, message, metadata: metadata)
    }

    var backoff: RetryBackoff {
        RetryBackoff(initialMilliseconds: settings.initialBackoffMilliseconds, maxSeconds: settings.maxBackoffSeconds)
    }
}

/// One provider's delivery loop.
final class PushLane: Sendable {
    private let signals = LaneSignal()
    private let task: NIOLockedValueBox<Task<Void, Never>?> = NIOLockedValueBox(nil)

    init(provider: any PushProvider, delivery: PushDelivery) {
        let task = Task { [signals] in await Self.run(provider: provider, delivery: delivery, signals: signals) }
        self.task.withLockedValue { $0 = task }
    }

    func signal() { signals.signal() }

    /// Starts no new attempt from now on.
    func cancel() {
        signals.finish()
        task.withLockedValue { $0 }?.cancel()
    }

    /// Cancels and waits for the lane to end.
    func stop() async {
        cancel()
        await task.withLockedValue { $0 }?.value
    }

    /// The pushes a lane holds: being sent, and sent but not yet recorded (both are still
    /// queued rows, so the lane's reads skip them).
    private struct Held {
        var sending = Set<Int64>()
        var settling = Set<Int64>()
        var finished: [(QueuedPush, PushOutcome)] = []
    }

    /// Sent pushes waiting to be recorded, in multiples of the in-flight limit, past which the
    /// lane starts no new push (the settler is behind: the store is the limit).
    static let unsettledFactor = 4
    /// How often the queue-depth gauge is read again from the queue while the lane is busy.
    static let depthInterval: Duration = .milliseconds(500)

    /// Keeps up to the provider's in-flight limit of pushes in flight (a slow one holds only its own
    /// slot): takes due pushes into free slots as soon as a slot frees. Finished attempts are
    /// recorded by a settler beside the loop, all that finished since its last transaction in
    /// one, so a commit (an fsync behind the messages' group commits) never holds a slot.
    private static func run(provider: any PushProvider, delivery: PushDelivery, signals: LaneSignal) async {
        let kind = provider.kind
        let limit = delivery.settings.inFlightLimit(kind)
        let held = NIOLockedValueBox(Held())
        let settler = LaneSignal()
        var depthReadAt: ContinuousClock.Instant?
        await withDiscardingTaskGroup { group in
            group.addTask {
                while await settler.wait(timeout: nil) {
                    let done = held.withLockedValue { h -> [(QueuedPush, PushOutcome)] in
                        defer { h.finished = [] }
                        return h.finished
                    }
                    guard !done.isEmpty else { continue }
                    await settle(done, kind: kind, delivery: delivery)
                    held.withLockedValue { h in for (push, _) in done { h.settling.remove(push.seq) } }
                    signals.signal()
                }
            }
            while !Task.isCancelled {
                let (sending, excluded) = held.withLockedValue { h in (h.sending.count, h.sending.union(h.settling)) }
                let free = limit - sending
                // At saturation a slot or two freeing does not warrant a read: a few at once.
                let canStart =
                    free >= (sending == 0 ? 1 : max(1, limit / 16))
                    && excluded.count - sending <= limit * unsettledFactor
                // Idle (nothing held), or busy and not read for a while.
                let readDepth =
                    excluded.isEmpty || depthReadAt.map { ContinuousClock.now - $0 >= depthInterval } ?? true
                let due: [QueuedPush]
                let badges: [UserID: Int]
                let next: Timestamp?
                if canStart || readDepth {
                    do {
                        (due, badges, next) = try await delivery.store.read { r in
                            // The held pushes are due too (they leave the queue when settled): skipped.
                            let due =
                                canStart ? try r.duePushes(kind, at: .now(), limit: free, excluding: excluded) : []
                            // Each recipient's badge as of now, once per user in the batch.
                            var badges: [UserID: Int] = [:]
                            for push in due where badges[push.user] == nil {
                                badges[push.user] = try PushOutbox.badge(of: push.user, r)
                            }
                            if readDepth {
                                // The gauge is what the queue holds (a command rolled back after queueing, a
                                // crash, leave no count to drift); read at most every `depthInterval`.
                                delivery.metrics.queueDepth(kind).set(Int64(try r.pushQueueDepth(kind)))
                            }
                            return (due, badges, due.isEmpty && excluded.isEmpty ? try r.nextPushAttempt(kind) : nil)
                        }
                    } catch {
                        if Task.isCancelled { break }
                        delivery.log(
                            "push queue unreadable", ["provider": "\(kind.name)", "error": "\(error)"], level: .error)
                        guard await signals.wait(timeout: .seconds(1)) else { break }
                        continue
                    }
                    if readDepth { depthReadAt = .now }
                } else {
                    (due, badges, next) = ([], [:], nil)
                }
                for push in due {
                    held.withLockedValue { _ = $0.sending.insert(push.seq) }
                    group.addTask {
                        let outcome = await attempt(push, badge: badges[push.user] ?? 0, provider: provider)
                        held.withLockedValue { h in
                            h.sending.remove(push.seq)
                            h.settling.insert(push.seq)
                            h.finished.append((push, outcome))
                        }
                        settler.signal()
                        signals.signal()
                    }
                }
                // Every free slot filled: more may be due at once.
                if canStart && due.count == free { continue }
                // Nothing more to start: wait for a push to finish or be queued, or the next one to be due.
                let wait = next.map {
                    Duration.milliseconds(max(1, $0.millisecondsSince1970 - Timestamp.now().millisecondsSince1970))
                }
                let idle = excluded.isEmpty && due.isEmpty
                let poll = delivery.idlePoll.map { p in wait.map { min($0, p) } ?? p } ?? wait
                guard await signals.wait(timeout: idle ? poll : .seconds(1)) else { break }
            }
            settler.finish()
            group.cancelAll()
        }
    }

    /// One push sent (or found expired); how it ended.
    private static func attempt(_ push: QueuedPush, badge: Int, provider: any PushProvider) async -> PushOutcome {
        guard Timestamp.now() < push.expiresAt else { return .refused("expired") }
        var notification: PushNotification
        do { notification = try PushNotification.decode(push.payload) } catch {
            return .refused("the queued notification does not decode: \(error)")
        }
        notification.badge = badge
        return await provider.send(push, notification)
    }

    /// What the queue keeps of one outcome.
    private enum Settlement {
        case delivered
        case refused(String)
        case expired(String)
        case unregistered(String)
        case retry(attempts: Int, next: Timestamp, delay: Int64, reason: String)
    }

    /// Records how a batch of attempts ended, in one transaction: delivered, refused and expired
    /// pushes leave the queue, a gone token is removed with its push, the others are rescheduled.
    private static func settle(_ outcomes: [(QueuedPush, PushOutcome)], kind: PushToken.Kind, delivery: PushDelivery)
        async
    {
        let now = Timestamp.now()
        let settlements: [(QueuedPush, Settlement)] = outcomes.map { push, outcome in
            switch outcome {
            case .delivered: return (push, .delivered)
            case .refused(let reason): return (push, reason == "expired" ? .expired(reason) : .refused(reason))
            case .unregistered(let reason): return (push, .unregistered(reason))
            case .retry(let reason, let after):
                let attempts = push.attempts + 1
                let delay = delivery.backoff.delay(attempts: attempts, retryAfter: after)
                let next = Timestamp(millisecondsSince1970: now.millisecondsSince1970 + delay)
                // A push that could only go after its expiration is dropped now.
                if next >= push.expiresAt { return (push, .expired("expired while failing: \(reason)")) }
                return (push, .retry(attempts: attempts, next: next, delay: delay, reason: reason))
            }
        }
        let removedTokens: Int
        do {
            removedTokens = try await delivery.store.write { tx -> Int in
                var removed = 0
                var done: [Int64] = []
                for (push, settlement) in settlements {
                    switch settlement {
                    case .delivered, .refused, .expired: done.append(push.seq)
                    case .unregistered:
                        done.append(push.seq)
                        if try tx.removePushToken(push.token) { removed += 1 }
                    case .retry(let attempts, let next, _, _):
                        try tx.reschedulePush(push.seq, attempts: attempts, next: next)
                    }
                }
                try tx.removePushes(done)
                return removed
            }
        } catch {
            delivery.log("push queue update failed", ["provider": "\(kind.name)", "error": "\(error)"], level: .error)
            try? await Task.sleep(for: .seconds(1))
            return
        }
        for _ in 0..<removedTokens { delivery.metrics.tokenRemoved(kind) }
        for (push, settlement) in settlements {
            let meta: Logger.Metadata = [
                "provider": "\(kind.name)", "message": "\(push.message)", "device": "\(push.device)",
            ]
            switch settlement {
            case .delivered:
                delivery.metrics.delivered(kind)
            case .refused(let reason):
                delivery.metrics.failed(kind, reason: "refused")
                delivery.log("push dropped: the provider refused it", meta.merging(["reason": "\(reason)"]) { $1 })
            case .expired(let reason):
                delivery.metrics.failed(kind, reason: "expired")
                delivery.log(
                    "push dropped: expired before it could be delivered", meta.merging(["reason": "\(reason)"]) { $1 })
            case .unregistered(let reason):
                delivery.metrics.failed(kind, reason: "unregistered")
                delivery.log(
                    "push token removed on the provider's answer", meta.merging(["reason": "\(reason)"]) { $1 },
                    level: .info)
            case .retry(let attempts, _, let delay, let reason):
                delivery.metrics.retried(kind)
                delivery.log(
                    "push failed; retrying",
                    meta.merging(["attempt": "\(attempts)", "in_ms": "\(delay)", "reason": "\(reason)"]) { $1 },
                    level: .info)
            }
        }
    }
}
