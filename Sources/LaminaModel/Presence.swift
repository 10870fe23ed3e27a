/// A user's availability (Layer's presence, SPEC §6.6). The raw values are the wire's
/// presence status byte (SPEC §3.11).
public enum PresenceStatus: UInt8, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    /// No device of the user is connected, or the user chose ``invisible`` (as others see it).
    case offline = 0
    /// Connected and available: the status of a user who chose nothing.
    case available = 1
    /// Connected, away (set by the app or the user).
    case away = 2
    /// Connected, busy (set by the app or the user).
    case busy = 3
    /// Connected but shown as ``offline`` to everyone else; only the user's own devices see it.
    case invisible = 4

    /// The name Layer's APIs use (`available`, `away`, `busy`, `invisible`, `offline`).
    public var name: String {
        switch self {
        case .offline: "offline"
        case .available: "available"
        case .away: "away"
        case .busy: "busy"
        case .invisible: "invisible"
        }
    }

    /// The status named `name` (one of ``name``'s values), nil for any other string.
    public init?(name: String) {
        guard let status = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = status
    }

    /// Whether a device may choose this status: every status but ``offline`` (which only the
    /// node decides, from the user's connected devices).
    public var isChoosable: Bool { self != .offline }

    public var description: String { name }
}

/// What one user sees of another's presence: the status (``PresenceStatus/invisible`` only
/// for the user themself) and when they were last seen connected and not invisible.
public struct Presence: Hashable, Sendable {
    public var status: PresenceStatus
    /// When the user was last known connected and visible; nil when never seen by the node.
    public var lastSeenAt: Timestamp?

    public init(status: PresenceStatus, lastSeenAt: Timestamp? = nil) {
        self.status = status
        self.lastSeenAt = lastSeenAt
    }
}
