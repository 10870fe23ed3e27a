import LaminaModel

/// How much of a conversation notifies a user (pushes and badge counts).
public enum NotificationLevel: UInt8, CaseIterable, Comparable, Sendable {
    /// Every message (the default).
    case all = 0
    /// Only messages that mention the user.
    case mentions = 1
    /// None.
    case none = 2

    public static func < (a: NotificationLevel, b: NotificationLevel) -> Bool { a.rawValue < b.rawValue }
}

/// One user's notification level for one conversation, as a last-writer-wins register over the
/// HLC readings of the nodes that accepted each write (the user's own state, replicated like
/// their blocks). A level may run until a time (`until`, ms since 1970): after it the level is
/// `all` again, on every replica alike, with no write needed.
public struct NotificationSetting: ReplicatedState, Hashable {
    /// A write: the level, until when (nil: no end), and the reading it was accepted at.
    public struct Write: Hashable, Sendable {
        public var level: NotificationLevel
        public var until: UInt64?
        public var at: HLCTimestamp

        public init(level: NotificationLevel, until: UInt64? = nil, at: HLCTimestamp) {
            self.level = level
            self.until = until
            self.at = at
        }
    }

    public typealias Operation = Write

    /// The winning write, nil while the user never set one.
    public private(set) var current: Write?

    public init() {}

    public mutating func apply(_ write: Write) {
        guard let current else {
            self.current = write
            return
        }
        if Self.replaces(write, current) { self.current = write }
    }

    /// Whether `incoming` replaces `current`: a later reading; at the same reading (one node
    /// never writes twice at one reading, so only a faulty replica gets here) the higher level,
    /// then the later end, so every replica picks the same.
    static func replaces(_ incoming: Write, _ current: Write) -> Bool {
        if incoming.at != current.at { return LastWriterWins.wins(incoming.at, over: current.at) }
        if incoming.level != current.level { return current.level < incoming.level }
        return (current.until ?? .max) < (incoming.until ?? .max)
    }

    public func merged(with other: NotificationSetting) -> NotificationSetting {
        var out = self
        if let write = other.current { out.apply(write) }
        return out
    }

    /// The level in force at `now` (ms since 1970): `all` when none was set or it has run out.
    public func level(now: UInt64) -> NotificationLevel {
        guard let current else { return .all }
        if let until = current.until, until <= now { return .all }
        return current.level
    }

    /// Whether a message notifies the user at `now`, given whether it mentions them.
    public func notifies(mentioned: Bool, now: UInt64) -> Bool {
        switch level(now: now) {
        case .all: true
        case .mentions: mentioned
        case .none: false
        }
    }
}
