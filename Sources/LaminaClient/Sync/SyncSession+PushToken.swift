import Foundation
import LaminaModel
import LaminaWire

/// A REGISTER_PUSH_TOKEN a session sent (SPEC §5.9), and the caller waiting for its answer.
struct PushTokenRequest {
    var result: Result<Void, ClientError>?
    var caller: CheckedContinuation<Result<Void, ClientError>, Never>?
    /// For a registration nobody awaits: the stored token it sent as the session went live
    /// (forgotten if the node refuses it and it is still the one stored).
    var stored: DevicePushToken?
}

extension SyncSession {
    /// Sets (or, with nil, removes) this device's push token on the node (SPEC §5.9): while the
    /// device has no live session the node pushes its messages there. Only while live; throws
    /// `invalid-push-token` for a token of the wrong size or of a provider the node does not
    /// deliver to.
    public func registerPushToken(_ token: PushToken?) async throws(ClientError) {
        guard state == .live else { throw ClientError(.notConnected, "the session is not live") }
        if let token {
            do { try token.validate() } catch { throw ClientError(ClientError.Code(rawValue: error.code.rawValue), error.reason) }
        }
        let id = UUID()
        pushTokenRequests[id] = PushTokenRequest()
        do {
            try await channel.send(.registerPushToken(RegisterPushToken(requestID: id, token: token)))
        } catch {
            pushTokenRequests[id] = nil
            throw error
        }
        let outcome = await withCheckedContinuation { (caller: CheckedContinuation<Result<Void, ClientError>, Never>) in
            if let result = pushTokenRequests[id]?.result {
                caller.resume(returning: result)
            } else {
                pushTokenRequests[id]?.caller = caller
            }
        }
        pushTokenRequests[id] = nil
        try outcome.get()
    }

    /// Registers the token the app last set for this device (kept in the local store), once
    /// per session as it goes live: a token set while offline, or one the node lost, reaches
    /// it. Not awaited; a token the node refuses (`invalid-push-token`: of a provider it does
    /// not deliver to) is forgotten, so it is not sent again on every connect.
    func registerStoredPushToken() async throws {
        guard let stored = try await store.devicePushTokenAsync() else { return }
        let id = UUID()
        pushTokenRequests[id] = PushTokenRequest(stored: stored)
        try await channel.send(.registerPushToken(RegisterPushToken(requestID: id, token: stored.token)))
    }

    /// The node answered a REGISTER_PUSH_TOKEN (or the stream ended: `id` nil answers them all).
    func finishPushTokenRequest(_ id: UUID?, _ result: Result<Void, ClientError>) async {
        for key in id.map({ [$0] }) ?? Array(pushTokenRequests.keys) {
            guard var request = pushTokenRequests[key], request.result == nil else { continue }
            request.result = result
            if let stored = request.stored {
                pushTokenRequests[key] = nil
                if case .failure(let error) = result, error.code == .invalidPushToken {
                    try? await store.forgetDevicePushTokenAsync(ifStill: stored)
                }
                continue
            }
            if let caller = request.caller {
                request.caller = nil
                caller.resume(returning: result)
            }
            pushTokenRequests[key] = request
        }
    }
}
