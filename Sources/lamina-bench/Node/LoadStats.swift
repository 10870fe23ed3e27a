import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#endif

/// Monotonic nanoseconds (CLOCK_MONOTONIC), one clock for send and receive in this process.
@inline(__always)
func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Sleeps until `target` (monotonic nanoseconds); returns at once when it has passed.
func sleepUntil(_ target: UInt64) {
    let now = monotonicNanos()
    guard target > now else { return }
    let d = target - now
    var ts = timespec(tv_sec: Int(d / 1_000_000_000), tv_nsec: Int(d % 1_000_000_000))
    nanosleep(&ts, nil)
}

/// Latencies (milliseconds) collected from any thread.
final class LoadLatencies: @unchecked Sendable {
    private let lock = NIOLock()
    private var values: [Double] = []

    init(capacity: Int = 0) { values.reserveCapacity(capacity) }

    func record(_ ms: Double) { lock.withLock { values.append(ms) } }
    func record(sentAt: UInt64, now: UInt64 = monotonicNanos()) { record(Double(now &- sentAt) / 1e6) }
    var count: Int { lock.withLock { values.count } }
    func snapshot() -> Percentiles { Percentiles(lock.withLock { values }) }
    func reset() { lock.withLock { values.removeAll(keepingCapacity: true) } }
}

/// p50/p90/p99/max of a sample, chosen as mqload does (index p × n of the sorted sample).
struct Percentiles {
    let sorted: [Double]
    init(_ values: [Double]) { sorted = values.sorted() }
    func q(_ p: Double) -> Double {
        guard !sorted.isEmpty else { return -1 }
        return sorted[min(Int(p * Double(sorted.count)), sorted.count - 1)]
    }
    var p50: Double { q(0.5) }
    var p90: Double { q(0.9) }
    var p99: Double { q(0.99) }
    var max: Double { q(1.0) }
    /// `p50=… p90=… p99=… max=…` in ms, two decimals (mqload's form).
    var fields: String { String(format: "p50=%.2f p90=%.2f p99=%.2f max=%.2f", p50, p90, p99, max) }
    var shortFields: String { String(format: "p50=%.2f p99=%.2f max=%.2f", p50, p99, max) }
}

/// Counters bumped from event loops.
final class LoadCounter: @unchecked Sendable {
    private let lock = NIOLock()
    private var value = 0
    func add(_ n: Int = 1) { lock.withLock { value += n } }
    func addAndGet(_ n: Int = 1) -> Int {
        lock.withLock {
            value += n
            return value
        }
    }
    var current: Int { lock.withLock { value } }
}

/// One run's `key=value` summary, for the per-side median and spread over rounds.
struct RunSummary {
    var side: String
    var line: String
    var values: [String: Double]

    /// Reads every `key=number` of `line` (a `latency_ms p99=…` field is `p99`).
    static func parse(side: String, line: String) -> RunSummary {
        var values: [String: Double] = [:]
        for token in line.split(separator: " ") {
            guard let eq = token.firstIndex(of: "=") else { continue }
            let key = String(token[..<eq])
            var number = token[token.index(after: eq)...]
            while let last = number.last, !(last.isNumber || last == ".") { number = number.dropLast() }
            if let v = Double(number), values[key] == nil { values[key] = v }
        }
        return RunSummary(side: side, line: line, values: values)
    }
}

/// Median and min–max of `key` over `runs`, e.g. `cpu_us_per_delivered median=64.1 (62.0–66.3, 3 rounds)`.
func spread(_ key: String, _ runs: [RunSummary], format: String = "%.1f") -> String {
    let v = runs.compactMap { $0.values[key] }.sorted()
    guard !v.isEmpty else { return "\(key) n/a" }
    let median = v.count % 2 == 1 ? v[v.count / 2] : (v[v.count / 2 - 1] + v[v.count / 2]) / 2
    return
        "\(key) median=\(String(format: format, median)) (\(String(format: format, v.first!))–\(String(format: format, v.last!)), \(v.count) rounds)"
}

/// Writes a line to standard output now (runs are long; nothing waits in a buffer).
func emit(_ line: String) {
    print(line)
    fflush(nil)
}

/// Progress on standard error.
func progress(_ mode: String, _ text: String) {
    FileHandle.standardError.write(Data("\(mode): \(text)\n".utf8))
}
