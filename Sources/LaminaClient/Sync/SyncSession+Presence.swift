import Foundation
import LaminaModel
import LaminaWire

extension SyncSession {
    /// Chooses the user's presence status on the node (SPEC §6.6 SET_PRESENCE); returns once
    /// the node applied it. Only while live, and only when the node offers presence.
    public func setPresence(_ status: PresenceStatus) async throws(ClientError) {
        chosenPresence = status
        guard state == .live else { throw ClientError(.notConnected, "the session is not live") }
        guard features.contains(.presence) else {
            throw ClientError(.notAllowed, "the node does not offer presence (feature bit 9)")
        }
        let id = UUID()
        try await sendAwaited(.setPresence(SetPresence(requestID: id, status: status)), id: id)
    }

    /// The status to send as the session goes live (the engine's, from an earlier session).
    func choosePresence(_ status: PresenceStatus?) { chosenPresence = status }

    /// Sends the chosen status again as the session goes live (the node forgets it when the
    /// user's last device leaves, and on restart). Not awaited.
    func restorePresence() async throws {
        guard let status = chosenPresence, features.contains(.presence) else { return }
        let id = UUID()
        pending[awaited: id] = AwaitedRequest(frame: .setPresence, unawaited: true)
        try await channel.send(.setPresence(SetPresence(requestID: id, status: status)))
    }
}
