import Foundation
import LaminaModel
import LaminaStore

/// Presence as the identity routes show it (Layer's identity `presence`: `status` and
/// `last_seen_at`): what the node holds in memory, else `offline` with the time the store
/// kept (SPEC §6.6, kept across restarts), else nothing.
extension NodeEngine {
    /// What `viewer` (nil: anyone but the users themselves) sees of each of `users`.
    func displayedPresence(of users: some Collection<UserID> & Sendable, as viewer: UserID?) async throws
        -> [UserID: Presence]
    {
        var out: [UserID: Presence] = [:]
        var unknown: [UserID] = []
        presenceTable.withLockedValue { t in
            for user in users {
                if let held = t.presence(of: user, as: viewer), held.status != .offline || held.lastSeenAt != nil {
                    out[user] = held
                } else {
                    unknown.append(user)
                }
            }
        }
        guard !unknown.isEmpty else { return out }
        let stored = unknown
        for (user, time) in try await store.read({ r in try r.lastSeen(of: stored) }) {
            out[user] = Presence(status: .offline, lastSeenAt: time)
        }
        return out
    }
}

/// Layer's identity `presence`: `{"status": "available" | "away" | "busy" | "invisible" |
/// "offline", "last_seen_at": "<ISO 8601>" | null}` (`invisible` only to the user themself).
public struct PresenceObject: Codable, Sendable, Hashable {
    public var status: String
    public var last_seen_at: String?

    init(_ presence: Presence) {
        status = presence.status.name
        last_seen_at = presence.lastSeenAt.map { ServerAPIJSON.date(millisecondsSince1970: $0.millisecondsSince1970) }
    }
}
