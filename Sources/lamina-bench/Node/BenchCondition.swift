/// Waiting for a condition a benchmark phase ends on.
enum BenchCondition {
    /// Polls `condition` every `interval` until it holds; fails after `timeout` seconds, saying
    /// where it stood (`progress`). A
    /// condition that scrapes the node's `/metrics` polls slowly (each scrape costs the node a
    /// render and a count of its descriptors), one on local counters quickly.
    static func until(
        _ what: String, timeout: Double, every interval: Duration = .milliseconds(20),
        progress: () -> String = { "" }, _ condition: () throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while try !condition() {
            guard ContinuousClock.now < deadline else {
                throw BenchFailure("\(what): not within \(timeout) s \(progress())")
            }
            try await Task.sleep(for: interval)
        }
    }
}
