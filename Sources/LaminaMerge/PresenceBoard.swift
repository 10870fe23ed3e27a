import LaminaModel

/// A status a user chose on one of their devices (SPEC §6.6), stamped with the HLC reading of
/// the node that took it: the user's status is the latest choice, on whichever device.
public struct PresenceChoice: Hashable, Sendable {
    /// Never ``PresenceStatus/offline``: that is decided from the connected devices.
    public var status: PresenceStatus
    public var at: HLCTimestamp

    public init(status: PresenceStatus, at: HLCTimestamp) {
        self.status = status
        self.at = at
    }

    /// The later of two choices (readings of different nodes never tie; the same reading is
    /// the same choice, its status breaking a tie only for inputs no node produces).
    public static func latest(_ a: PresenceChoice?, _ b: PresenceChoice?) -> PresenceChoice? {
        guard let a else { return b }
        guard let b else { return a }
        if a.at != b.at { return a.at < b.at ? b : a }
        return a.status.rawValue < b.status.rawValue ? b : a
    }
}

/// What one node holds of one user: how many of the user's devices have a session open there,
/// the latest choice it knows, and when it last said so (its HLC reading). A node's newer
/// report replaces its older one.
public struct PresenceReport: Hashable, Sendable {
    public var node: NodeID
    public var devices: Int
    public var choice: PresenceChoice?
    public var at: HLCTimestamp

    public init(node: NodeID, devices: Int, choice: PresenceChoice?, at: HLCTimestamp) {
        self.node = node
        self.devices = devices
        self.choice = choice
        self.at = at
    }
}

/// One user's presence aggregated over their devices on every node (SPEC §6.6), as soft
/// state: a last-writer-wins report per node, merged by HLC. The aggregate is a function of
/// the merged reports alone, so nodes (and a node's own sessions) that see the same reports
/// in any order, any number of times, show the same status:
/// - online when some node reports a connected device;
/// - the user's status is the latest choice any report carries (`available` when none);
/// - others see `offline` when the user is offline or chose `invisible`.
public struct PresenceBoard: ReplicatedState, Hashable {
    public typealias Operation = PresenceReport

    /// The latest report of each node.
    public private(set) var reports: [NodeID: PresenceReport] = [:]

    public init() {}

    public mutating func apply(_ report: PresenceReport) {
        if let current = reports[report.node], !Self.replaces(report, current) { return }
        reports[report.node] = report
    }

    /// Drops `node`'s report: soft-state expiry when the node is no longer heard from (a lost
    /// peer link, a node on the shared store whose reports stopped). Not a lattice operation:
    /// each node forgets on its own, from what it observes.
    public mutating func forget(_ node: NodeID) { reports[node] = nil }

    public func merged(with other: PresenceBoard) -> PresenceBoard {
        var out = self
        for report in other.reports.values { out.apply(report) }
        return out
    }

    /// Whether `incoming` replaces `current` (same node): a later reading, and for the same
    /// reading (no node produces two reports at one reading) a deterministic order of the rest.
    static func replaces(_ incoming: PresenceReport, _ current: PresenceReport) -> Bool {
        if incoming.at != current.at { return current.at < incoming.at }
        if incoming.devices != current.devices { return current.devices < incoming.devices }
        return PresenceChoice.latest(current.choice, incoming.choice) != current.choice
    }

    /// Some node reports a connected device of the user.
    public var isOnline: Bool { reports.values.contains { $0.devices > 0 } }

    /// The latest choice of any device of the user.
    public var choice: PresenceChoice? {
        reports.values.reduce(nil) { PresenceChoice.latest($0, $1.choice) }
    }

    /// The status the user's own devices show: `offline` when none is connected, else their
    /// latest choice (`invisible` included), `available` when they chose nothing.
    public var ownStatus: PresenceStatus {
        guard isOnline else { return .offline }
        return choice?.status ?? .available
    }

    /// The status everyone else sees: ``ownStatus`` with `invisible` shown as `offline`.
    public var visibleStatus: PresenceStatus {
        let own = ownStatus
        return own == .invisible ? .offline : own
    }
}
