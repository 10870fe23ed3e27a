/// Reactions on messages (SPEC §6.9): one row per add (its tag, the accepting node's HLC
/// reading), keyed by message, user and key; a removed add keeps its row with `removed` = 1
/// (a remove of a tag not held yet writes that row first, so the add, if it comes later, stays
/// removed). A reaction is present while one of its rows has `removed` = 0 (LaminaMerge's
/// `ReactionSet`). A reaction writes only these rows: never the message's. Deleting a message
/// for everyone deletes its rows.
enum ReactionSchema {
    static let migration = "v23-reactions"

    static let sqlite: [String] = [
        """
        CREATE TABLE message_reactions (
            message_id BLOB NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            reaction_key TEXT NOT NULL,
            tag_physical INTEGER NOT NULL,
            tag_logical INTEGER NOT NULL,
            tag_node INTEGER NOT NULL,
            removed INTEGER NOT NULL DEFAULT 0 CHECK (removed IN (0, 1)),
            PRIMARY KEY (message_id, user_id, reaction_key, tag_physical, tag_logical, tag_node)
        ) STRICT, WITHOUT ROWID
        """
    ]

    static let postgres: [String] = [
        """
        CREATE TABLE message_reactions (
            message_id BYTEA NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            user_id TEXT COLLATE "C" NOT NULL,
            reaction_key TEXT COLLATE "C" NOT NULL,
            tag_physical BIGINT NOT NULL,
            tag_logical BIGINT NOT NULL,
            tag_node BIGINT NOT NULL,
            removed SMALLINT NOT NULL DEFAULT 0 CHECK (removed IN (0, 1)),
            PRIMARY KEY (message_id, user_id, reaction_key, tag_physical, tag_logical, tag_node)
        )
        """
    ]
}
