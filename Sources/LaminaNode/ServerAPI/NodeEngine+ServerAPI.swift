import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire
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
        _ frame: Frame, as user: UserID,
        after: (@Sendable (inout CommandContext, Ack) throws -> Void)? = nil
    ) async throws -> ServerAPICommandResult {
        guard let id = frame.commandID else { throw WireError(.unexpectedFrame, "\(frame.type.name) is not a command") }
        guard !isShuttingDown.withLock({ $0 }) else { throw WireError(.shuttingDown, "the node is shutting down") }
        let key = IdempotencyKey(user: user, id: id)
        let digest = try SHA256Hasher.hash(Array(try frame.encoded().readableBytesView))
        let now = Timestamp.now()
        let result = try await store.write { tx -> CommandResult in
            if let replayed = try Self.replay(frame, key: key, digest: digest, tx.read) { return .replayed(replayed) }
            // A failing command rolls back with the command's own savepoint (the writer's).
            var context = CommandContext(tx: tx, user: user, engine: self, now: now)
            let ack = try context.apply(frame, digest: digest)
            // Refused after recording what must stay (an alias of the existing conversation).
            if let refusal = context.refusal { return .refused(refusal) }
            try after?(&context, ack)
            if case .sendMessage = frame {} else {
                try tx.recordResult(digest + Array(try Frame.ack(ack).encoded().readableBytesView), for: key, at: now)
            }
            return .applied(ack, context.changes)
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
