import Foundation
import LaminaModel
import LaminaStore
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore

/// Presence across the nodes sharing one PostgreSQL database (SPEC §6.6): reports travel as
/// ephemeral notifications (`presence`, the sender's node id, a PEER_PRESENCE frame in base64),
/// never as table writes. A node announces all its reports when its listening connection is
/// (re)established, to a node it hears from for the first time, and again every
/// ``presenceRefreshInterval``; a node not heard from for ``presenceSilenceLimit`` is forgotten (its users' devices there no longer count), so a node that
/// died without a word stops holding its users online within that bound.
extension NodeEngine {
    /// How often a node on a shared store announces all its reports again.
    static let presenceRefreshInterval: Duration = .seconds(20)
    /// How long a node on a shared store may stay silent before its reports are forgotten.
    static let presenceSilenceLimit: Duration = .seconds(60)

    /// Starts reporting to the other nodes of the shared store (nothing on SQLite).
    func startSharedStorePresence() {
        guard store.isShared else { return }
        addPresenceSender(ObjectIdentifier(self)) { [weak self] entries in self?.notifyPresence(entries) }
        let task = Task { [weak self] in
            while !Task.isCancelled {
                do { try await Task.sleep(for: Self.presenceRefreshInterval) } catch { return }
                guard let self else { return }
                self.announcePresenceToSharedStore()
                self.forgetSilentNodes()
            }
        }
        presenceRefresh.withLockedValue { $0 = task }
    }

    /// Every report of this node, to the other nodes (on connecting, then periodically).
    func announcePresenceToSharedStore() {
        guard store.isShared else { return }
        for entries in presenceReports() { notifyPresence(entries) }
        // An announcement with nothing in it still says this node is alive.
        sendPresenceNotification("")
    }

    /// A `presence` notification from another node.
    func receiveSharedPresence(_ lines: [Substring]) {
        guard lines.count == 3, let raw = UInt64(lines[1]) else { return }
        let node = NodeID(raw)
        let isNew = presenceHeard.withLockedValue { $0.updateValue(.now, forKey: node) == nil }
        // A node heard for the first time (it just started, or its listener reconnected) is
        // told every report of this one at once rather than at the next refresh.
        if isNew { announcePresenceToSharedStore() }
        guard !lines[2].isEmpty, let bytes = Data(base64Encoded: String(lines[2])),
            case .peerPresence(let presence)? = try? Frame.decode(exactly: ByteBuffer(bytes: bytes))
        else { return }
        applyPresenceReports(presence.entries, from: node)
    }

    private func forgetSilentNodes() {
        let now = ContinuousClock.now
        let silent = presenceHeard.withLockedValue { heard -> [NodeID] in
            let gone = heard.filter { now - $0.value > Self.presenceSilenceLimit }.map(\.key)
            for node in gone { heard[node] = nil }
            return gone
        }
        for node in silent { forgetPresenceReports(of: node) }
    }

    /// Sends `entries` in notifications that fit PostgreSQL's payload limit.
    private func notifyPresence(_ entries: [PeerPresence.Entry]) {
        guard !entries.isEmpty else { return }
        guard let buffer = try? Frame.peerPresence(PeerPresence(entries: entries)).encoded() else { return }
        let text = Data(buffer.readableBytesView).base64EncodedString()
        if text.utf8.count + 64 <= NotificationChannel.maxPayloadBytes || entries.count == 1 {
            sendPresenceNotification(text)
        } else {
            let half = entries.count / 2
            notifyPresence(Array(entries[..<half]))
            notifyPresence(Array(entries[half...]))
        }
    }

    private func sendPresenceNotification(_ text: String) {
        store.sendEphemeral("presence\n\(configuration.nodeID.rawValue)\n\(text)")
    }
}
