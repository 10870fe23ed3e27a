import LaminaMerge
import LaminaModel

/// Presence beyond direct peer links (SPEC §6.6, PEER_PRESENCE_RELAYED and _WITHDRAWN): the
/// route of each other node's reports, like a distance-vector table with one rule per event.
/// - A report of `origin` that arrives over the link with `peer` and is newer than the one held
///   is applied and passed on to every other link (never back to `peer`, nor to `origin`); one
///   that is not newer stops here, so a report crosses each link at most once per change and a
///   cycle of links ends it. Its route becomes `peer`, unless `origin` is linked directly (a
///   direct link is always the route while it is up).
/// - A new link is sent every report held, except those routed through that peer (split
///   horizon: a node never offers a peer what it learned from it).
/// - A lost link: every origin routed through it is forgotten (its users' devices there stop
///   counting) and withdrawn to the remaining links.
/// - A withdrawal of `origin` by `peer`: forgotten and withdrawn further when routed through
///   `peer`; when this node reaches `origin` another way, it sends `peer` the reports it holds,
///   so a node that lost one path learns the other.
extension PresenceTable {
    /// A presence link with `peer` came up.
    mutating func linkUp(_ peer: NodeID) {
        links[peer, default: 0] += 1
        routes[peer] = peer
    }

    /// A presence link with `peer` ended: the origins routed through it are forgotten (returned,
    /// to withdraw from the other links) unless another link with `peer` is still up.
    mutating func linkDown(_ peer: NodeID, now: Timestamp) -> (transitions: [PresenceTransition], lost: [NodeID]) {
        if let count = links[peer], count > 1 {
            links[peer] = count - 1
            return ([], [])
        }
        links[peer] = nil
        let lost = routes.filter { $0.value == peer }.map(\.key).sorted()
        var transitions: [PresenceTransition] = []
        for origin in lost {
            routes[origin] = nil
            transitions += forget(origin, now: now)
        }
        return (transitions, lost)
    }

    /// Reports of `origin` that came over the link with `peer`: those newer than held are
    /// applied and returned (to pass on to the other links).
    mutating func receive(
        _ reports: [(user: UserID, report: PresenceReport)], origin: NodeID, via peer: NodeID, now: Timestamp
    ) -> (transitions: [PresenceTransition], newer: [(user: UserID, report: PresenceReport)]) {
        guard origin != node else { return ([], []) }
        let newer = reports.filter { isNewer($0.report, of: $0.user) }
        if links[origin] == nil, !newer.isEmpty || routes[origin] == nil { routes[origin] = peer }
        return (newer.map { apply($0.report, of: $0.user, now: now) }, newer)
    }

    /// `peer` withdrew `origins`: returns what moved, the origins forgotten here (to withdraw
    /// from every link: a node that routed them through this one forgets them too), and those
    /// this node still reaches another way (to offer back to `peer`).
    mutating func withdraw(_ origins: [NodeID], by peer: NodeID, now: Timestamp) -> (
        transitions: [PresenceTransition], forgotten: [NodeID], held: [NodeID]
    ) {
        var transitions: [PresenceTransition] = []
        var forgotten: [NodeID] = []
        var held: [NodeID] = []
        for origin in origins where origin != node && origin != peer {
            guard let route = routes[origin] else { continue }
            if route == peer {
                routes[origin] = nil
                transitions += forget(origin, now: now)
                forgotten.append(origin)
            } else {
                held.append(origin)
            }
        }
        return (transitions, forgotten, held)
    }

    /// The other nodes' reports to offer `peer` (all, or those of `origins`): every origin this
    /// node holds reports of but its own, `peer`'s, and those routed through `peer`.
    func relayedReports(for peer: NodeID, only origins: [NodeID]? = nil) -> [(
        origin: NodeID, reports: [(user: UserID, report: PresenceReport)]
    )] {
        let candidates = origins ?? Array(routes.keys)
        return candidates.sorted().compactMap { origin in
            guard origin != node, origin != peer, let route = routes[origin], route != peer else { return nil }
            let held = reports(of: origin)
            return held.isEmpty ? nil : (origin, held)
        }
    }
}
