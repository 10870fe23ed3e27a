import Foundation
import NIOConcurrencyHelpers

/// Token buckets by key, in one or more dimensions (e.g. commands and bytes): each dimension
/// holds up to its burst and refills at its rate per second; a take succeeds only when every
/// dimension has room, and then takes from all. Keys whose buckets are full again are
/// forgotten when the table grows past `pruneAt`, so memory follows the active keys.
final class TokenBuckets<Key: Hashable & Sendable>: Sendable {
    private let rates: [Double]
    private let bursts: [Double]
    private let pruneAt: Int
    private let buckets = NIOLockedValueBox<[Key: (levels: [Double], at: UInt64)]>([:])

    init(rates: [Double], bursts: [Double], pruneAt: Int = 10_000) {
        precondition(rates.count == bursts.count && !rates.isEmpty)
        self.rates = rates.map { max($0, 0.001) }
        self.bursts = bursts.map { max($0, 1) }
        self.pruneAt = pruneAt
    }

    /// Takes `costs` (one per dimension, each capped at its burst so any single request can
    /// pass once the bucket is full) for `key`: nil when admitted, else how long until it would be.
    func take(_ costs: [Double], for key: Key, now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> Duration? {
        buckets.withLockedValue { buckets in
            // In place: one lookup, and the levels are not copied (a copy would allocate).
            let wait = take(costs, from: &buckets[key, default: (bursts, now)], now: now)
            if buckets.count > pruneAt { prune(&buckets, now: now) }
            return wait == 0 ? nil : .nanoseconds(Int64((wait * 1e9).rounded(.up)))
        }
    }

    /// Refills `bucket` up to `now` and takes `costs` when every dimension has room; returns
    /// the seconds until it would have (0: taken).
    private func take(_ costs: [Double], from bucket: inout (levels: [Double], at: UInt64), now: UInt64) -> Double {
        let elapsed = Double(now &- bucket.at) / 1e9
        var wait = 0.0
        for i in rates.indices {
            bucket.levels[i] = min(bursts[i], bucket.levels[i] + elapsed * rates[i])
            let cost = min(costs[i], bursts[i])
            if bucket.levels[i] < cost { wait = max(wait, (cost - bucket.levels[i]) / rates[i]) }
        }
        bucket.at = now
        if wait == 0 {
            for i in rates.indices { bucket.levels[i] -= min(costs[i], bursts[i]) }
        }
        return wait
    }

    private func prune(_ buckets: inout [Key: (levels: [Double], at: UInt64)], now: UInt64) {
        buckets = buckets.filter { _, bucket in
            let elapsed = Double(now &- bucket.at) / 1e9
            return rates.indices.contains { bucket.levels[$0] + elapsed * rates[$0] < bursts[$0] }
        }
    }
}
