/// Waiting for a condition a benchmark phase ends on.
enum BenchCondition {
    /// Polls `condition` every 20 ms until it holds; fails after `timeout` seconds.
    static func until(_ what: String, timeout: Double, _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while try !condition() {
            guard ContinuousClock.now < deadline else { throw BenchFailure("\(what): not within \(timeout) s") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
