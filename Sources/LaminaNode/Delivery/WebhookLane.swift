import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import NIOConcurrencyHelpers
import NIOCore

/// One webhook's delivery loop. Events start in commit order, up to the in-flight bound at
/// once (each on a kept-alive connection of the lane's pool); a slot is refilled as soon as
/// its request ends, and the outcomes are recorded in batches by a settler beside the loop,
/// so no commit holds a slot. When an attempt fails, nothing later starts: once everything
/// held is recorded, the lane reads its queue again from the oldest event, and an event
/// being retried goes alone (nothing starts beside or after it until it has been delivered),
/// so a retry never lets a later event overtake it.
final class WebhookLane: Sendable {
    private let webhook: NIOLockedValueBox<StoredWebhook>
    private let signals = LaneSignal()
    private let task: NIOLockedValueBox<Task<Void, Never>?> = NIOLockedValueBox(nil)
    /// Kept-alive connections to the target, up to the in-flight bound (closed by ``stop()``,
    /// which fails the requests in flight at once instead of waiting for their timeout).
    private let pool: HTTP1Pool?

    init(webhook: StoredWebhook, delivery: WebhookDelivery) {
        self.webhook = NIOLockedValueBox(webhook)
        if case .success(let target) = WebhookTarget.parse(webhook.targetURL) {
            pool = delivery.pool(for: target)
        } else {
            pool = nil
        }
        let task = Task { [webhook = self.webhook, pool, signals] in
            await Self.run(webhook: webhook, delivery: delivery, signals: signals, pool: pool)
        }
        self.task.withLockedValue { $0 = task }
    }

    func update(_ webhook: StoredWebhook) { self.webhook.withLockedValue { $0 = webhook } }

    /// Something was queued (or the webhook changed, or was activated again): look again,
    /// also if waiting for an event's next attempt.
    func signal() { signals.signal() }

    /// Starts nothing new from now on; the requests in flight fail at once.
    func cancel() async {
        signals.finish()
        task.withLockedValue { $0 }?.cancel()
        await pool?.close()
    }

    /// Cancels and waits for the lane to end.
    func stop() async {
        await cancel()
        await task.withLockedValue { $0 }?.value
    }

    /// The events a lane holds: being sent, and sent but not yet recorded (both still queued rows).
    private struct Held {
        var sending = 0
        /// The seq of a retried event being sent (nothing else starts meanwhile).
        var alone: Int64?
        var settling = 0
        var finished: [(QueuedWebhookEvent, WebhookDelivery.Outcome)] = []
        /// An attempt failed (or its outcome was not recorded): nothing new starts until
        /// everything held is recorded; then the queue is read again from its oldest event.
        var failed = false
        /// The webhook was deactivated by its failures: the lane ends.
        var ended = false
    }

    /// Finished attempts waiting to be recorded, in multiples of the in-flight bound, past
    /// which the lane starts nothing new (the store is the limit).
    static let unsettledFactor = 4
    /// Events read ahead of the free slots, in multiples of the in-flight bound (one read
    /// serves several slots).
    static let readAheadFactor = 4

    private static func run(
        webhook: NIOLockedValueBox<StoredWebhook>, delivery: WebhookDelivery, signals: LaneSignal, pool: HTTP1Pool?
    ) async {
        let id = webhook.withLockedValue { $0.id }
        let limit = delivery.settings.maxInFlightPerTarget
        let gate = webhook.withLockedValue { w in
            (try? WebhookTarget.parse(w.targetURL).get()).map { delivery.gate(for: $0.authority) }
        }
        let held = NIOLockedValueBox(Held())
        let settler = LaneSignal()
        // The last event started (the ones up to it are held, or after a failure queued again)
        // and the events read after it, not yet started.
        var cursor: Int64 = 0
        var ahead: [QueuedWebhookEvent] = []
        await withDiscardingTaskGroup { group in
            group.addTask {
                while await settler.wait(timeout: nil) {
                    let done = held.withLockedValue { h -> [(QueuedWebhookEvent, WebhookDelivery.Outcome)] in
                        defer { h.finished = [] }
                        return h.finished
                    }
                    guard !done.isEmpty else { continue }
                    let result = await settle(done, id: id, delivery: delivery)
                    held.withLockedValue { h in
                        h.settling -= done.count
                        if result == .unrecorded { h.failed = true }
                        if result == .deactivated { h.ended = true }
                    }
                    signals.signal()
                }
            }
            while !Task.isCancelled {
                let state = held.withLockedValue { $0 }
                if state.ended { break }
                if state.failed {
                    // Everything held recorded first: then the failed event is the oldest queued.
                    if state.sending == 0 && state.settling == 0 {
                        held.withLockedValue { $0.failed = false }
                        cursor = 0
                        ahead = []
                        continue
                    }
                    guard await signals.wait(timeout: .seconds(1)) else { break }
                    continue
                }
                let free = limit - state.sending
                guard free > 0, state.alone == nil, state.settling <= limit * unsettledFactor else {
                    guard await signals.wait(timeout: .seconds(1)) else { break }
                    continue
                }
                if ahead.isEmpty {
                    do {
                        let after = cursor
                        ahead = try await delivery.store.read { r in
                            try r.queuedWebhookEvents(of: id, after: after, limit: limit * readAheadFactor)
                        }
                    } catch {
                        if Task.isCancelled { break }
                        delivery.log(
                            "webhook queue unreadable", ["webhook": "\(id)", "error": "\(error)"], level: .error)
                        guard await signals.wait(timeout: .seconds(1)) else { break }
                        continue
                    }
                }
                // Start what is due, in commit order, into the free slots.
                var started = 0
                var dueIn: Int64?
                while started < free, let event = ahead.first {
                    let wait = event.nextAttemptAt.millisecondsSince1970 - Timestamp.now().millisecondsSince1970
                    if wait > 0 {
                        // Later events wait behind this one (an activation makes it due at once and
                        // signals: the events are read again then).
                        dueIn = wait
                        ahead = []
                        break
                    }
                    let retry = event.attempts > 0
                    // A retry goes alone: once the events in flight have ended.
                    if retry && state.sending + started > 0 { break }
                    ahead.removeFirst()
                    cursor = event.seq
                    started += 1
                    held.withLockedValue { h in
                        h.sending += 1
                        if retry { h.alone = event.seq }
                    }
                    // Requests start in commit order: the target's slot is taken here, in turn.
                    await gate?.acquire()
                    let current = webhook.withLockedValue { $0 }
                    group.addTask {
                        let outcome = await attempt(event, current, delivery: delivery, pool: pool)
                        gate?.release()
                        held.withLockedValue { h in
                            h.sending -= 1
                            h.settling += 1
                            if h.alone == event.seq { h.alone = nil }
                            if case .retry = outcome { h.failed = true }
                            h.finished.append((event, outcome))
                        }
                        settler.signal()
                        signals.signal()
                    }
                    if retry { break }
                }
                if started > 0 && started == free { continue }
                let idle = started == 0 && state.sending == 0 && state.settling == 0
                // Read again when the read-ahead ran out and slots are free (new events signal).
                if ahead.isEmpty && started > 0 { continue }
                let timeout: Duration? = dueIn.map { .milliseconds($0) } ?? (idle ? delivery.idlePoll : .seconds(1))
                guard await signals.wait(timeout: timeout) else { break }
            }
            settler.finish()
            group.cancelAll()
        }
        // Attempts that ended while the lane stopped: what was delivered or refused is recorded
        // (the others stay queued as they were).
        let rest = held.withLockedValue { $0.finished }.filter { finished in
            if case .retry = finished.1 { return false }
            return true
        }
        if !rest.isEmpty { _ = await settle(rest, id: id, delivery: delivery, stopping: true) }
    }

    private static func attempt(
        _ event: QueuedWebhookEvent, _ webhook: StoredWebhook, delivery: WebhookDelivery, pool: HTTP1Pool?
    ) async -> WebhookDelivery.Outcome {
        let target: WebhookTarget
        switch WebhookTarget.parse(webhook.targetURL) {
        case .success(let t): target = t
        case .failure(let e): return .retry(e.reason, after: nil)
        }
        guard let pool, !Task.isCancelled else { return .retry("stopped", after: nil) }
        do {
            let body = try WebhookDelivery.body(event, webhook)
            let headers = try WebhookDelivery.headers(event, webhook, body: body)
            // A kept-alive connection the target closed while idle is no failure of the target:
            // the pool sends the request once more on a new connection.
            let response = try await pool.request(
                method: .POST, path: target.path, headers: headers, body: ByteBuffer(bytes: body),
                timeout: .seconds(Int64(delivery.settings.responseTimeoutSeconds)),
                maxResponseBytes: WebhookLimits.maxResponseBytes)
            return WebhookDelivery.outcome(status: response.status, headers: response.headers)
        } catch {
            return .retry("\(error)", after: nil)
        }
    }

    /// How recording a batch ended.
    private enum Settled { case recorded, unrecorded, deactivated }

    /// Records how a batch of attempts ended, in one transaction: delivered and refused events
    /// leave the queue, failed ones are rescheduled; an event failing for the retry period
    /// deactivates the webhook.
    private static func settle(
        _ outcomes: [(QueuedWebhookEvent, WebhookDelivery.Outcome)], id: UUID, delivery: WebhookDelivery,
        stopping: Bool = false
    ) async -> Settled {
        let now = Timestamp.now()
        var removed: [Int64] = []
        var rescheduled: [(QueuedWebhookEvent, attempts: Int, next: Timestamp, delay: Int64, reason: String)] = []
        var unhealthy: String?
        for (event, outcome) in outcomes {
            switch outcome {
            case .delivered, .refused: removed.append(event.seq)
            case .retry(let reason, let after):
                let age = now.millisecondsSince1970 - event.createdAt.millisecondsSince1970
                if age >= Int64(delivery.settings.retryPeriodSeconds) * 1_000 {
                    unhealthy = unhealthy ?? reason
                    continue
                }
                let attempts = event.attempts + 1
                let delay = WebhookDelivery.backoff(attempts: attempts, retryAfter: after, settings: delivery.settings)
                rescheduled.append(
                    (
                        event, attempts, Timestamp(millisecondsSince1970: now.millisecondsSince1970 + delay), delay,
                        reason
                    ))
            }
        }
        let (done, again) = (removed, rescheduled.map { ($0.0.seq, $0.attempts, $0.next) })
        do {
            try await delivery.store.write { tx in
                try tx.removeWebhookEvents(done)
                for (seq, attempts, next) in again {
                    try tx.rescheduleWebhookEvent(seq, attempts: attempts, next: next)
                }
            }
        } catch {
            delivery.log("webhook queue update failed", ["webhook": "\(id)", "error": "\(error)"], level: .error)
            if !stopping { try? await Task.sleep(for: .seconds(1)) }
            return .unrecorded
        }
        for (event, outcome) in outcomes {
            switch outcome {
            case .delivered:
                delivery.metrics.delivered(id)
                if !delivery.store.isShared { delivery.metrics.queueDepth(id).decrement() }
            case .refused(let reason):
                delivery.metrics.failed(id)
                if !delivery.store.isShared { delivery.metrics.queueDepth(id).decrement() }
                delivery.log(
                    "webhook event refused by its target and dropped",
                    ["webhook": "\(id)", "request": "\(event.requestID)", "reason": "\(reason)"])
            case .retry: break
            }
        }
        for (event, attempts, _, delay, reason) in rescheduled {
            delivery.metrics.retried(id)
            delivery.log(
                "webhook delivery failed; retrying",
                [
                    "webhook": "\(id)", "request": "\(event.requestID)", "attempt": "\(attempts)", "in_ms": "\(delay)",
                    "reason": "\(reason)",
                ], level: .info)
        }
        if let unhealthy {
            let why = "unhealthy: deliveries failed for \(delivery.settings.retryPeriodSeconds) s (last: \(unhealthy))"
            delivery.metrics.deactivated(id)
            delivery.log("webhook deactivated", ["webhook": "\(id)", "reason": "\(why)"], level: .error)
            Task { _ = try? await delivery.deactivate(id, reason: why) }
            return .deactivated
        }
        return .recorded
    }
}
