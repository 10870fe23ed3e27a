import LaminaModel
import LaminaWire

/// A session's login lives `sessionLifetimeSeconds` (Layer's session TTL): once it is over
/// the token is refused where it is presented (RESUME_SESSION, the Client API) and a stream
/// still open on it ends with a fatal `session-expired`, so the SDK logs in again.
extension NodeSession {
    /// Ends this session with `session-expired` at `expiresAt` unless it closed or logged in
    /// anew (another token) before; replaces an earlier timer.
    func expire(_ tokenHash: [UInt8], at expiresAt: Timestamp) {
        let delay = max(0, expiresAt.millisecondsSince1970 - Timestamp.now().millisecondsSince1970)
        let timer = Task { [weak self] in
            do { try await Task.sleep(for: .milliseconds(delay)) } catch { return }
            guard let self, self.state.withLockedValue({ $0.auth?.tokenHash == tokenHash }) else { return }
            self.fail(WireError(.sessionExpired, "the session expired (its lifetime is over); log in again"))
        }
        expiry.withLockedValue { previous in
            previous?.cancel()
            previous = timer
        }
    }
}
