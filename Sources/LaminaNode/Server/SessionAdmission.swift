import LaminaWire
import NIOConcurrencyHelpers

/// Counts the node's sync sessions that are not authenticated yet, per connection, per remote
/// address and in all (``NodeResourceLimits``), and refuses one more past any of the three.
/// A session holds a ``Ticket`` from its stream's opening until AUTHENTICATED goes out or the
/// stream closes, whichever comes first.
///
/// Also the node's live-object ledger: sync-stream bridges alive and the sessions handed to
/// ``track(_:)`` still alive (weak references), so a leak shows as a count that does not go
/// back to zero rather than as noisy RSS.
public final class SessionAdmission: Sendable {
    public let limits: NodeResourceLimits
    /// The node-wide limit in force (``NodeResourceLimits/effectiveMaxUnauthenticated(maxSessions:)``).
    public let maxUnauthenticated: Int

    private struct State: @unchecked Sendable {  // only touched under the lock
        var unauthenticated = 0
        var byConnection: [UInt64: Int] = [:]
        var byAddress: [String: Int] = [:]
        var refused = 0
        var liveBridges = 0
        var tracked: [Weak] = []
        var trackedPruneAt = 64
    }

    private struct Weak: @unchecked Sendable {
        weak var object: AnyObject?
    }

    private let state = NIOLockedValueBox(State())

    public init(limits: NodeResourceLimits, maxSessions: Int) {
        self.limits = limits
        self.maxUnauthenticated = limits.effectiveMaxUnauthenticated(maxSessions: maxSessions)
    }

    /// A slot for one unauthenticated session; give it back with ``release()`` (idempotent).
    public final class Ticket: Sendable {
        private let admission: SessionAdmission
        private let connection: UInt64
        private let address: String
        private let released = NIOLockedValueBox(false)

        fileprivate init(admission: SessionAdmission, connection: UInt64, address: String) {
            self.admission = admission
            self.connection = connection
            self.address = address
        }

        public func release() {
            let first = released.withLockedValue { value -> Bool in
                defer { value = true }
                return !value
            }
            if first { admission.give(connection: connection, address: address) }
        }

        deinit { release() }
    }

    /// The answer to a new stream.
    public enum Decision: Sendable {
        case admitted(Ticket)
        /// The `overloaded` ERROR (fatal, with a retry delay) naming the limit reached.
        case refused(ErrorFrame)
    }

    /// A ticket, or the refusal naming the limit reached.
    public func admit(connection: UInt64, address: String?) -> Decision {
        let address = address ?? ""
        let refusal = state.withLockedValue { s -> String? in
            if s.unauthenticated >= maxUnauthenticated {
                s.refused += 1
                return "the node has \(maxUnauthenticated) unauthenticated sessions, its limit"
            }
            if s.byAddress[address, default: 0] >= limits.maxUnauthenticatedPerAddress {
                s.refused += 1
                return "this address has \(limits.maxUnauthenticatedPerAddress) unauthenticated sessions, its limit"
            }
            if s.byConnection[connection, default: 0] >= limits.maxUnauthenticatedPerConnection {
                s.refused += 1
                return
                    "this connection has \(limits.maxUnauthenticatedPerConnection) unauthenticated sessions, its limit"
            }
            s.unauthenticated += 1
            s.byAddress[address, default: 0] += 1
            s.byConnection[connection, default: 0] += 1
            return nil
        }
        if let refusal {
            var frame = ErrorFrame(
                code: .overloaded, reason: refusal + "; authenticate the sessions you have, then retry", isFatal: true)
            frame.retryAfterMilliseconds = limits.refusalRetryAfterMilliseconds
            return .refused(frame)
        }
        return .admitted(Ticket(admission: self, connection: connection, address: address))
    }

    fileprivate func give(connection: UInt64, address: String) {
        state.withLockedValue { s in
            s.unauthenticated -= 1
            if let n = s.byAddress[address] { s.byAddress[address] = n > 1 ? n - 1 : nil }
            if let n = s.byConnection[connection] { s.byConnection[connection] = n > 1 ? n - 1 : nil }
        }
    }

    /// What is counted now.
    public struct Snapshot: Sendable, Hashable {
        /// Sessions holding a ticket (not authenticated, stream open).
        public var unauthenticated: Int
        /// Remote addresses and connections with at least one such session.
        public var addresses: Int
        public var connections: Int
        /// Sessions refused so far for one of the three limits.
        public var refused: Int
        /// ``SyncStreamBridge`` objects alive (one per sync stream until it is released).
        public var liveBridges: Int
        /// Objects passed to ``track(_:)`` that are still alive.
        public var liveTracked: Int
    }

    public var snapshot: Snapshot {
        state.withLockedValue { s in
            s.tracked.removeAll { $0.object == nil }
            return Snapshot(
                unauthenticated: s.unauthenticated, addresses: s.byAddress.count, connections: s.byConnection.count,
                refused: s.refused, liveBridges: s.liveBridges, liveTracked: s.tracked.count)
        }
    }

    /// Watches `object` (weakly) for ``Snapshot/liveTracked``.
    func track(_ object: AnyObject) {
        state.withLockedValue { s in
            s.tracked.append(Weak(object: object))
            if s.tracked.count >= s.trackedPruneAt {
                s.tracked.removeAll { $0.object == nil }
                s.trackedPruneAt = max(64, s.tracked.count * 2)
            }
        }
    }

    func bridgeCreated() { state.withLockedValue { $0.liveBridges += 1 } }
    func bridgeReleased() { state.withLockedValue { $0.liveBridges -= 1 } }
}
