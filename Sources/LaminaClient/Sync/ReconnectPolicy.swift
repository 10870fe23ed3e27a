import LaminaModel

/// When to reconnect after a lost stream: exponential backoff with jitter. Pure: the
/// attempt number and a random value in 0..<1 go in, a delay comes out.
///
/// The delay before attempt `n` (0 for the first retry) is `base(n) * (1 - jitter * r)`,
/// with `base(n) = min(maxDelay, initialDelay * multiplier^n)`: in `[base(n) * (1 - jitter), base(n)]`.
public struct ReconnectPolicy: Hashable, Sendable {
    public var initialDelay: Duration
    public var multiplier: Double
    public var maxDelay: Duration
    /// The fraction of the delay that is randomised, 0...1.
    public var jitter: Double

    public init(
        initialDelay: Duration = .milliseconds(500), multiplier: Double = 2, maxDelay: Duration = .seconds(60),
        jitter: Double = 0.5
    ) {
        self.initialDelay = initialDelay
        self.multiplier = multiplier
        self.maxDelay = maxDelay
        self.jitter = jitter
    }

    /// The longest allowed `maxDelay`: one hour.
    public static let maxAllowedDelay: Duration = .seconds(3_600)

    /// Checks every setting's range.
    public func validate() throws(ClientError) {
        guard initialDelay > .zero, initialDelay <= maxDelay else {
            throw ClientError(
                .invalidSetting, "the initial reconnect delay must be positive and at most the maximum delay")
        }
        guard maxDelay <= Self.maxAllowedDelay else {
            throw ClientError(
                .invalidSetting, "the maximum reconnect delay is at most \(Self.maxAllowedDelay), not \(maxDelay)")
        }
        guard multiplier >= 1, multiplier <= 16 else {
            throw ClientError(.invalidSetting, "the reconnect multiplier is 1...16, not \(multiplier)")
        }
        guard jitter >= 0, jitter <= 1 else {
            throw ClientError(.invalidSetting, "the reconnect jitter is 0...1, not \(jitter)")
        }
    }

    /// The delay without jitter before attempt `attempt` (0-based).
    public func baseDelay(attempt: Int) -> Duration {
        let initial = Self.seconds(initialDelay)
        let cap = Self.seconds(maxDelay)
        var value = initial
        var n = 0
        while n < min(max(0, attempt), 64), value < cap {  // at most 64 steps
            value *= multiplier
            n += 1
        }
        return .milliseconds(Int64((min(value, cap) * 1_000).rounded(.down)))
    }

    /// The delay before attempt `attempt`, jittered by `random` (clamped to 0..<1).
    public func delay(attempt: Int, random: Double) -> Duration {
        let r = random.isFinite ? min(max(random, 0), 1) : 0
        let base = Self.seconds(baseDelay(attempt: attempt))
        return .milliseconds(Int64((base * (1 - jitter * r) * 1_000).rounded(.down)))
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}
