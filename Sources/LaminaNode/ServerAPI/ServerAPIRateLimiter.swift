import Foundation
import NIOConcurrencyHelpers

/// A token bucket per Server API token: ``ServerAPISettings/burst`` requests at once,
/// refilled at ``ServerAPISettings/requestsPerSecond``.
final class ServerAPIRateLimiter: Sendable {
    private let rate: Double
    private let burst: Double
    private let buckets = NIOLockedValueBox<[Int: (level: Double, at: UInt64)]>([:])

    init(requestsPerSecond: Double, burst: Double) {
        self.rate = max(requestsPerSecond, 0.001)
        self.burst = max(burst, 1)
    }

    /// Takes one request for `token`; nil when admitted, else the whole seconds to wait.
    func admit(token: Int, now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> Int? {
        buckets.withLockedValue { buckets in
            var bucket = buckets[token] ?? (burst, now)
            let elapsed = Double(now &- bucket.at) / 1e9
            bucket.level = min(burst, bucket.level + elapsed * rate)
            bucket.at = now
            defer { buckets[token] = bucket }
            if bucket.level >= 1 {
                bucket.level -= 1
                return nil
            }
            return max(1, Int(((1 - bucket.level) / rate).rounded(.up)))
        }
    }
}
