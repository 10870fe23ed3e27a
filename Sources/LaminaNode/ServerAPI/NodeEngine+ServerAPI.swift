import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore

/// What a Server API command produced.
struct ServerAPICommandResult: Sendable {
    var ack: Ack
    /// False when the command was a retry of one applied before.
    var applied: Bool
}

extension NodeEngine {
    /// Runs one command frame on behalf of `user` through the same path as a sync session's
    /// command (``CommandContext`` rules, one group-commit transaction with its feed entries
    /// and idempotency record, fan-out to live sessions after the commit). `after` runs in
    /// the same transaction once the command applied, for what the Server API adds (a
    /// conversation created by the backend reaches every participant at once).
    func runServerAPICommand(
        _ frame: Frame, as user: UserID, pushOverrides: [UserID: PushConfiguration] = [:], contentOwner: UserID? = nil,
        patchOperation: Int? = nil, after: (@Sendable (inout CommandContext, Ack) throws -> Void)? = nil
    ) async throws -> ServerAPICommandResult {
        guard let id = frame.commandID else { throw WireError(.unexpectedFrame, "\(frame.type.name) is not a command") }
        guard !isShuttingDown.withLockedValue({ $0 }) else {
            throw WireError(.shuttingDown, "the node is shutting down")
        }
        let key = IdempotencyKey(user: user, id: id)
        let digest = try SHA256Hasher.hash(Array(try frame.encoded().readableBytesView))
        let now = Timestamp.now()
        let result = try await store.write { [self] tx -> CommandResult in
            try command(
                frame, as: user, key: key, digest: digest, now: now, in: tx, pushOverrides: pushOverrides,
                contentOwner: contentOwner, patchOperation: patchOperation, after: after)
        }
        switch result {
        case .applied(let ack, let changes):
            publish(changes)
            return ServerAPICommandResult(ack: ack, applied: true)
        case .replayed(let ack):
            return ServerAPICommandResult(ack: ack, applied: false)
        case .refused(let conflict):
            throw conflict
        }
    }
}
