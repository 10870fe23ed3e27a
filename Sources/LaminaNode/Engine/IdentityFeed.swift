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
    /// change for replication and the webhooks (`Identity.created`, `.updated`, `.deleted`)
    /// and appends it to the audience's feeds. Publish the returned feed
    /// entries and notify ``replicationSignal`` once `tx` committed.
    func storeIdentity(_ identity: StoredIdentity?, of user: UserID, in tx: StorageTransaction) throws -> (
        Bool, [FeedChange]
    ) {
        let now = Timestamp.now()
        let wanted = [WebhookEventType.identityCreated, .identityUpdated, .identityDeleted].contains(
            where: webhooks.wants)
        let previous = wanted ? try tx.read.identity(of: user) : nil
        if let identity {
            try tx.putIdentity(identity, of: user, at: now)
        } else {
            guard try tx.deleteIdentity(of: user) else { return (false, []) }
        }
        if wanted {
            // Set by the backend: no actor. A deletion carries the identity as it was.
            let type: WebhookEventType =
                identity == nil ? .identityDeleted : previous == nil ? .identityCreated : .identityUpdated
            if let shown = identity ?? previous, type != .identityUpdated || previous != identity {
                try webhooks.record(type, actor: nil, in: tx, at: now) {
                    .identity(WebhookIdentity(user: user.rawValue, identity: shown))
                }
            }
        }
        let change = IdentityChange(
            user: user, identity: identity.map { .init(values: $0.values, metadata: $0.metadata) })
        try recordUserState(.identity(change), in: tx)
        var context = CommandContext(tx: tx, user: user, engine: self, now: now)
        try context.emitIdentity(change)
        return (true, context.changes)
    }
}
