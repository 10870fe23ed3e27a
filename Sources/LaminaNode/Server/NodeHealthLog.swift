import Foundation
import Logging
import NIOConcurrencyHelpers

/// Logs, as it happens, what makes the node refuse clients (issue 15 item 10: the logs said
/// nothing when descriptors or session slots ran out). Every ``interval`` it looks at the
/// counts `/health/ready` uses (without its store probe: storage errors are logged where
/// they happen) and logs a warning when descriptors, connections or session slots become
/// nearly exhausted, a notice when they are back below, and how many connections, accepts
/// and sessions were refused since the last look. Quiet while nothing changes.
final class NodeHealthLog: Sendable {
    static let interval: Duration = .seconds(5)

    /// What one look sees.
    struct Counts: Sendable {
        var descriptors: (open: Int, limit: Int)?
        var connections: (open: Int, limit: Int)
        var sessions: (open: Int, limit: Int)
        var refusedConnections: Int
        var failedAccepts: Int
        var refusedSessions: Int
    }

    private let look: @Sendable () -> Counts
    private let logger: Logger
    private let last = NIOLockedValueBox<(counts: Counts, exhausted: Set<String>)?>(nil)
    private let task = NIOLockedValueBox<Task<Void, Never>?>(nil)

    init(logger: Logger, look: @escaping @Sendable () -> Counts) {
        self.logger = logger
        self.look = look
    }

    /// The warnings and notices for `now` after `before` (nil: the first look), and the
    /// limits nearly exhausted now.
    static func lines(_ now: Counts, after before: (counts: Counts, exhausted: Set<String>)?) -> (
        warnings: [String], notices: [String], exhausted: Set<String>
    ) {
        var warnings: [String] = []
        var notices: [String] = []
        var exhausted: Set<String> = []
        var usages = [("connections", now.connections), ("session slots", now.sessions)]
        if let d = now.descriptors { usages.insert(("file descriptors", d), at: 0) }
        for (name, usage) in usages where Double(usage.open) >= Double(usage.limit) * NodeHealth.nearlyExhausted {
            exhausted.insert(name)
            if !(before?.exhausted.contains(name) ?? false) {
                warnings.append(
                    "\(name) nearly exhausted: \(usage.open) of \(usage.limit); the node is not ready for new clients")
            }
        }
        for name in (before?.exhausted ?? []).subtracting(exhausted) { notices.append("\(name) below the limit again") }
        let previous = before?.counts
        let refusedConnections = now.refusedConnections - (previous?.refusedConnections ?? 0)
        if refusedConnections > 0 {
            warnings.append("refused \(refusedConnections) connections at the limit of \(now.connections.limit) open")
        }
        let failedAccepts = now.failedAccepts - (previous?.failedAccepts ?? 0)
        if failedAccepts > 0 {
            let fds = now.descriptors.map { " (file descriptors: \($0.open) of \($0.limit))" } ?? ""
            warnings.append("\(failedAccepts) accepts failed\(fds)")
        }
        let refusedSessions = now.refusedSessions - (previous?.refusedSessions ?? 0)
        if refusedSessions > 0 {
            warnings.append("refused \(refusedSessions) sessions (503): all \(now.sessions.limit) session slots taken")
        }
        return (warnings, notices, exhausted)
    }

    /// Looks once and logs what changed; returns the warnings (for tests).
    @discardableResult
    func check() -> [String] {
        let now = look()
        let (warnings, notices) = last.withLockedValue { last -> ([String], [String]) in
            let found = Self.lines(now, after: last)
            last = (now, found.exhausted)
            return (found.warnings, found.notices)
        }
        for line in warnings { logger.warning("\(line)") }
        for line in notices { logger.notice("\(line)") }
        return warnings
    }

    func start() {
        let loop = Task { [weak self] in
            while !Task.isCancelled {
                do { try await Task.sleep(for: Self.interval) } catch { return }
                self?.check()
            }
        }
        task.withLockedValue { $0 = loop }
    }

    func stop() {
        task.withLockedValue { t in
            t?.cancel()
            t = nil
        }
    }
}
