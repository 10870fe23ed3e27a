import Foundation
import GRDB
import LaminaMerge
import LaminaModel

/// Client migration `v17-notification-levels`: the local user's notification level of each
/// conversation (SPEC §6.10), kept on the conversation's row (what this device set, or the
/// feed's `notification-level-changed` told), and the messages' mentions (`message_mention`).
enum NotificationLevelSchema {
    static let migration = "v17-notification-levels"

    static func migrate(_ db: Database) throws {
        try db.execute(
            sql: """
                ALTER TABLE conversation ADD COLUMN notification_level INTEGER NOT NULL DEFAULT 0
                    CHECK (notification_level IN (0, 1, 2))
                """)
        try db.execute(sql: "ALTER TABLE conversation ADD COLUMN notification_until INTEGER")
        try db.execute(sql: StoredMentions.create)
    }
}

/// Object-change property name of a conversation's notification level (the level in force,
/// as a `NotificationLevel` raw value).
public enum NotificationLevelProperty {
    public static let notificationLevel = "notificationLevel"
}

extension WriteContext {
    /// Sets the conversation's level (a merged-away id: the survivor's); a conversation not
    /// held here is left alone (its level comes with its snapshot).
    func applyNotificationLevel(_ level: NotificationLevel, until: Timestamp?, of named: ConversationID) throws {
        let id = try StoreReader.resolve(db, named)
        guard let before = try StoreReader.conversation(db, id) else { return }
        guard before.notificationLevel != level || before.notificationLevelUntil != until else { return }
        try db.execute(
            sql: "UPDATE conversation SET notification_level = ?, notification_until = ? WHERE id = ?",
            arguments: [Int(level.rawValue), until?.millisecondsSince1970, StoreCoding.blob(id)])
        record(
            ObjectChange(
                type: .update, object: .conversation(before.conversation),
                property: NotificationLevelProperty.notificationLevel,
                before: .integer(Int64(before.notificationLevel.rawValue)), after: .integer(Int64(level.rawValue))))
    }
}

extension StoredConversation {
    /// The level in force at `now`: `all` once `notificationLevelUntil` has passed.
    public func notificationLevel(at now: Timestamp) -> NotificationLevel {
        if let until = notificationLevelUntil, until <= now { return .all }
        return notificationLevel
    }
}

/// The users each message mentions (SPEC §3.17), a row per user: `Message.mentions`, and the
/// messages query's `mentions` property (`contains` a user: the messages mentioning them).
enum StoredMentions {
    static let create = """
        CREATE TABLE message_mention (
            message_id BLOB NOT NULL REFERENCES message(id) ON DELETE CASCADE ON UPDATE CASCADE,
            user_id TEXT NOT NULL,
            PRIMARY KEY (message_id, user_id)
        ) WITHOUT ROWID;
        CREATE INDEX message_mention_user ON message_mention(user_id, message_id);
        """

    static func mentions(_ db: Database, of message: Data) throws -> Set<UserID> {
        var out = Set<UserID>()
        for raw in try String.fetchAll(
            db.cachedStatement(sql: "SELECT user_id FROM message_mention WHERE message_id = ?"), arguments: [message])
        {
            out.insert(try StoreCoding.user(raw))
        }
        return out
    }

    static func insert(_ db: Database, _ users: Set<UserID>, of message: Data) throws {
        for user in users {
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO message_mention(message_id, user_id) VALUES (?, ?)")
                .execute(arguments: [message, user.rawValue])
        }
    }

    static func delete(_ db: Database, of message: Data) throws {
        try db.execute(sql: "DELETE FROM message_mention WHERE message_id = ?", arguments: [message])
    }
}
