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

/// Client migration `v19-notification-level-undo`: for each SET_NOTIFICATION_LEVEL in the outbox,
/// the level it replaced here (the node's, as far as this device knows), so a refusal puts it
/// back. A row goes with its outbox entry (acknowledged or failed).
enum NotificationLevelUndo {
    static let migration = "v19-notification-level-undo"

    static let create = """
        CREATE TABLE notification_level_undo (
            command_id BLOB PRIMARY KEY NOT NULL REFERENCES outbox(id) ON DELETE CASCADE,
            conversation_id BLOB NOT NULL,
            level INTEGER NOT NULL,
            until INTEGER
        ) WITHOUT ROWID;
        CREATE INDEX notification_level_undo_conversation ON notification_level_undo(conversation_id);
        """

    /// The queued level commands of a conversation, in outbox order.
    static let pending = """
        SELECT u.command_id, o.seq FROM notification_level_undo u JOIN outbox o ON o.id = u.command_id
        WHERE u.conversation_id = ? ORDER BY o.seq
        """
}

extension LocalStore {
    /// Sets a conversation's level here and queues `entry` (its SET_NOTIFICATION_LEVEL) in one
    /// transaction, keeping the level it replaces for a refusal to restore.
    func setNotificationLevelLocally(
        _ level: NotificationLevel, until: Timestamp?, of conversation: ConversationID, command entry: OutboxEntry
    ) throws(ClientError) {
        try write { ctx in
            let id = try StoreReader.resolve(ctx.db, conversation)
            guard let before = try StoreReader.conversation(ctx.db, id) else { return }
            try ctx.applyNotificationLevel(level, until: until, of: id)
            try ctx.enqueue(entry)
            try ctx.db.execute(
                sql: """
                    INSERT INTO notification_level_undo(command_id, conversation_id, level, until) VALUES (?, ?, ?, ?)
                    ON CONFLICT DO NOTHING
                    """,
                arguments: [
                    StoreCoding.blob(entry.id), StoreCoding.blob(id), Int(before.notificationLevel.rawValue),
                    before.notificationLevelUntil?.millisecondsSince1970,
                ])
        }
    }
}

extension WriteContext {
    /// The node refused the level command `command` (before its outbox entry goes): the level
    /// it replaced comes back, told as an update of the conversation; when a later level of the
    /// same conversation is queued, that one shows already and takes over what to restore.
    func undoNotificationLevel(of command: UUID) throws {
        guard
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT u.conversation_id, u.level, u.until, o.seq FROM notification_level_undo u
                    JOIN outbox o ON o.id = u.command_id WHERE u.command_id = ?
                    """, arguments: [StoreCoding.blob(command)])
        else { return }
        let conversation: Data = row["conversation_id"]
        let level = NotificationLevel(rawValue: UInt8(clamping: row["level"] as Int)) ?? .all
        let until: Int64? = row["until"]
        let seq: Int64 = row["seq"]
        let later = try Row.fetchAll(db, sql: NotificationLevelUndo.pending, arguments: [conversation]).first {
            ($0["seq"] as Int64) > seq
        }
        if let later {
            try db.execute(
                sql: "UPDATE notification_level_undo SET level = ?, until = ? WHERE command_id = ?",
                arguments: [Int(level.rawValue), until, later["command_id"] as Data])
        } else {
            try applyNotificationLevel(
                level, until: until.map(Timestamp.init(millisecondsSince1970:)),
                of: ConversationID(uuid: StoreCoding.uuid(conversation)))
        }
    }

    /// The node told the conversation's level (its feed): that is what the first queued level
    /// command of the conversation, if any, now replaces.
    func rebaseNotificationLevelUndo(_ level: NotificationLevel, until: Timestamp?, of named: ConversationID) throws {
        let id = try StoreReader.resolve(db, named)
        guard
            let first = try Row.fetchOne(db, sql: NotificationLevelUndo.pending, arguments: [StoreCoding.blob(id)])
        else { return }
        try db.execute(
            sql: "UPDATE notification_level_undo SET level = ?, until = ? WHERE command_id = ?",
            arguments: [Int(level.rawValue), until?.millisecondsSince1970, first["command_id"] as Data])
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
