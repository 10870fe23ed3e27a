import Foundation
import LaminaModel
import LaminaStore
import Logging
import NIOConcurrencyHelpers

/// Deletes what the node keeps only for a while: expired nonces (the engine's ``NonceTable``,
/// and rows an earlier version stored), expired sessions,
/// idempotency records older than ``idempotencyRetention`` (SPEC §7: request ids are
/// remembered for at least 7 days), and feed entries every recent device has (``feedRetention``). Runs every interval (`NodeResourceLimits.pruneIntervalSeconds`)
/// until cancelled; one write transaction per run.
public final class StoragePruner: Sendable {
    /// How long an idempotency record is kept (the spec's promise: at least 7 days).
    public static let idempotencyRetention: Duration = .seconds(7 * 24 * 3600)
    /// How long a device may stay away and still catch up from the feed: a feed is pruned
    /// through what every device seen within this time has acknowledged; a device away longer
    /// gets a snapshot of the user's conversations instead (SPEC §6.3).
    public static let feedRetention: Duration = .seconds(30 * 24 * 3600)

    /// What one run deleted.
    public struct Pruned: Sendable, Equatable {
        public var nonces = 0
        public var sessions = 0
        public var idempotencyRecords = 0
        public var feedEntries = 0

        public init(nonces: Int = 0, sessions: Int = 0, idempotencyRecords: Int = 0, feedEntries: Int = 0) {
            self.nonces = nonces
            self.sessions = sessions
            self.idempotencyRecords = idempotencyRecords
            self.feedEntries = feedEntries
        }
    }

    private let store: NodeStore
    private let nonces: NonceTable?
    private let logger: Logger
    private let task = NIOLockedValueBox<Task<Void, Never>?>(nil)
    private let totals = NIOLockedValueBox((runs: 0, pruned: Pruned()))

    package init(store: NodeStore, nonces: NonceTable? = nil, logger: Logger) {
        self.store = store
        self.nonces = nonces
        self.logger = logger
    }

    /// Runs since the start, and everything they deleted.
    public var history: (runs: Int, pruned: Pruned) { totals.withLockedValue { $0 } }

    /// Prunes as of `now` (expired before it; idempotency records older than the retention).
    @discardableResult
    public func run(now: Timestamp = .now()) async throws -> Pruned {
        let oldest = now.adding(.zero - Self.idempotencyRetention)
        let seen = now.adding(.zero - Self.feedRetention)
        let inMemory = nonces?.prune(now: now) ?? 0
        var pruned = try await store.write { tx -> Pruned in
            Pruned(
                nonces: try tx.pruneNonces(expiredBefore: now),
                sessions: try tx.pruneSessions(expiredBefore: now),
                idempotencyRecords: try tx.pruneIdempotencyRecords(before: oldest),
                feedEntries: try tx.pruneFeeds(devicesSeenSince: seen))
        }
        pruned.nonces += inMemory
        totals.withLockedValue {
            $0.runs += 1
            $0.pruned.nonces += pruned.nonces
            $0.pruned.sessions += pruned.sessions
            $0.pruned.idempotencyRecords += pruned.idempotencyRecords
            $0.pruned.feedEntries += pruned.feedEntries
        }
        if pruned != Pruned() {
            logger.debug(
                "pruned the store",
                metadata: [
                    "nonces": "\(pruned.nonces)", "sessions": "\(pruned.sessions)",
                    "idempotencyRecords": "\(pruned.idempotencyRecords)",
                    "feedEntries": "\(pruned.feedEntries)",
                ])
        }
        return pruned
    }

    /// Runs every `interval` (the first after one interval) until ``stop()``. A failed run is
    /// logged and the next one tries again.
    public func start(every interval: Duration) {
        let loop = Task { [weak self] in
            while !Task.isCancelled {
                do { try await Task.sleep(for: interval) } catch { return }
                guard let self else { return }
                do { try await self.run() } catch {
                    self.logger.error("pruning the store failed", metadata: ["error": "\(error)"])
                }
            }
        }
        task.withLockedValue { $0 = loop }
    }

    /// Stops the schedule and waits for a run in progress.
    public func stop() async {
        let loop = task.withLockedValue { t -> Task<Void, Never>? in
            defer { t = nil }
            return t
        }
        loop?.cancel()
        await loop?.value
    }
}
