import Foundation
import LaminaMerge
import LaminaModel

/// Users' notification levels per conversation (SPEC §6.10), one register each, decided by
/// `NotificationSetting`'s rule for local and peers' writes alike.
extension StorageTransaction {
    /// Applies `write` to `user`'s register of `conversation`; true when it holds now (it won
    /// over the one held, or there was none).
    @discardableResult
    package func applyNotificationLevel(
        _ write: NotificationSetting.Write, of user: UserID, in conversation: ConversationID
    ) throws(StorageError) -> Bool {
        var setting = try read.notificationSetting(of: user, in: conversation)
        let before = setting.current
        setting.apply(write)
        guard let after = setting.current, after != before else { return false }
        let (p, l, n) = try Columns.hlc(after.at)
        let until: Int64? = after.until.map { Int64(clamping: $0) }
        try db.run(
            """
            INSERT INTO notification_levels (user_id, conversation_id, level, until_ms, hlc_physical, hlc_logical, hlc_node)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (user_id, conversation_id) DO UPDATE SET level = excluded.level, until_ms = excluded.until_ms,
                hlc_physical = excluded.hlc_physical, hlc_logical = excluded.hlc_logical, hlc_node = excluded.hlc_node
            """,
            [
                user.rawValue, Columns.blob(conversation.uuid), Int64(after.level.rawValue), until, p, l, n,
            ])
        return true
    }
}

extension StorageReader {
    /// `user`'s register of `conversation` (empty: never set, the level is `all`).
    package func notificationSetting(of user: UserID, in conversation: ConversationID) throws(StorageError)
        -> NotificationSetting
    {
        guard
            let row = try db.row(
                """
                SELECT level, until_ms, hlc_physical, hlc_logical, hlc_node FROM notification_levels
                WHERE user_id = ? AND conversation_id = ?
                """,
                [user.rawValue, Columns.blob(conversation.uuid)])
        else { return NotificationSetting() }
        return try Self.setting(row)
    }

    /// The registers of the users who set a level for `conversation` (a send's push decision:
    /// one index read, whatever the number of participants).
    package func notificationSettings(in conversation: ConversationID) throws(StorageError)
        -> [UserID: NotificationSetting]
    {
        var out: [UserID: NotificationSetting] = [:]
        for row in try db.rows(
            """
            SELECT user_id, level, until_ms, hlc_physical, hlc_logical, hlc_node FROM notification_levels
            WHERE conversation_id = ?
            """,
            [Columns.blob(conversation.uuid)])
        {
            out[try Columns.user(row, "user_id")] = try Self.setting(row)
        }
        return out
    }

    /// Every register `user` set, by conversation (snapshots, the badge).
    package func notificationSettings(of user: UserID) throws(StorageError) -> [ConversationID: NotificationSetting] {
        var out: [ConversationID: NotificationSetting] = [:]
        for row in try db.rows(
            """
            SELECT conversation_id, level, until_ms, hlc_physical, hlc_logical, hlc_node FROM notification_levels
            WHERE user_id = ? ORDER BY conversation_id
            """,
            [user.rawValue])
        {
            let id: Data? = row["conversation_id"]
            out[ConversationID(uuid: try Columns.uuid(id, column: "conversation_id"))] = try Self.setting(row)
        }
        return out
    }

    /// Every register, in one canonical text (part of the convergence digest).
    package func replicatedNotificationLevels() throws(StorageError) -> String {
        var text = ""
        for row in try db.rows(
            """
            SELECT user_id, conversation_id, level, until_ms, hlc_physical, hlc_logical, hlc_node
            FROM notification_levels ORDER BY user_id, conversation_id
            """)
        {
            let id: Data? = row["conversation_id"]
            let conversation = try Columns.uuid(id, column: "conversation_id")
            let setting = try Self.setting(row)
            guard let w = setting.current else { continue }
            text +=
                "n \(row["user_id"] as String) \(conversation.uuidString.lowercased()) \(w.level.rawValue) \(w.until.map { String($0) } ?? "-") \(w.at)\n"
        }
        return text
    }

    private static func setting(_ row: Row) throws(StorageError) -> NotificationSetting {
        let raw: Int64 = row["level"]
        guard let level = UInt8(exactly: raw).flatMap(NotificationLevel.init(rawValue:)) else {
            throw StorageError(.corrupt, "notification level \(raw) is not one of 0...2")
        }
        let until: Int64? = row["until_ms"]
        var setting = NotificationSetting()
        setting.apply(
            NotificationSetting.Write(
                level: level, until: until.map { UInt64(clamping: $0) }, at: try Columns.hlc(row, "hlc")))
        return setting
    }
}
