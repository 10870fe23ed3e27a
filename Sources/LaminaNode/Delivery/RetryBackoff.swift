import Foundation
import LaminaTransport

/// How the outboxes' deliveries (webhooks, pushes) space their retries: exponential from an
/// initial delay, capped, with jitter (half to all of it); at least `Retry-After` when the
/// receiver sent one.
struct RetryBackoff: Sendable, Hashable {
    var initialMilliseconds: Int
    var maxSeconds: Int

    /// The delay, in milliseconds, before attempt `attempts + 1`.
    func delay(attempts: Int, retryAfter: Int?) -> Int64 {
        let cap = Int64(maxSeconds) * 1_000
        let exponential = min(cap, Int64(initialMilliseconds) << Int64(min(max(attempts - 1, 0), 30)))
        var delay = Int64(Double(exponential) * Double.random(in: 0.5...1.0))
        if let retryAfter { delay = max(delay, min(cap, Int64(retryAfter) * 1_000)) }
        return max(1, delay)
    }

    /// A `Retry-After` given in seconds (the HTTP-date form is not honoured).
    static func retryAfter(_ headers: HeaderFields) -> Int? {
        headers["retry-after"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
    }
}
