import LaminaMerge
import LaminaModel
import LaminaWire

/// One peer link as presence sees it: the peer's node id and how to send it frames.
struct PresenceLink: Sendable {
    var peer: NodeID
    var send: @Sendable ([Frame]) -> Void
}

/// Presence over peer links, relayed beyond them (SPEC §6.6; the rules are
/// ``PresenceTable``'s, PresenceRoutes.swift): a link that comes up is sent every report this
/// node holds that it may pass on; a newer report is passed on to the other links; a lost link
/// withdraws what came by it.
extension NodeEngine {
    /// A peer link is up: it gets this node's reports and those it relays, and later every
    /// relayed report and withdrawal.
    func presenceLinkUp(_ peer: NodeID, key: ObjectIdentifier, send: @escaping @Sendable ([Frame]) -> Void) {
        presenceLinks.withLockedValue { $0[key] = PresenceLink(peer: peer, send: send) }
        let relayed = presenceTable.withLockedValue { t in
            t.linkUp(peer)
            return t.relayedReports(for: peer)
        }
        for entries in presenceReports() { send([.peerPresence(PeerPresence(entries: entries))]) }
        let frames = Self.relayedFrames(relayed)
        if !frames.isEmpty { send(frames) }
    }

    /// A peer link ended: what came by it (unless another link with the peer is up) is
    /// forgotten, what moved relayed to this node's sessions, and the origins lost withdrawn
    /// from the other links.
    func presenceLinkDown(_ peer: NodeID, key: ObjectIdentifier) {
        let registered = presenceLinks.withLockedValue { $0.removeValue(forKey: key) != nil }
        let (transitions, lost) = presenceTable.withLockedValue { t -> ([PresenceTransition], [NodeID]) in
            guard registered || t.links[peer] == nil else { return ([], []) }
            return t.linkDown(peer, now: .now())
        }
        relayRouted(transitions)
        sendWithdrawal(lost, except: nil)
    }

    /// PEER_PRESENCE (`origin` is `peer`) or PEER_PRESENCE_RELAYED from `peer`: the newer
    /// reports applied, relayed to this node's sessions, and passed on to the other links.
    func receivePeerPresence(_ entries: [PeerPresence.Entry], origin: NodeID, via peer: NodeID) {
        let reports = entries.map {
            (
                user: $0.user,
                report: PresenceReport(node: origin, devices: Int($0.devices), choice: $0.choice, at: $0.at)
            )
        }
        let (transitions, newer) = presenceTable.withLockedValue { t in
            t.receive(reports, origin: origin, via: peer, now: .now())
        }
        relayRouted(transitions)
        guard !newer.isEmpty else { return }
        let frames = Self.relayedFrames([(origin, newer)])
        for link in presenceLinks.withLockedValue({ Array($0.values) }) where link.peer != peer && link.peer != origin {
            link.send(frames)
        }
    }

    /// PEER_PRESENCE_WITHDRAWN from `peer`.
    func receivePresenceWithdrawal(_ origins: [NodeID], from peer: NodeID) {
        let (transitions, forgotten, held, offer) = presenceTable.withLockedValue { t in
            let (transitions, forgotten, held) = t.withdraw(origins, by: peer, now: .now())
            return (transitions, forgotten, held, held.isEmpty ? [] : t.relayedReports(for: peer, only: held))
        }
        relayRouted(transitions)
        // To every link, `peer` included: a node that routed them through this one forgets them.
        sendWithdrawal(forgotten, except: nil)
        guard !held.isEmpty, !offer.isEmpty else { return }
        let frames = Self.relayedFrames(offer)
        for link in presenceLinks.withLockedValue({ Array($0.values) }) where link.peer == peer { link.send(frames) }
    }

    /// Relays what moved on reports of other nodes to this node's sessions, and notes who went
    /// offline (nodes sharing a store note only their own devices').
    private func relayRouted(_ transitions: [PresenceTransition]) {
        for transition in transitions {
            if !store.isShared { noteLastSeen(transition) }
            relayPresence(transition)
        }
    }

    private func sendWithdrawal(_ origins: [NodeID], except peer: NodeID?) {
        let origins = Set(origins).sorted()
        guard !origins.isEmpty else { return }
        let frames = stride(from: 0, to: origins.count, by: PeerPresenceWithdrawn.maxOrigins).map {
            Frame.peerPresenceWithdrawn(
                PeerPresenceWithdrawn(
                    origins: Array(origins[$0..<min($0 + PeerPresenceWithdrawn.maxOrigins, origins.count)])))
        }
        for link in presenceLinks.withLockedValue({ Array($0.values) }) where link.peer != peer { link.send(frames) }
    }

    /// PEER_PRESENCE_RELAYED frames carrying `reports`, at most ``PeerPresence/maxEntries`` a frame.
    static func relayedFrames(_ reports: [(origin: NodeID, reports: [(user: UserID, report: PresenceReport)])])
        -> [Frame]
    {
        reports.flatMap { origin, held in
            stride(from: 0, to: held.count, by: PeerPresence.maxEntries).map { start in
                Frame.peerPresenceRelayed(
                    PeerPresenceRelayed(
                        origin: origin,
                        entries: held[start..<min(start + PeerPresence.maxEntries, held.count)].map {
                            entry($0.user, $0.report)
                        }))
            }
        }
    }
}
