import Foundation

/// `lamina_webhook_queue_depth_events` on a shared PostgreSQL store: one outbox, filled by every
/// node's commits and drained by whichever node holds the lease, so no node can keep the figure
/// by counting what it queued and delivered (the delivering node counted deliveries of events
/// others queued and went below zero). Every node instead reads the outbox's own count per
/// webhook every ``interval`` and sets its gauges to it: the same, truthful figure on every node,
/// a backlog showing while a target is down. On SQLite the node's own tally is exact and kept.
extension WebhookDelivery {
    /// How often the gauges follow the shared outbox.
    static let sharedDepthInterval: Duration = .seconds(1)

    /// Starts the refresh (PostgreSQL only); ended by ``shutdown()``.
    func startDepthRefresh() {
        guard store.isShared else { return }
        let task = Task { [weak self] in
            while !Task.isCancelled {
                await self?.refreshDepths()
                do { try await Task.sleep(for: Self.sharedDepthInterval) } catch { return }
            }
        }
        depthRefresh.withLockedValue { previous in
            previous?.cancel()
            previous = task
        }
    }

    /// Sets each webhook's gauge to the events queued for it in the shared outbox.
    func refreshDepths() async {
        do {
            let (webhooks, depths) = try await store.read { r in (try r.webhooks(), try r.webhookQueueDepths()) }
            for webhook in webhooks { metrics.queueDepth(webhook.id).set(Int64(depths[webhook.id] ?? 0)) }
        } catch {
            // The next round reads again (the store is reconnecting).
        }
    }
}
