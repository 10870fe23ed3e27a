import Foundation
import LaminaModel
import LaminaWire

/// The END_SESSION a session sent (SPEC §5.8), and the caller waiting for its answer.
struct EndSessionRequest {
    var id: UUID
    var result: Result<Void, ClientError>?
    var caller: CheckedContinuation<Result<Void, ClientError>, Never>?
}

extension SyncSession {
    /// Ends this session on the node for good (SPEC §5.8): the node answers the commands sent
    /// before, revokes the session token and acknowledges; the session then ends with
    /// `SyncSessionEnd.signedOut` and the token is forgotten. Only while live.
    public func endSession() async throws(ClientError) {
        guard state == .live else { throw ClientError(.notConnected, "the session is not live") }
        guard endRequest == nil else { throw ClientError(.invalidArgument, "the session is already being ended") }
        let id = UUID()
        endRequest = EndSessionRequest(id: id)
        do {
            try await channel.send(.endSession(EndSession(requestID: id)))
        } catch {
            endRequest = nil
            throw error
        }
        let outcome = await withCheckedContinuation { (caller: CheckedContinuation<Result<Void, ClientError>, Never>) in
            if let result = endRequest?.result {
                caller.resume(returning: result)
            } else {
                endRequest?.caller = caller
            }
        }
        if case .failure = outcome { endRequest = nil }  // the session stays: a retry may be sent
        try outcome.get()
    }

    /// The node answered END_SESSION, or the stream ended first.
    func finishEndSession(_ result: Result<Void, ClientError>) {
        guard var request = endRequest, request.result == nil else { return }
        request.result = result
        if let caller = request.caller {
            request.caller = nil
            caller.resume(returning: result)
        }
        endRequest = request
    }
}
