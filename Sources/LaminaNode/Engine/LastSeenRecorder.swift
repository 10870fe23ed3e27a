import Atomics
import Foundation
import LaminaModel
import LaminaStore
import NIOConcurrencyHelpers

/// Keeps `lastSeenAt` across restarts (SPEC §6.6) at the cost of one batched write, never one
/// per presence change or heartbeat: each time a user goes offline (as others see them) the
/// time is noted in memory, and every ``flushInterval`` the times noted since the last flush
/// are written in one transaction (a user who came and went several times in between is one
/// row). The engine flushes once more as it shuts down, after its sessions ended.
final class LastSeenRecorder: Sendable {
    /// How long a noted time may wait before it is written.
    static let flushInterval: Duration = .seconds(2)
    /// The most rows one transaction writes (a larger batch takes several).
    static let maxRowsPerTransaction = 2_000

    private let pending = NIOLockedValueBox<[UserID: Timestamp]>([:])
    private let task = NIOLockedValueBox<Task<Void, Never>?>(nil)
    /// Transactions written since the start.
    let transactions = ManagedAtomic(0)
    /// Rows written since the start.
    let rows = ManagedAtomic(0)

    init() {}

    /// Notes that `user` was last seen at `time`.
    func note(_ user: UserID, at time: Timestamp) {
        pending.withLockedValue { p in
            if let held = p[user], held >= time { return }
            p[user] = time
        }
    }

    /// Starts writing what was noted every ``flushInterval`` to `store`.
    func start(_ store: NodeStore) {
        let loop = Task { [weak self] in
            while !Task.isCancelled {
                do { try await Task.sleep(for: Self.flushInterval) } catch { return }
                guard let self else { return }
                await self.flush(to: store)
            }
        }
        task.withLockedValue { $0 = loop }
    }

    /// Stops the periodic writes (``flush(to:)`` still writes what is left).
    func stop() { task.withLockedValue { $0?.cancel() } }

    /// Writes every time noted so far; a failed write keeps them for the next flush (an earlier
    /// time never replaces a later one noted meanwhile).
    func flush(to store: NodeStore) async {
        let batch = pending.withLockedValue { p -> [UserID: Timestamp] in
            defer { p = [:] }
            return p
        }
        guard !batch.isEmpty else { return }
        let entries = Array(batch)
        for start in stride(from: 0, to: entries.count, by: Self.maxRowsPerTransaction) {
            let chunk = Dictionary(
                uniqueKeysWithValues: entries[start..<min(start + Self.maxRowsPerTransaction, entries.count)].map {
                    ($0.key, $0.value)
                })
            do {
                try await store.write { tx in try tx.recordLastSeen(chunk) }
                transactions.wrappingIncrement(ordering: .relaxed)
                rows.wrappingIncrement(by: chunk.count, ordering: .relaxed)
            } catch {
                for (user, time) in chunk { note(user, at: time) }
            }
        }
    }
}

extension NodeEngine {
    /// Last-seen transactions and rows written since the start (tests and `lamina-bench presence`).
    public var lastSeenWrites: LastSeenWrites {
        LastSeenWrites(
            transactions: lastSeen.transactions.load(ordering: .relaxed), rows: lastSeen.rows.load(ordering: .relaxed))
    }
}

/// Counts of last-seen writes (``NodeEngine/lastSeenWrites``).
public struct LastSeenWrites: Equatable, Sendable {
    public var transactions: Int
    public var rows: Int
}
