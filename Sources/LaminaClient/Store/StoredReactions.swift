import Foundation
import GRDB
import LaminaModel

/// The reactions on the messages this device holds (`v15-reactions`, SPEC §6.9): one row per
/// (message, user, key) present, as the node reports it. A reaction never rewrites the message's
/// row; a message's rows go with it.
enum StoredReactions {
    static let migration = "v15-reactions"

    static let create = """
        CREATE TABLE message_reaction (
            message_id BLOB NOT NULL REFERENCES message(id) ON DELETE CASCADE ON UPDATE CASCADE,
            user_id TEXT NOT NULL,
            reaction_key TEXT NOT NULL,
            PRIMARY KEY (message_id, user_id, reaction_key)
        ) WITHOUT ROWID;
        CREATE INDEX message_reaction_user ON message_reaction(user_id, message_id);
        """

    /// The reactions on message `id`: per key, who reacted with it.
    static func reactions(_ db: Database, _ id: MessageID) throws -> [String: Set<UserID>] {
        var out: [String: Set<UserID>] = [:]
        for row in try Row.fetchAll(
            db.cachedStatement(sql: "SELECT user_id, reaction_key FROM message_reaction WHERE message_id = ?"),
            arguments: [StoreCoding.blob(id)])
        {
            out[row["reaction_key"], default: []].insert(try StoreCoding.user(row["user_id"]))
        }
        return out
    }
}

extension StoredMessage {
    /// How many users reacted with each key (keys nobody reacted with are absent).
    public var reactionCounts: [String: Int] { reactions.mapValues(\.count) }

    /// The keys `user` reacted with ("did I react": pass the client's user).
    public func reactionKeys(of user: UserID) -> Set<String> {
        Set(reactions.lazy.filter { $0.value.contains(user) }.map(\.key))
    }
}

extension MessageProperty {
    /// The message's reactions (``StoredMessage/reactions``); an object change of this property
    /// carries them before and after.
    public static let reactions = "reactions"
    /// Queryable: how many reactions the message has (every user and key counted once).
    public static let reactionCount = "reactionCount"
    /// Queryable with `contains` and a user: the messages that user reacted to.
    public static let reactedBy = "reactedBy"
}

extension WriteContext {
    /// A reaction appeared or went away: one row of `message_reaction`; the message's object
    /// change names `reactions`. Nothing for a message this device does not hold.
    func applyReaction(on id: MessageID, user: UserID, key: String, present: Bool) throws {
        guard let before = try StoreReader.message(db, id) else { return }
        let args: StatementArguments = [StoreCoding.blob(id), user.rawValue, key]
        if present {
            try db.cachedStatement(
                sql: "INSERT OR IGNORE INTO message_reaction (message_id, user_id, reaction_key) VALUES (?, ?, ?)"
            ).execute(arguments: args)
        } else {
            try db.cachedStatement(
                sql: "DELETE FROM message_reaction WHERE message_id = ? AND user_id = ? AND reaction_key = ?"
            ).execute(arguments: args)
        }
        guard db.changesCount > 0 else { return }
        var after = before
        if present {
            after.reactions[key, default: []].insert(user)
        } else {
            after.reactions[key]?.remove(user)
            if after.reactions[key]?.isEmpty == true { after.reactions[key] = nil }
        }
        recordReactions(of: after.message, before: before.reactions, after: after.reactions)
    }

    /// A message's reactions become `reactions` (a history answer's or a snapshot's).
    func replaceReactions(of id: MessageID, with reactions: [String: Set<UserID>]) throws {
        guard let before = try StoreReader.message(db, id), before.reactions != reactions else { return }
        let key = StoreCoding.blob(id)
        try db.execute(sql: "DELETE FROM message_reaction WHERE message_id = ?", arguments: [key])
        for (reaction, users) in reactions.sorted(by: { $0.key < $1.key }) {
            for user in users.sorted() {
                try db.cachedStatement(
                    sql: "INSERT OR IGNORE INTO message_reaction (message_id, user_id, reaction_key) VALUES (?, ?, ?)"
                ).execute(arguments: [key, user.rawValue, reaction])
            }
        }
        recordReactions(of: before.message, before: before.reactions, after: reactions)
    }

    private func recordReactions(of message: Message, before: [String: Set<UserID>], after: [String: Set<UserID>]) {
        record(
            ObjectChange(
                type: .update, object: .message(message), property: MessageProperty.reactions,
                before: .reactions(before), after: .reactions(after)))
    }
}
