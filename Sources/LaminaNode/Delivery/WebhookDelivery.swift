import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// Carries the webhooks' queued events to their targets, after the commits that wrote them:
/// at least once (a row is removed only after a 2xx, or a definitive refusal), in commit
/// order per webhook (events start in commit order, up to ``WebhookSettings/maxInFlightPerTarget``
/// at once; a failed event is retried alone and nothing later starts until it has gone: see
/// ``WebhookLane``), at most ``WebhookSettings/maxInFlightPerTarget`` requests per target at
/// once over all its webhooks. Each webhook has its own lane, so a dead target delays only its
/// own webhooks. Failures are retried with exponential backoff and jitter (honouring
/// `Retry-After`); an event failing for ``WebhookSettings/retryPeriodSeconds`` marks its
/// webhook unhealthy and deactivates it.
///
/// Requests are HTTP/1.1 over TLS through ``HTTP1Pool`` (kept-alive connections per webhook,
/// as many as it has requests in flight), signed as Layer signed them.
final class WebhookDelivery: Sendable {
    /// The versioned media type of every request (Layer's).
    static let contentType = "application/vnd.layer.webhooks+json; version=3.0"
    static let userAgent = "layer-webhooks/3.0"

    let store: NodeStore
    let outbox: WebhookOutbox
    let settings: WebhookSettings
    private let group: EventLoopGroup
    private let tls: TLSContext
    private let logger: Logger
    let metrics: WebhookMetrics
    private let lanes = NIOLockedValueBox<[UUID: WebhookLane]>([:])
    private let gates = NIOLockedValueBox<[String: TargetGate]>([:])
    private let stopped = NIOLockedValueBox(false)
    /// Verifications running in the background (waited for by ``shutdown()``).
    private let verifications = NIOLockedValueBox<[UUID: Task<Void, Never>]>([:])
    /// Whether this node drains the outbox (runs the lanes): always on SQLite once started;
    /// on PostgreSQL while it holds the webhooks' lease (one node at a time, POSTGRES.md).
    private let draining = NIOLockedValueBox(false)
    /// Lease changes and subscription reloads, one after the other (each awaits the one before).
    private let serial = SerialTasks()
    /// Subscription reloads done (PostgreSQL: each notification and each (re)connect).
    let reloads = NIOLockedValueBox(0)
    /// PostgreSQL: reads the shared outbox's depths into the gauges (``SharedQueueDepth``).
    let depthRefresh = NIOLockedValueBox<Task<Void, Never>?>(nil)
    /// How long an idle lane waits before looking at its queue anyway: on PostgreSQL, where
    /// another node's wake-up can be lost (not stored); never on SQLite (every commit signals).
    var idlePoll: Duration? { store.isShared ? OutboxLease.idlePollInterval : nil }

    init(
        store: NodeStore, outbox: WebhookOutbox, settings: WebhookSettings, group: EventLoopGroup, logger: Logger,
        metrics: WebhookMetrics
    ) throws {
        var configuration = TLSConfiguration.client(trust: settings.caFile.map { .caFile($0) } ?? .systemDefault)
        configuration.offersHTTP1 = true
        configuration.handshakeTimeout = .seconds(Int64(settings.connectTimeoutSeconds))
        self.tls = try TLSContext(configuration)
        self.store = store
        self.outbox = outbox
        self.settings = settings
        self.group = group
        self.logger = logger
        self.metrics = metrics
    }

    /// Before the node takes commands: the outbox learns the active webhooks (so no command
    /// commits without their events) and whom to wake. Blocks on a read (start-up only).
    func prepare() throws {
        outbox.configure(base: nil) { [weak self] rows in self?.committed(rows) }
        outbox.load(try store.readNow { r in try r.webhooks() })
        metrics.subscribed(outbox.activeCount)
    }

    /// Once the node serves at `base` (`https://host:port/apps/<app id>`): each active webhook
    /// gets its lane (which delivers what a previous run left queued), unverified ones are verified.
    func start(base: String) async throws {
        outbox.configure(base: base, waker: nil)
        let (webhooks, depths) = try await store.read { r in (try r.webhooks(), try r.webhookQueueDepths()) }
        guard store.isShared else {
            draining.withLockedValue { $0 = true }
            for webhook in webhooks {
                metrics.queueDepth(webhook.id).set(Int64(depths[webhook.id] ?? 0))
                switch webhook.status {
                case .active: startLane(webhook)
                case .unverified: verifyInBackground(webhook)
                case .inactive: break
                }
            }
            return
        }
        for webhook in webhooks where webhook.status == .unverified { verifyInBackground(webhook) }
        startDepthRefresh()
        // Several nodes: lanes run only while this node holds the lease; the subscriptions
        // follow every node's management writes (a notification, and a reload per (re)connect).
        store.observeOutbox(
            .webhooks,
            OutboxObserver(
                held: { [weak self] held in self?.serial.enqueue { [weak self] in await self?.leaseChanged(held) } },
                wake: { [weak self] in self?.signalLanes() },
                subscriptionsChanged: { [weak self] in
                    self?.serial.enqueue { [weak self] in await self?.reloadSubscriptions() }
                }))
    }

    /// PostgreSQL: this node took (true) or lost (false) the webhooks' lease. Taken: a lane per
    /// active webhook, each starting from its oldest queued event (an event the previous holder
    /// had in flight is sent again, with its request id). Lost: every lane stops.
    private func leaseChanged(_ held: Bool) async {
        guard !stopped.withLockedValue({ $0 }) else { return }
        draining.withLockedValue { $0 = held }
        guard held else {
            let all = lanes.withLockedValue { l -> [UUID: WebhookLane] in
                defer { l = [:] }
                return l
            }
            for lane in all.values { await lane.stop() }
            return
        }
        do {
            let (webhooks, depths) = try await store.read { r in (try r.webhooks(), try r.webhookQueueDepths()) }
            for webhook in webhooks where webhook.status == .active {
                metrics.queueDepth(webhook.id).set(Int64(depths[webhook.id] ?? 0))
                startLane(webhook)
            }
        } catch {
            logger.error("webhook lease taken but the webhooks are unreadable", metadata: ["error": "\(error)"])
        }
    }

    /// PostgreSQL: reads the subscriptions again (another node changed them, or the listening
    /// connection is up again). Read in the writer, in commit order with this node's commands
    /// (as a management write sets them); the lanes follow when this node drains the outbox.
    private func reloadSubscriptions() async {
        guard !stopped.withLockedValue({ $0 }) else { return }
        let outbox = self.outbox
        let webhooks: [StoredWebhook]
        do {
            webhooks = try await store.write { tx in
                let webhooks = try tx.read.webhooks()
                outbox.load(webhooks)
                return webhooks
            }
        } catch {
            // The next (re)connect reads them again.
            logger.warning("webhook subscriptions not reloaded", metadata: ["error": "\(error)"])
            return
        }
        metrics.subscribed(outbox.activeCount)
        reloads.withLockedValue { $0 += 1 }
        guard draining.withLockedValue({ $0 }) else { return }
        let active = Dictionary(uniqueKeysWithValues: webhooks.filter { $0.status == .active }.map { ($0.id, $0) })
        for webhook in active.values { startLane(webhook) }
        for id in lanes.withLockedValue({ Array($0.keys) }) where active[id] == nil { await stopLane(id) }
    }

    private func signalLanes() {
        for lane in lanes.withLockedValue({ Array($0.values) }) { lane.signal() }
    }

    /// Stops every lane (queued events stay queued for the next start).
    func shutdown() async {
        stopped.withLockedValue { $0 = true }
        depthRefresh.withLockedValue { $0 }?.cancel()
        let all = lanes.withLockedValue { l -> [WebhookLane] in
            defer { l = [:] }
            return Array(l.values)
        }
        // Every lane first stops starting and fails what it has in flight (a lane waiting for
        // its target's slot waits on another lane's requests), then each is waited for.
        for lane in all { await lane.cancel() }
        for lane in all { await lane.stop() }
        // A lease change or reload under way ends (it starts nothing once stopped).
        await serial.drain()
        // A verification ends within its timeouts; it must not write after the store closes.
        for task in verifications.withLockedValue({ Array($0.values) }) { await task.value }
    }

    /// After a commit: the webhooks that got `rows` new events.
    private func committed(_ rows: [UUID: Int]) {
        if store.isShared, !draining.withLockedValue({ $0 }) {
            // Another node drains the outbox: it is told.
            store.wakeOutbox(.webhooks)
            return
        }
        for (id, count) in rows {
            // Shared: the gauge is the outbox's own count (``SharedQueueDepth``), not a tally.
            if !store.isShared { metrics.queueDepth(id).increment(by: Double(count)) }
            lanes.withLockedValue { $0[id] }?.signal()
        }
    }

    // MARK: Lanes

    /// Starts (or refreshes) the lane of an active webhook.
    func startLane(_ webhook: StoredWebhook) {
        guard !stopped.withLockedValue({ $0 }), draining.withLockedValue({ $0 }) else { return }
        let lane = lanes.withLockedValue { l -> WebhookLane? in
            if let existing = l[webhook.id] {
                existing.update(webhook)
                return existing
            }
            let lane = WebhookLane(webhook: webhook, delivery: self)
            l[webhook.id] = lane
            return lane
        }
        lane?.signal()
    }

    /// Stops the lane of a webhook that was deactivated or deleted.
    func stopLane(_ id: UUID) async {
        let lane = lanes.withLockedValue { $0.removeValue(forKey: id) }
        await lane?.stop()
    }

    func gate(for authority: String) -> TargetGate {
        gates.withLockedValue { g in
            if let gate = g[authority] { return gate }
            let gate = TargetGate(limit: settings.maxInFlightPerTarget)
            g[authority] = gate
            return gate
        }
    }

    /// The kept-alive connections of one webhook's lane to `target` (its addresses checked
    /// against the private-target rule on every connect).
    func pool(for target: WebhookTarget) -> HTTP1Pool {
        HTTP1Pool(
            host: target.host, port: target.port, tls: tls, group: group,
            connectTimeout: .seconds(Int64(settings.connectTimeoutSeconds)),
            maxIdle: settings.maxInFlightPerTarget
        ) { [weak self] in
            guard let self else { throw TransportError(.connectionClosed, "the webhook delivery stopped") }
            return try await self.connect(target)
        }
    }

    // MARK: Verification

    /// Verifies a new webhook's target in the background; on success it becomes active.
    /// When it fails the webhook stays unverified with the reason in its `status_reason`.
    func verifyInBackground(_ webhook: StoredWebhook) {
        let key = UUID()
        let task = Task {
            defer { _ = verifications.withLockedValue { $0.removeValue(forKey: key) } }
            guard !stopped.withLockedValue({ $0 }) else { return }
            switch await verify(webhook) {
            case .success:
                do { _ = try await activate(webhook.id, onlyIf: .unverified) } catch {
                    logger.error(
                        "webhook activation failed", metadata: ["webhook": "\(webhook.id)", "error": "\(error)"])
                }
            case .failure(let error):
                logger.warning(
                    "webhook target did not verify",
                    metadata: ["webhook": "\(webhook.id)", "reason": "\(error.reason)"])
                try? await verificationFailed(webhook.id, error)
            }
        }
        verifications.withLockedValue { $0[key] = task }
    }

    /// Keeps why an unverified webhook's target did not verify in its `status_reason`.
    func verificationFailed(_ id: UUID, _ error: WebhookTargetError) async throws {
        let reason = "the target did not verify: \(error.reason)"
        try await store.write { tx in
            guard try tx.read.webhook(id)?.status == .unverified else { return }
            try tx.setWebhookStatus(id, .unverified, reason: reason, at: .now())
        }
    }

    /// Layer's verification: `GET target_url?verification_challenge=<random>`, answered 200
    /// with the challenge as the body.
    func verify(_ webhook: StoredWebhook) async -> Result<Void, WebhookTargetError> {
        let target: WebhookTarget
        switch WebhookTarget.parse(webhook.targetURL) {
        case .success(let t): target = t
        case .failure(let e): return .failure(e)
        }
        let challenge: String
        do { challenge = try SecureRandom.bytes(16).map { String(format: "%02x", $0) }.joined() } catch {
            return .failure(.init("no random challenge: \(error)"))
        }
        var verification = target
        verification.path += (target.path.contains("?") ? "&" : "?") + "verification_challenge=\(challenge)"
        let headers: HeaderFields = [
            ("user-agent", Self.userAgent), ("layer-webhook-id", webhook.id.uuidString.lowercased()),
        ]
        do {
            let connection = try await connect(verification)
            defer { Task { await connection.close() } }
            let response = try await connection.request(
                method: .GET, path: verification.path, headers: headers, body: nil,
                timeout: .seconds(Int64(settings.responseTimeoutSeconds)),
                maxResponseBytes: WebhookLimits.maxResponseBytes)
            let body = String(buffer: response.body).trimmingCharacters(in: .whitespacesAndNewlines)
            guard response.status == 200, body == challenge else {
                return .failure(
                    .init("the target answered \(response.status) without echoing the verification challenge"))
            }
            return .success(())
        } catch let error as WebhookTargetError {
            return .failure(error)
        } catch {
            return .failure(.init("the verification request failed: \(error)"))
        }
    }

    /// Makes a webhook active (when its status is `onlyIf`, or any): stored, subscribed in the
    /// same transaction, its queued events due now, its lane started. The webhook, or nil when gone.
    func activate(_ id: UUID, onlyIf: StoredWebhook.Status? = nil) async throws -> StoredWebhook? {
        let outbox = self.outbox
        let now = Timestamp.now()
        let webhook = try await resyncing { tx -> StoredWebhook? in
            guard var w = try tx.read.webhook(id) else { return nil }
            if let onlyIf, w.status != onlyIf { return w }
            try tx.setWebhookStatus(id, .active, reason: nil, at: now)
            try tx.resetWebhookQueue(id, at: now)
            try tx.announceWebhookChange()
            outbox.setSubscription(id, events: w.events)
            w.status = .active
            w.statusReason = nil
            w.updatedAt = now
            return w
        }
        if let webhook, webhook.status == .active { startLane(webhook) }
        return webhook
    }

    /// Makes a webhook inactive with `reason`; stops its lane. The webhook, or nil when gone.
    func deactivate(_ id: UUID, reason: String) async throws -> StoredWebhook? {
        let outbox = self.outbox
        let now = Timestamp.now()
        let webhook = try await resyncing { tx -> StoredWebhook? in
            guard var w = try tx.read.webhook(id) else { return nil }
            try tx.setWebhookStatus(id, .inactive, reason: reason, at: now)
            try tx.announceWebhookChange()
            outbox.setSubscription(id, events: nil)
            w.status = .inactive
            w.statusReason = reason
            w.updatedAt = now
            return w
        }
        await stopLane(id)
        return webhook
    }

    /// Deletes a webhook and its queue; whether it existed.
    func delete(_ id: UUID) async throws -> Bool {
        let outbox = self.outbox
        let existed = try await resyncing { tx -> Bool in
            let existed = try tx.deleteWebhook(id)
            try tx.announceWebhookChange()
            outbox.setSubscription(id, events: nil)
            return existed
        }
        await stopLane(id)
        metrics.queueDepth(id).set(Int64(0))
        return existed
    }

    /// A management write that changes the outbox's subscriptions as its last step (in commit
    /// order with the commands); when the write fails, the subscriptions are read back from the
    /// store, so they never stay ahead of what committed.
    private func resyncing<T: Sendable>(_ body: @escaping @Sendable (StorageTransaction) throws -> T) async throws -> T
    {
        defer { metrics.subscribed(outbox.activeCount) }
        do {
            return try await store.write(body)
        } catch {
            if let webhooks = try? await store.read({ r in try r.webhooks() }) { outbox.load(webhooks) }
            throw error
        }
    }

    // MARK: Requests

    /// A connection to `target` (its addresses checked against the private-target rule).
    func connect(_ target: WebhookTarget) async throws -> HTTP1Connection {
        let addresses: [String]
        switch await target.addresses(allowPrivate: settings.allowPrivateTargets) {
        case .success(let a): addresses = a
        case .failure(let e): throw e
        }
        return try await HTTP1Connection.connect(
            host: target.host, address: addresses[0], port: target.port, tls: tls, group: group,
            connectTimeout: .seconds(Int64(settings.connectTimeoutSeconds)))
    }

    /// The request body of `event` for `webhook`: the payload rendered from the row's facts
    /// (``WebhookEvent``), with the webhook's `config`. A row queued as JSON (before rows held
    /// facts) is sent as it was, with the `config` added.
    static func body(_ event: QueuedWebhookEvent, _ webhook: StoredWebhook) throws -> [UInt8] {
        let config = try webhook.config.map { data in
            guard let value = ServerAPIJSON.value(data) else {
                throw WebhookEventFactsError("webhook \(webhook.id) has a config that is not JSON")
            }
            return value
        }
        if event.payload.first == WebhookEvent.factsFormat {
            let facts = try WebhookEvent(facts: event.payload)
            return Array(
                try facts.json(config: config, typeName: WebhookEventNames.name(of: facts.type, for: webhook.events)))
        }
        guard let config else { return Array(event.payload) }
        guard case .object(var object) = ServerAPIJSON.value(event.payload) else { return Array(event.payload) }
        object["config"] = config
        return Array(try ServerAPIJSON.encode(JSONValue.object(object)))
    }

    /// The name the webhook knows the event by (the row's name when it is none of ours).
    static func typeName(_ event: QueuedWebhookEvent, _ webhook: StoredWebhook) -> String {
        guard let type = WebhookEventType(rawValue: event.eventType) else { return event.eventType }
        return WebhookEventNames.name(of: type, for: webhook.events)
    }

    /// The request headers of one delivery.
    static func headers(_ event: QueuedWebhookEvent, _ webhook: StoredWebhook, body: [UInt8]) throws -> HeaderFields {
        [
            ("content-type", contentType), ("user-agent", userAgent),
            ("layer-webhook-event-type", typeName(event, webhook)),
            ("layer-webhook-signature", try HMACSHA1.hex(key: Array(webhook.secret.utf8), message: body)),
            ("layer-webhook-request-id", event.requestID.uuidString.lowercased()),
            ("layer-webhook-id", webhook.id.uuidString.lowercased()),
        ]
    }

    /// How one attempt ended.
    enum Outcome {
        case delivered
        /// Try again, no sooner than `after` seconds when the target said so.
        case retry(String, after: Int?)
        /// The target refused the event for good.
        case refused(String)
    }

    static func outcome(status: Int, headers: HeaderFields) -> Outcome {
        switch status {
        case 200..<300: return .delivered
        case 408, 429, 500..<600:
            return .retry("the target answered \(status)", after: RetryBackoff.retryAfter(headers))
        default: return .refused("the target answered \(status)")
        }
    }

    /// The delay before attempt `attempts + 1`: exponential from the initial backoff, capped,
    /// with jitter (half to all of it); at least `Retry-After` when the target sent one.
    static func backoff(attempts: Int, retryAfter: Int?, settings: WebhookSettings) -> Int64 {
        RetryBackoff(initialMilliseconds: settings.initialBackoffMilliseconds, maxSeconds: settings.maxBackoffSeconds)
            .delay(attempts: attempts, retryAfter: retryAfter)
    }

    func log(_ message: Logger.Message, _ metadata: Logger.Metadata, level: Logger.Level = .warning) {
        logger.log(level: level, message, metadata: metadata)
    }
}

/// Requests in flight to one target, at most `limit`; the others wait their turn (FIFO).
final class TargetGate: Sendable {
    private struct State {
        var inFlight = 0
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state = NIOLockedValueBox(State())
    private let limit: Int

    init(limit: Int) { self.limit = limit }

    /// Requests in flight and waiting.
    var counts: (inFlight: Int, waiting: Int) { state.withLockedValue { ($0.inFlight, $0.waiting.count) } }

    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLockedValue { s -> Bool in
                if s.inFlight < limit {
                    s.inFlight += 1
                    return true
                }
                s.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    func release() {
        let next = state.withLockedValue { s -> CheckedContinuation<Void, Never>? in
            if !s.waiting.isEmpty { return s.waiting.removeFirst() }  // the slot passes on
            s.inFlight -= 1
            return nil
        }
        next?.resume()
    }
}
