import Foundation

/// Keeps a value observable so the optimizer cannot drop the work that produced it.
@inline(never) @_optimize(none)
func blackHole<T>(_ value: T) {}

/// Throughput of one operation, from the median of several timed rounds.
struct Throughput {
    /// Operations per second (median round).
    var perSecond: Double
    /// Spread of the rounds: slowest and fastest rate, per second.
    var slowest: Double
    var fastest: Double
    /// Operations timed in all rounds together.
    var operations: Int
}

/// Times `operation` (which performs `batch` operations per call, e.g. decodes `batch`
/// frames): warms up for `warmUp`, sizes rounds to last about `roundDuration`, runs
/// `rounds` rounds and reports the median rate.
func measure(
    warmUp: Duration = .milliseconds(200),
    roundDuration: Duration = .milliseconds(50),
    rounds: Int = 21,
    _ operation: () -> Void
) -> Throughput {
    let clock = ContinuousClock()
    // Warm up, and learn how many calls fill a round.
    var calls = 0
    let warmStart = clock.now
    while clock.now - warmStart < warmUp {
        operation()
        calls += 1
    }
    let perCall = (clock.now - warmStart) / max(calls, 1)
    let callsPerRound = max(1, Int((roundDuration / perCall).rounded(.up)))
    var rates: [Double] = []
    for _ in 0..<rounds {
        let start = clock.now
        for _ in 0..<callsPerRound { operation() }
        let elapsed = clock.now - start
        rates.append(Double(callsPerRound) / elapsed.seconds)
    }
    rates.sort()
    return Throughput(perSecond: rates[rates.count / 2], slowest: rates[0], fastest: rates[rates.count - 1], operations: rounds * callsPerRound)
}

extension Duration {
    var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }
}
