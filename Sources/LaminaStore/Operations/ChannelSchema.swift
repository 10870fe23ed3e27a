/// Channels (SPEC §6.8), built for large rooms: a channel's message is one row of
/// `channel_messages` (plus the channel's log head moved in `channels`), whatever the member
/// count; members read the log by their own cursor (`log_seq`), and no feed row is written per
/// member per message. Membership is one row per member; joins, leaves and deletions reach the
/// members' feeds.
enum ChannelSchema {
    static let migration = "v18-channels"

    static let sqlite: [String] = [
        """
        CREATE TABLE channels (
            id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
            name TEXT NOT NULL,
            creator TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            head INTEGER NOT NULL DEFAULT 0,
            member_count INTEGER NOT NULL DEFAULT 0,
            deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1))
        ) STRICT
        """,
        "CREATE UNIQUE INDEX channels_live_name ON channels(name) WHERE deleted = 0",
        """
        CREATE TABLE channel_members (
            channel_id BLOB NOT NULL,
            member TEXT NOT NULL,
            joined_at INTEGER NOT NULL,
            PRIMARY KEY (channel_id, member)
        ) STRICT, WITHOUT ROWID
        """,
        "CREATE INDEX channel_members_member ON channel_members(member, channel_id)",
        """
        CREATE TABLE channel_messages (
            channel_id BLOB NOT NULL,
            log_seq INTEGER NOT NULL,
            id BLOB NOT NULL UNIQUE CHECK (length(id) = 16),
            sender TEXT NOT NULL,
            sent_at INTEGER NOT NULL,
            pos_physical INTEGER NOT NULL,
            pos_logical INTEGER NOT NULL,
            pos_node INTEGER NOT NULL,
            body BLOB NOT NULL,
            PRIMARY KEY (channel_id, log_seq)
        ) STRICT, WITHOUT ROWID
        """,
    ]

    static let postgres: [String] = [
        """
        CREATE TABLE channels (
            id BYTEA PRIMARY KEY,
            name TEXT COLLATE "C" NOT NULL,
            creator TEXT COLLATE "C" NOT NULL,
            created_at BIGINT NOT NULL,
            head BIGINT NOT NULL DEFAULT 0,
            member_count BIGINT NOT NULL DEFAULT 0,
            deleted BIGINT NOT NULL DEFAULT 0
        )
        """,
        "CREATE UNIQUE INDEX channels_live_name ON channels(name) WHERE deleted = 0",
        """
        CREATE TABLE channel_members (
            channel_id BYTEA NOT NULL,
            member TEXT COLLATE "C" NOT NULL,
            joined_at BIGINT NOT NULL,
            PRIMARY KEY (channel_id, member)
        )
        """,
        "CREATE INDEX channel_members_member ON channel_members(member, channel_id)",
        """
        CREATE TABLE channel_messages (
            channel_id BYTEA NOT NULL,
            log_seq BIGINT NOT NULL,
            id BYTEA NOT NULL UNIQUE,
            sender TEXT COLLATE "C" NOT NULL,
            sent_at BIGINT NOT NULL,
            pos_physical BIGINT NOT NULL,
            pos_logical BIGINT NOT NULL,
            pos_node BIGINT NOT NULL,
            body BYTEA NOT NULL,
            PRIMARY KEY (channel_id, log_seq)
        )
        """,
    ]
}
