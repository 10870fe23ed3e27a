import Foundation
import LaminaModel

/// A user's identity as an app backend set it through the Server API (Layer's identity
/// object): the known string fields and a flat string metadata map.
package struct StoredIdentity: Hashable, Sendable, Codable {
    /// The string properties of an identity, by their Platform API names.
    package static let fields = [
        "display_name", "avatar_url", "first_name", "last_name", "phone_number", "email_address", "public_key",
    ]

    package var values: [String: String]
    package var metadata: [String: String]

    package init(values: [String: String] = [:], metadata: [String: String] = [:]) {
        self.values = values
        self.metadata = metadata
    }
}

extension StorageTransaction {
    /// Creates or replaces `user`'s identity.
    package func putIdentity(_ identity: StoredIdentity, of user: UserID, at time: Timestamp) throws(StorageError) {
        let data: Data
        do { data = try JSONEncoder().encode(identity) } catch {
            throw StorageError(.invalidArgument, "the identity does not encode: \(error)")
        }
        try checkBlob(Array(data), "an identity")
        try db.run(
            "INSERT INTO identities (user_id, identity, updated_at) VALUES (?, ?, ?) ON CONFLICT (user_id) DO UPDATE SET identity = excluded.identity, updated_at = excluded.updated_at",
            [user.rawValue, data, time.millisecondsSince1970])
    }

    /// Deletes `user`'s identity; whether there was one.
    @discardableResult
    package func deleteIdentity(of user: UserID) throws(StorageError) -> Bool {
        try db.run("DELETE FROM identities WHERE user_id = ?", [user.rawValue])
        return db.changesCount == 1
    }
}

extension StorageReader {
    /// `user`'s identity, if one was set.
    package func identity(of user: UserID) throws(StorageError) -> StoredIdentity? {
        try identities(of: [user])[user]
    }

    /// The identities set for any of `users`.
    package func identities(of users: some Collection<UserID>) throws(StorageError) -> [UserID: StoredIdentity] {
        guard !users.isEmpty else { return [:] }
        var out: [UserID: StoredIdentity] = [:]
        let list = Array(users)
        for start in stride(from: 0, to: list.count, by: 500) {
            let chunk = list[start..<min(start + 500, list.count)]
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
            for row in try db.rows(
                "SELECT user_id, identity FROM identities WHERE user_id IN (\(marks))",
                StatementArguments(chunk.map { $0.rawValue }))
            {
                let user = try Columns.user(row, 0)
                let data: Data = row[1]
                do { out[user] = try JSONDecoder().decode(StoredIdentity.self, from: data) } catch {
                    throw StorageError(.corrupt, "the identity of \(user) does not decode: \(error)")
                }
            }
        }
        return out
    }
}

extension StorageReader {
    /// `user`, every user who is a member of a live conversation `user` is a member of, and
    /// every user who follows `user` explicitly: who learns of `user`'s identity changes (SPEC
    /// §6.4 `identity-changed`) and presence (§6.6).
    package func identityAudience(of user: UserID) throws(StorageError) -> Set<UserID> {
        var out = try coMembers(of: user)
        for follower in try followers(of: user) { out.insert(follower) }
        return out
    }

    /// `user`, every co-member of a live conversation and every user `user` follows explicitly:
    /// whose identities and presence `user`'s devices receive (SPEC §6.3 snapshots, §6.6, §6.7).
    package func followedUsers(of user: UserID) throws(StorageError) -> Set<UserID> {
        var out = try coMembers(of: user)
        for followed in try followees(of: user) { out.insert(followed) }
        return out
    }

    /// `user` and every user who is a member of a live conversation `user` is a member of.
    package func coMembers(of user: UserID) throws(StorageError) -> Set<UserID> {
        var out: Set<UserID> = [user]
        for row in try db.rows(
            """
            SELECT DISTINCT q.user_id FROM participants p
            JOIN conversations c ON c.id = p.conversation_id
            JOIN participants q ON q.conversation_id = p.conversation_id
            WHERE p.user_id = ? AND p.is_member = 1 AND q.is_member = 1 AND c.merged_into IS NULL AND c.deleted = 0
            """,
            [user.rawValue])
        {
            out.insert(try Columns.user(row, 0))
        }
        return out
    }
}
