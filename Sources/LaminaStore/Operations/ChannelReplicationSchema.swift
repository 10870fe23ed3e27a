/// Channels across peer nodes (SPEC §6.8, §6.5): each user's standing in a channel (joined or
/// not, at which HLC reading) kept after a leave too, so a peer's older join or leave loses to
/// it whatever the order of arrival (LaminaMerge's `ChannelMembership`); channels that came
/// from a peer are marked `replicated`, and the live-name index covers only the channels
/// created by this node and the nodes sharing its store (two peers may create one name
/// concurrently, SPEC §6.8).
enum ChannelReplicationSchema {
    static let migration = "v21-channels-peers"

    /// `channel_members.joined_at` as the reading of a member's standing before this migration
    /// (node 0, stored as the node column's bias, `Columns.node`).
    private static let backfill = """
        INSERT INTO channel_standings (channel_id, member, is_member, at_physical, at_logical, at_node)
        SELECT channel_id, member, 1, joined_at, 0, -9223372036854775808 FROM channel_members
        """

    static let sqlite: [String] = [
        """
        CREATE TABLE channel_standings (
            channel_id BLOB NOT NULL,
            member TEXT NOT NULL,
            is_member INTEGER NOT NULL CHECK (is_member IN (0, 1)),
            at_physical INTEGER NOT NULL,
            at_logical INTEGER NOT NULL,
            at_node INTEGER NOT NULL,
            PRIMARY KEY (channel_id, member)
        ) STRICT, WITHOUT ROWID
        """,
        backfill,
        "ALTER TABLE channels ADD COLUMN replicated INTEGER NOT NULL DEFAULT 0 CHECK (replicated IN (0, 1))",
        "DROP INDEX channels_live_name",
        "CREATE UNIQUE INDEX channels_live_name ON channels(name) WHERE deleted = 0 AND replicated = 0",
        "CREATE INDEX channels_name ON channels(name, created_at)",
    ]

    static let postgres: [String] = [
        """
        CREATE TABLE channel_standings (
            channel_id BYTEA NOT NULL,
            member TEXT COLLATE "C" NOT NULL,
            is_member BIGINT NOT NULL,
            at_physical BIGINT NOT NULL,
            at_logical BIGINT NOT NULL,
            at_node BIGINT NOT NULL,
            PRIMARY KEY (channel_id, member)
        )
        """,
        backfill,
        "ALTER TABLE channels ADD COLUMN replicated BIGINT NOT NULL DEFAULT 0",
        "DROP INDEX channels_live_name",
        "CREATE UNIQUE INDEX channels_live_name ON channels(name) WHERE deleted = 0 AND replicated = 0",
        "CREATE INDEX channels_name ON channels(name, created_at)",
    ]
}
