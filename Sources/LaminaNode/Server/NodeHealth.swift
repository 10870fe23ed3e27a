import Foundation
import LaminaStore
import LaminaTransport
import NIOConcurrencyHelpers

/// What `/health/ready` reports: each check of the node with its state. The node is ready
/// when every check passes.
public struct NodeReadiness: Sendable {
    /// One thing the node needs to take traffic.
    public struct Check: Sendable, Hashable {
        public var name: String
        public var ok: Bool
        /// Figures or the reason of a failure, for the operator.
        public var detail: String
    }

    public var checks: [Check]

    /// Every check passes.
    public var isReady: Bool { checks.allSatisfy(\.ok) }

    /// `ready` or `not ready`, then one line per check: `name ok|failing detail`.
    public var text: String {
        var out = isReady ? "ready\n" : "not ready\n"
        for check in checks { out += "\(check.name) \(check.ok ? "ok" : "failing") \(check.detail)\n" }
        return out
    }
}

/// Liveness and readiness of a running node (the admin port's `/health/live` and
/// `/health/ready`). Ready means: not shutting down; the store took a write recently (a
/// probe commit at most every ``probeInterval`` while it succeeds, at every request while it
/// fails, answered within ``probeTimeout``), its latest group commit did not fail and no
/// storage error came after the latest commit without one; file descriptors (against the soft `RLIMIT_NOFILE` as it is now),
/// connections and session slots below ``nearlyExhausted`` of their limits.
final class NodeHealth: Sendable {
    /// The share of a limit above which the node reports itself not ready (a load balancer
    /// then sends new clients elsewhere while the node still serves the ones it has).
    static let nearlyExhausted = 0.95
    static let probeInterval: Duration = .seconds(5)
    static let probeTimeout: Duration = .seconds(2)

    private let store: NodeStore
    private let sessions: @Sendable () -> Int
    private let maxSessions: Int
    private let connections: @Sendable () -> Int
    private let maxConnections: Int
    private let descriptorLimit: @Sendable () -> Int
    private let stopping: @Sendable () -> Bool
    /// The latest store probe: when it finished and why it failed (nil: it committed).
    private let probe = NIOLockedValueBox<(at: ContinuousClock.Instant, failure: String?)?>(nil)

    init(
        store: NodeStore, sessions: @escaping @Sendable () -> Int, maxSessions: Int,
        connections: @escaping @Sendable () -> Int, maxConnections: Int,
        descriptorLimit: @escaping @Sendable () -> Int = { NodeResourceLimits.softFileDescriptorLimit() },
        stopping: @escaping @Sendable () -> Bool
    ) {
        self.store = store
        self.sessions = sessions
        self.maxSessions = maxSessions
        self.connections = connections
        self.maxConnections = maxConnections
        self.descriptorLimit = descriptorLimit
        self.stopping = stopping
    }

    /// Descriptors the process has open (`/proc/self/fd`; nil where that does not exist).
    static func openDescriptors() -> Int? {
        // minus the listing's own
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")).map { max(0, $0.count - 1) }
    }

    /// Runs the checks (probing the store when the last probe is older than ``probeInterval``).
    func readiness() async -> NodeReadiness {
        var checks: [NodeReadiness.Check] = []
        let stopping = stopping()
        checks.append(.init(name: "serving", ok: !stopping, detail: stopping ? "shutting down" : "accepting sessions"))
        if store.isShared {
            // PostgreSQL: the connection that listens for other nodes' commits is up.
            let reason = store.databaseUnavailableReason
            checks.append(
                .init(
                    name: "database", ok: reason == nil,
                    detail: reason.map { "PostgreSQL unreachable: \($0)" } ?? "PostgreSQL reachable, listening"))
        }
        checks.append(await storeCheck())
        if let open = Self.openDescriptors() {
            checks.append(usage("descriptors", open, of: descriptorLimit()))
        }
        checks.append(usage("connections", connections(), of: maxConnections))
        checks.append(usage("sessions", sessions(), of: maxSessions))
        return NodeReadiness(checks: checks)
    }

    private func usage(_ name: String, _ used: Int, of limit: Int) -> NodeReadiness.Check {
        let ok = Double(used) < Double(limit) * Self.nearlyExhausted
        return .init(name: name, ok: ok, detail: "\(used) of \(limit)\(ok ? "" : " (nearly exhausted)")")
    }

    private func storeCheck() async -> NodeReadiness.Check {
        let now = ContinuousClock.now
        // A success is reused for ``probeInterval``; a failure never: the node is ready again
        // at the first request after the store takes a write (issue 35, item 7).
        var failure = probe.withLockedValue { last -> String?? in
            guard let last, last.failure == nil, now - last.at < Self.probeInterval else { return .none }
            return .some(nil)
        }
        if failure == nil {
            let result = await probeStore()
            probe.withLockedValue { $0 = (ContinuousClock.now, result) }
            failure = .some(result)
        }
        if let reason = failure ?? nil { return .init(name: "store", ok: false, detail: "not writable: \(reason)") }
        let statistics = store.writerStatistics
        if let reason = statistics.lastCommitFailure {
            return .init(name: "store", ok: false, detail: "the latest commit failed: \(reason)")
        }
        // The condition, not a timer: a storage error (disk full, I/O) counts until a group
        // commit succeeds without one (the probe's or a client's).
        if let error = statistics.lastDatabaseError, error.at > (statistics.lastCleanCommit ?? error.at - .seconds(1)) {
            return .init(
                name: "store", ok: false, detail: "a storage error since the last clean commit: \(error.reason)")
        }
        return .init(name: "store", ok: true, detail: "writable")
    }

    /// Commits one small write through the writer (as commands do); the reason it failed.
    private func probeStore() async -> String? {
        let stamp = withUnsafeBytes(of: Int64(Date().timeIntervalSince1970 * 1_000).bigEndian) { Array($0) }
        // Not a task group: a hung store must not hold the answer past the timeout.
        return await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            let once = NIOLockedValueBox<CheckedContinuation<String?, Never>?>(continuation)
            let finish: @Sendable (String?) -> Void = { result in
                once.withLockedValue { pending in
                    pending?.resume(returning: result)
                    pending = nil
                }
            }
            Task { [store] in
                do {
                    try await store.write { tx in try tx.setSetting("health-probe", stamp) }
                    finish(nil)
                } catch {
                    finish("\(error)")
                }
            }
            Task {
                try? await Task.sleep(for: Self.probeTimeout)
                finish("no answer within \(Self.probeTimeout)")
            }
        }
    }
}
