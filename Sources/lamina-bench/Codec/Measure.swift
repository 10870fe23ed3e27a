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
    withoutActuallyEscaping(body) { measure(settings, batch: batch, [$0])[0] }
}

/// Times several bodies (e.g. Lamina's and protobuf's decode of the same content) with their
/// rounds interleaved (A, B, A, B, ...), so a change in machine load hits each alike.
func measure(_ settings: MeasureSettings, batch: Int, _ bodies: [() -> Void]) -> [Throughput] {
    let clock = ContinuousClock()
    let callsPerRound = bodies.map { body in
        var calls = 0
        let warmStart = clock.now
        repeat {
            body()
            calls += 1
        } while clock.now - warmStart < settings.warmUp
        let perCall = (clock.now - warmStart) / calls
        return max(1, Int((settings.roundDuration / perCall).rounded(.up)))
    }
    var rates = [[Double]](repeating: [], count: bodies.count)
    for _ in 0..<settings.rounds {
        for (i, body) in bodies.enumerated() {
            let start = clock.now
            for _ in 0..<callsPerRound[i] { body() }
            let elapsed = clock.now - start
            rates[i].append(Double(callsPerRound[i] * batch) / elapsed.seconds)
        }
    }
    return rates.indices.map { i in
        let sorted = rates[i].sorted()
        return Throughput(
            perSecond: sorted[sorted.count / 2],
            slowest: sorted[0],
            fastest: sorted[sorted.count - 1],
            operations: settings.rounds * callsPerRound[i] * batch
        )
    }
}

extension Duration {
    var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }
}
