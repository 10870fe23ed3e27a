import Foundation
import LaminaModel
import LaminaWire

extension SyncSession {
    /// Sends a session request (END_SESSION, REGISTER_PUSH_TOKEN, BLOCK_USER) whose id is
    /// `id` and returns once the node answered it: ACK, or the ERROR as a `ClientError`.
    func sendAwaited(_ frame: Frame, id: UUID) async throws(ClientError) {
        pending[awaited: id] = AwaitedRequest(frame: frame.type)
        do {
            try await channel.send(frame)
        } catch {
            pending[awaited: id] = nil
            throw error
        }
        let outcome = await withCheckedContinuation { (caller: CheckedContinuation<Result<Void, ClientError>, Never>) in
            if let result = pending[awaited: id]?.result {
                caller.resume(returning: result)
            } else {
                pending[awaited: id]?.caller = caller
            }
        }
        pending[awaited: id] = nil
        try outcome.get()
    }

    /// The node answered the awaited request `id` (or the stream ended first): its caller
    /// gets `result`; a push registration nobody awaits is forgotten when refused.
    func finishAwaited(_ id: UUID, _ result: Result<Void, ClientError>) async {
        guard var request = pending[awaited: id], request.result == nil else { return }
        if request.unawaited {
            pending[awaited: id] = nil
            return
        }
        if let stored = request.stored {
            pending[awaited: id] = nil
            if case .failure(let error) = result, error.code == .invalidPushToken {
                try? await store.forgetDevicePushTokenAsync(ifStill: stored)
            }
            return
        }
        request.result = result
        if let caller = request.caller {
            request.caller = nil
            caller.resume(returning: result)
        }
        pending[awaited: id] = request
    }

    /// The stream ended: every request still waiting fails together with `disconnected`,
    /// naming what it was; sent commands stay in the outbox for the next session.
    func failPendingRequests() async {
        for id in pending.ids {
            switch pending[id] {
            case .awaited(let request)?:
                await finishAwaited(
                    id,
                    .failure(
                        ClientError(
                            .disconnected, "the sync stream ended before the node answered \(request.frame.name)")))
            case .history?:
                _ = try? await finishHistory(
                    id, .failure(ClientError(.disconnected, "the sync stream ended before the node answered")))
            case .sync?, .command?, nil:
                break
            }
        }
    }
}
