import Foundation
import LaminaModel
import LaminaStore
import LaminaWire

/// Identity changes reach devices (SPEC §6.4 `identity-changed`, kind 12): the user's own and
/// those of every user sharing a live conversation with them.
extension CommandContext {
    /// Appends `change` to the feeds of its user and of everyone sharing a conversation with them.
    mutating func emitIdentity(_ change: IdentityChange) throws {
        try emit(.identityChanged(change), to: try tx.read.identityAudience(of: change.user), conversation: nil)
    }
}

extension NodeEngine {
    /// In `tx`: sets `user`'s identity (nil deletes it; false when there was none), records the
    /// change for replication and appends it to the audience's feeds. Publish the returned feed
    /// entries and notify ``replicationSignal`` once `tx` committed.
    func storeIdentity(_ identity: StoredIdentity?, of user: UserID, in tx: StorageTransaction) throws -> (
        Bool, [FeedChange]
    ) {
        let now = Timestamp.now()
        if let identity {
            try tx.putIdentity(identity, of: user, at: now)
        } else {
            guard try tx.deleteIdentity(of: user) else { return (false, []) }
        }
        let change = IdentityChange(
            user: user, identity: identity.map { .init(values: $0.values, metadata: $0.metadata) })
        try recordUserState(.identity(change), in: tx)
        var context = CommandContext(tx: tx, user: user, engine: self, now: now)
        try context.emitIdentity(change)
        return (true, context.changes)
    }
}
