import Foundation
import LaminaModel
import LaminaWire

extension SyncSession {
    /// Sets (or, with nil, removes) this device's push token on the node (SPEC §5.9): while the
    /// device has no live session the node pushes its messages there. Only while live; throws
    /// `invalid-push-token` for a token of the wrong size or of a provider the node does not
    /// deliver to.
    public func registerPushToken(_ token: PushToken?) async throws(ClientError) {
        guard state == .live else { throw ClientError(.notConnected, "the session is not live") }
        if let token {
            do { try token.validate() } catch {
                throw ClientError(ClientError.Code(rawValue: error.code.rawValue), error.reason)
            }
        }
        let id = UUID()
        try await sendAwaited(.registerPushToken(RegisterPushToken(requestID: id, token: token)), id: id)
    }

    /// Registers the token the app last set for this device (kept in the local store), once
    /// per session as it goes live: a token set while offline, or one the node lost, reaches
    /// it. Not awaited; a token the node refuses (`invalid-push-token`: of a provider it does
    /// not deliver to) is forgotten, so it is not sent again on every connect.
    func registerStoredPushToken() async throws {
        guard let stored = try await store.devicePushTokenAsync() else { return }
        let id = UUID()
        pending[awaited: id] = AwaitedRequest(frame: .registerPushToken, stored: stored)
        try await channel.send(.registerPushToken(RegisterPushToken(requestID: id, token: stored.token)))
    }
}
