import Foundation
import LaminaModel
import LaminaStore
import LaminaWire
import NIOConcurrencyHelpers

/// How many nonces the node keeps and for how long (SPEC §5.2). Declared here once; the
/// config file's `resources` sets them (`nonceLifetimeSeconds`, `maxNoncesPerStream`,
/// `maxNoncesPerConnection`, `maxNonces`). The reasons for the numbers: `Server/RESOURCES.md`.
public struct NonceLimits: Sendable, Hashable, Codable {
    /// How long an issued nonce can be used (SPEC: about 10 minutes).
    public var lifetimeSeconds = 600
    /// Nonces one stream may be issued (NONCE_REQUEST, and the fresh one after each failed
    /// login); the next request ends the stream with a fatal `limit-exceeded`.
    public var perStream = 8
    /// Nonces held for one connection at once (until each expires; a used one too, so that a
    /// replay is told `nonce-reused`); one more request is answered `overloaded`.
    public var perConnection = 16
    /// Nonces the node holds at once; one more request is answered `overloaded`. Above what
    /// the unauthenticated-session limits let clients ask for (1,000 streams × 8).
    public var perNode = 20_000
    /// The retry delay of the `overloaded` ERROR refusing a nonce over either count.
    public var refusalRetryAfterMilliseconds: UInt32 = 1_000

    public init() {}

    /// The reason the values are out of range, if they are.
    public func problem() -> String? {
        guard (10...3_600).contains(lifetimeSeconds) else { return "resources.nonceLifetimeSeconds must be 10...3600" }
        guard perStream >= 2 else {
            return "resources.maxNoncesPerStream must be at least 2 (a request and the nonce after a failed login)"
        }
        guard perConnection >= perStream else {
            return "resources.maxNoncesPerConnection must be at least maxNoncesPerStream"
        }
        guard perNode >= perConnection else { return "resources.maxNonces must be at least maxNoncesPerConnection" }
        return nil
    }

    var lifetime: Duration { .seconds(Int64(lifetimeSeconds)) }
}

/// The nonces the node issued and still holds (SPEC §5.2), in memory. Each is tied to the
/// connection whose stream asked for it and is good for one login attempt on that connection
/// (any of its streams) before it expires: a login that fails uses it up too. A nonce leaves
/// the table when it expires (``prune(now:)``, on the pruner's schedule) or when its connection
/// closes (``connectionClosed(_:)``); a used one stays until then, so that a replay is told
/// `nonce-reused`. Counted per connection and for the node (``NonceLimits``). Nothing is
/// written to the store: issuing a nonce costs no disk write, and a restart ends every
/// connection and with them every nonce.
public final class NonceTable: Sendable {
    public let limits: NonceLimits

    private struct Entry {
        var owner: UInt64
        var expiresAt: Int64
        var used: Bool
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var byOwner: [UInt64: [String]] = [:]
        var refused = 0
        var lastFullPrune: Int64 = 0
    }

    private let state = NIOLockedValueBox(State())

    /// Owners for sessions that have no connection (in-process tests): counted down from the
    /// top, so they never meet a transport's connection ids (counted up from 1).
    private static let privateOwners = NIOLockedValueBox(UInt64.max)

    public init(limits: NonceLimits) {
        self.limits = limits
    }

    /// An owner no connection has: the nonces of a session without a transport.
    static func privateOwner() -> UInt64 {
        privateOwners.withLockedValue { next in
            defer { next -= 1 }
            return next
        }
    }

    /// A fresh nonce for `owner` (a connection) and when it expires, or the `overloaded` error
    /// naming the count that is full.
    func issue(to owner: UInt64, now: Timestamp = .now()) -> Result<(nonce: String, expiresAt: Timestamp), WireError> {
        let nonce = NodeStore.makeNonce()
        let expiresAt = now.adding(limits.lifetime)
        let nowMs = now.millisecondsSince1970
        return state.withLockedValue { s -> Result<(nonce: String, expiresAt: Timestamp), WireError> in
            if s.byOwner[owner, default: []].count >= limits.perConnection {
                // Spent nonces (used, or expired) make room: the bound is on nonces a
                // connection may still log in with, so a connection that logs in often is
                // never refused for its past logins.
                Self.removeExpired(of: owner, before: nowMs, alsoUsed: true, in: &s)
                if s.byOwner[owner, default: []].count >= limits.perConnection {
                    s.refused += 1
                    return .failure(
                        WireError(
                            .overloaded,
                            "this connection holds \(limits.perConnection) nonces, its limit; use one or wait for one to expire"
                        ))
                }
            }
            if s.entries.count >= limits.perNode {
                // At most once a second: a full table under attack costs one sweep a second.
                if nowMs - s.lastFullPrune >= 1_000 {
                    s.lastFullPrune = nowMs
                    _ = Self.removeExpired(before: nowMs, in: &s)
                }
                if s.entries.count >= limits.perNode {
                    s.refused += 1
                    return .failure(WireError(.overloaded, "the node holds \(limits.perNode) nonces, its limit"))
                }
            }
            s.entries[nonce] = Entry(owner: owner, expiresAt: expiresAt.millisecondsSince1970, used: false)
            s.byOwner[owner, default: []].append(nonce)
            return .success((nonce, expiresAt))
        }
    }

    /// Whether `nonce` is open: known, not used, not expired (SPEC §5.2).
    func isOpen(_ nonce: String, now: Timestamp = .now()) -> Bool {
        state.withLockedValue { s in
            guard let entry = s.entries[nonce] else { return false }
            return !entry.used && entry.expiresAt >= now.millisecondsSince1970
        }
    }

    /// Uses `nonce` for a login on `owner`'s connection. Throws `unknown-nonce` (never issued,
    /// expired and pruned, or its connection closed), `nonce-reused`, `nonce-expired`, or
    /// `nonce-other-connection` (issued to another connection: left as it is).
    func use(_ nonce: String, by owner: UInt64, now: Timestamp = .now()) throws(WireError) {
        let outcome = state.withLockedValue { s -> WireError? in
            guard var entry = s.entries[nonce] else {
                return WireError(
                    .unknownNonce, "this node holds no such nonce (never issued, expired, or its connection closed)")
            }
            if entry.used { return WireError(.nonceReused, "the nonce was already used") }
            if entry.expiresAt < now.millisecondsSince1970 { return WireError(.nonceExpired, "the nonce expired") }
            guard entry.owner == owner else {
                return WireError(
                    .nonceOtherConnection, "the nonce was issued to another connection; ask for one on this connection")
            }
            entry.used = true
            s.entries[nonce] = entry
            return nil
        }
        if let outcome { throw outcome }
    }

    /// A login on `owner`'s connection failed: the nonce its token names, if it is one of
    /// this connection's, is used up.
    func spoil(_ nonce: String, by owner: UInt64) {
        state.withLockedValue { s in
            guard var entry = s.entries[nonce], entry.owner == owner else { return }
            entry.used = true
            s.entries[nonce] = entry
        }
    }

    /// The connection closed: its nonces go.
    public func connectionClosed(_ owner: UInt64) {
        state.withLockedValue { s in
            guard let nonces = s.byOwner.removeValue(forKey: owner) else { return }
            for nonce in nonces { s.entries[nonce] = nil }
        }
    }

    /// Deletes the nonces expired before `now`. Returns how many.
    @discardableResult
    public func prune(now: Timestamp = .now()) -> Int {
        state.withLockedValue { s in Self.removeExpired(before: now.millisecondsSince1970, in: &s) }
    }

    /// What the table holds.
    public struct Snapshot: Sendable, Hashable {
        /// Nonces held (used ones included until they expire).
        public var nonces: Int
        /// Connections holding at least one.
        public var connections: Int
        /// Requests refused for a full count so far.
        public var refused: Int
    }

    public var snapshot: Snapshot {
        state.withLockedValue { Snapshot(nonces: $0.entries.count, connections: $0.byOwner.count, refused: $0.refused) }
    }

    private static func removeExpired(of owner: UInt64, before now: Int64, alsoUsed: Bool = false, in s: inout State) {
        guard let nonces = s.byOwner[owner] else { return }
        let kept = nonces.filter { nonce in
            guard let entry = s.entries[nonce], entry.expiresAt >= now, !(alsoUsed && entry.used) else {
                s.entries[nonce] = nil
                return false
            }
            return true
        }
        s.byOwner[owner] = kept.isEmpty ? nil : kept
    }

    private static func removeExpired(before now: Int64, in s: inout State) -> Int {
        let before = s.entries.count
        let expiredOwners = Set(s.entries.values.lazy.filter { $0.expiresAt < now }.map(\.owner))
        for owner in expiredOwners { removeExpired(of: owner, before: now, in: &s) }
        return before - s.entries.count
    }
}
