import Foundation
import GRDB
import LaminaModel

/// Users' identities in the local store (table `identity`), as the node tells them.
enum StoredIdentities {
    static func identity(_ db: Database, _ user: UserID) throws -> UserIdentity? {
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT fields, metadata FROM identity WHERE user_id = ?", arguments: [user.rawValue])
        else {
            return nil
        }
        return UserIdentity(userID: user, values: try map(row["fields"]), metadata: try map(row["metadata"]))
    }

    /// The identity a row of table `identity` holds.
    static func identity(row: Row) throws -> UserIdentity {
        let text: String = row["user_id"]
        return UserIdentity(
            userID: try UserID(text), values: try map(row["fields"]), metadata: try map(row["metadata"]))
    }

    static func put(_ db: Database, _ identity: UserIdentity) throws {
        try db.execute(
            sql:
                "INSERT INTO identity (user_id, fields, metadata) VALUES (?, ?, ?) ON CONFLICT (user_id) DO UPDATE SET fields = excluded.fields, metadata = excluded.metadata",
            arguments: [identity.userID.rawValue, try text(identity.values), try text(identity.metadata)])
    }

    static func delete(_ db: Database, _ user: UserID) throws {
        try db.execute(sql: "DELETE FROM identity WHERE user_id = ?", arguments: [user.rawValue])
    }

    private static func text(_ map: [String: String]) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(map), as: UTF8.self)
    }

    private static func map(_ text: String) throws -> [String: String] {
        try JSONDecoder().decode([String: String].self, from: Data(text.utf8))
    }
}

extension WriteContext {
    /// Stores (or deletes) a user's identity and reports it as a create, an update of
    /// property `identity` (before and after) or a delete; nothing when it did not change.
    func applyIdentity(_ identity: UserIdentity?, of user: UserID) throws {
        let before = try StoredIdentities.identity(db, user)
        guard before != identity else { return }
        switch (before, identity) {
        case (nil, let after?):
            try StoredIdentities.put(db, after)
            record(ObjectChange(type: .create, object: .identity(after)))
        case (let before?, let after?):
            try StoredIdentities.put(db, after)
            record(
                ObjectChange(
                    type: .update, object: .identity(after), property: "identity", before: .identity(before),
                    after: .identity(after)))
        case (let before?, nil):
            try StoredIdentities.delete(db, user)
            record(ObjectChange(type: .delete, object: .identity(before)))
        case (nil, nil):
            break
        }
    }
}
