import Foundation
import GRDB
import LaminaModel

/// An identity this device holds (SPEC §6.4 and §6.7): of a user it shares a conversation
/// with, or of one the user follows. What a query over identities returns
/// (`Query<StoredUserIdentity>`). Its `presence` is not stored (presence is soft state):
/// the client's `presence(of:)` has it.
public struct StoredUserIdentity: Hashable, Sendable, Identifiable {
    public var identity: UserIdentity
    /// Whether the user follows them explicitly (from any of their devices or the Server API).
    public var isFollowed: Bool

    public var id: UserID { identity.userID }
}

/// The names of the properties a query over identities may name.
public enum IdentityProperty {
    /// The user id (`equalTo`, `in`, sorting).
    public static let userID = "userID"
    /// The identity's `display_name` (nil when none was set).
    public static let displayName = "displayName"
    /// Whether the user follows them explicitly.
    public static let isFollowed = "isFollowed"
    /// The identity's values or metadata (an update's property; not queryable).
    public static let identity = "identity"
}

extension StoredUserIdentity: QueryableObject {
    public static var queryTarget: QueryTarget { .identities }

    public static func load(_ row: QueryRow) throws -> StoredUserIdentity {
        let identity = try StoredIdentities.identity(row: row.row)
        let followed =
            try Bool.fetchOne(
                row.db, sql: "SELECT EXISTS (SELECT 1 FROM followed_user WHERE user_id = ?)",
                arguments: [identity.userID.rawValue]) ?? false
        return StoredUserIdentity(identity: identity, isFollowed: followed)
    }

    public static func identifier(_ row: QueryRow) throws -> UserID {
        let text: String = row.row[0]
        return try UserID(text)
    }

    public static let updatableProperties: Set<String> = [IdentityProperty.identity, IdentityProperty.isFollowed]

    public func changedProperties(since old: StoredUserIdentity) -> Set<String> {
        var out: Set<String> = []
        if identity != old.identity { out.insert(IdentityProperty.identity) }
        if isFollowed != old.isFollowed { out.insert(IdentityProperty.isFollowed) }
        return out
    }
}
