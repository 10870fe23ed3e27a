import Foundation
import LaminaModel
import LaminaWire

extension SyncSession {
    /// Ends this session on the node for good (SPEC §5.8): the node answers the commands sent
    /// before, revokes the session token and acknowledges; the session then ends with
    /// `SyncSessionEnd.signedOut` and the token is forgotten. Only while live. After a
    /// failure the session stays, and another may be sent.
    public func endSession() async throws(ClientError) {
        guard state == .live else { throw ClientError(.notConnected, "the session is not live") }
        guard pending.awaitedID(of: .endSession) == nil else {
            throw ClientError(.invalidArgument, "the session is already being ended")
        }
        let id = UUID()
        try await sendAwaited(.endSession(EndSession(requestID: id)), id: id)
    }
}
