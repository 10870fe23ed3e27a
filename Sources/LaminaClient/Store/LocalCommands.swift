import Foundation
import GRDB
import LaminaModel

extension LocalStore {
    /// Applies a local edit (participants, metadata, deletions) and enqueues its commands,
    /// in one transaction: the app sees the edit at once, the node gets it in outbox order.
    @discardableResult
    func applyLocal(_ changes: [RemoteChange], outbox: [OutboxEntry]) throws(ClientError) -> [ObjectChange] {
        try write { ctx in
            for change in changes { try ctx.apply(change) }
            for entry in outbox { try ctx.enqueue(entry) }
            return ctx.changes
        }
    }

    /// Whether the outbox holds an entry with this id.
    func outboxContains(_ id: UUID) throws(ClientError) -> Bool {
        try read { db in
            try Bool.fetchOne(
                db, sql: "SELECT EXISTS(SELECT 1 FROM outbox WHERE id = ?)", arguments: [StoreCoding.blob(id)]) ?? false
        }
    }
}
