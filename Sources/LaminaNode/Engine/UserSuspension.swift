import LaminaModel
import LaminaStore
import LaminaWire

/// Suspended users (Layer's Platform API: `PATCH /users/:id` `suspended`): a suspended user
/// cannot log in (AUTHENTICATE and the Client API's `POST /sessions` answer `forbidden`), and
/// suspending one revokes every session of theirs, so their open streams end with
/// `session-revoked`. They stay participants of their conversations; the backend can still act
/// for them. Unsuspended, they log in again.
extension NodeEngine {
    /// Suspends or unsuspends `user`; whether that changed anything. The change replicates to
    /// peers (REPLICATE kind 70, a last-writer-wins register per user, SPEC §6.5). Suspending
    /// revokes their sessions (replicated like `DELETE /users/:id/sessions`).
    @discardableResult
    func setSuspended(_ suspended: Bool, user: UserID) async throws -> Bool {
        let changed = try await store.write { [self] tx in
            let changed = try tx.setSuspended(suspended, user: user, at: .now())
            if changed {
                try recordUserState(.suspension(SuspensionChange(user: user, suspended: suspended)), in: tx)
            }
            return changed
        }
        if changed { replicationSignal.notify() }
        if suspended { try await revokeSessions(of: user) }
        return changed
    }

    /// Whether `user` is suspended.
    func isSuspended(_ user: UserID) async throws -> Bool {
        try await store.read { r in try r.isSuspended(user) }
    }

    /// Throws `forbidden` when `user` is suspended (at login).
    func checkNotSuspended(_ user: UserID) async throws {
        if try await isSuspended(user) {
            throw WireError(.forbidden, "\(user.rawValue) is suspended; the app's backend can unsuspend them")
        }
    }
}
