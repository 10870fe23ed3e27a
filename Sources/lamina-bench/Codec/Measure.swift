import Foundation

/// Keeps a value observable so the optimizer cannot drop the work that produced it.
@inline(never) @_optimize(none)
func blackHole<T>(_ value: T) {}

/// Throughput of one operation: the median of several timed rounds.
struct Throughput {
    /// Operations per second in the median round.
    var perSecond: Double
    /// The slowest and the fastest round, in operations per second.
    var slowest: Double
    var fastest: Double
    /// Operations timed in all rounds together.
    var operations: Int
}

/// How long to warm up and how to split the timed work into rounds.
struct MeasureSettings {
    var warmUp: Duration = .milliseconds(300)
    var roundDuration: Duration = .milliseconds(50)
    var rounds = 21
}

/// Times `body`, which performs `batch` operations per call: warms up (which also sizes the
/// rounds to about `roundDuration`), then runs `rounds` rounds and reports the median rate.
func measure(_ settings: MeasureSettings, batch: Int, _ body: () -> Void) -> Throughput {
    let clock = ContinuousClock()
    var calls = 0
    let warmStart = clock.now
    repeat {
        body()
        calls += 1
    } while clock.now - warmStart < settings.warmUp
    let perCall = (clock.now - warmStart) / calls
    let callsPerRound = max(1, Int((settings.roundDuration / perCall).rounded(.up)))
    var rates: [Double] = []
    rates.reserveCapacity(settings.rounds)
    for _ in 0..<settings.rounds {
        let start = clock.now
        for _ in 0..<callsPerRound { body() }
        let elapsed = clock.now - start
        rates.append(Double(callsPerRound * batch) / elapsed.seconds)
    }
    rates.sort()
    return Throughput(
        perSecond: rates[rates.count / 2],
        slowest: rates[0],
        fastest: rates[rates.count - 1],
        operations: settings.rounds * callsPerRound * batch
    )
}

extension Duration {
    var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }
}
