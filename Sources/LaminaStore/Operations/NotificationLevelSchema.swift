/// Migration `v25-notification-levels` (SPEC §6.10): each user's notification level per
/// conversation, a last-writer-wins register (`NotificationSetting`) kept with the HLC reading of
/// the write that holds, so a peer's write is decided by the same rule. A message's mentions
/// need no table: they travel in its body (SPEC §3.17).
enum NotificationLevelSchema {
    static let migration = "v25-notification-levels"

    static let sqlite: [String] = [
        """
        CREATE TABLE notification_levels (
            user_id TEXT NOT NULL,
            conversation_id BLOB NOT NULL CHECK (length(conversation_id) = 16),
            level INTEGER NOT NULL CHECK (level IN (0, 1, 2)),
            until_ms INTEGER,
            hlc_physical INTEGER NOT NULL,
            hlc_logical INTEGER NOT NULL,
            hlc_node INTEGER NOT NULL,
            PRIMARY KEY (user_id, conversation_id)
        ) STRICT, WITHOUT ROWID
        """,
        "CREATE INDEX notification_levels_conversation ON notification_levels(conversation_id)",
    ]

    static let postgres: [String] = [
        """
        CREATE TABLE notification_levels (
            user_id TEXT COLLATE "C" NOT NULL,
            conversation_id BYTEA NOT NULL,
            level BIGINT NOT NULL CHECK (level IN (0, 1, 2)),
            until_ms BIGINT,
            hlc_physical BIGINT NOT NULL,
            hlc_logical BIGINT NOT NULL,
            hlc_node BIGINT NOT NULL,
            PRIMARY KEY (user_id, conversation_id)
        )
        """,
        "CREATE INDEX notification_levels_conversation ON notification_levels(conversation_id)",
    ]
}
