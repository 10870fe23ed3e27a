import Foundation
import LaminaModel
import LaminaWire

extension NodeSession {
    /// SET_PRESENCE (SPEC §6.6): the session's user chooses a status for all their devices.
    /// Limited per user (``NodeEngine/presenceChoicesPerSecond``, so a user cannot make the
    /// node fan out faster than that); `offline` is `invalid-argument`. Answered with ACK once
    /// applied in memory (presence is never stored).
    func setPresence(_ request: SetPresence, as auth: Auth) {
        guard request.status.isChoosable else {
            return reply(
                WireError(
                    .invalidArgument, "a device cannot choose offline (choose invisible to appear offline to others)"),
                requestID: request.requestID)
        }
        if let wait = engine.presenceBudget.take([1], for: auth.user) {
            var refusal = ErrorFrame(
                WireError(
                    .overloaded,
                    "over \(Int(NodeEngine.presenceChoicesPerSecond)) presence choices a second (burst \(Int(NodeEngine.presenceChoiceBurst)))"
                ),
                requestID: request.requestID)
            let milliseconds = wait.components.seconds * 1_000 + wait.components.attoseconds / 1_000_000_000_000_000
            refusal.retryAfterMilliseconds = UInt32(clamping: max(1, milliseconds))
            return send(.error(refusal))
        }
        engine.choosePresence(request.status, of: auth.user)
        send(.ack(Ack(requestID: request.requestID)))
    }
}
