/// Replies and threads (SPEC §6.2, replies feature): one row per reply, keyed by its thread's
/// root and its position, so a thread's history is one range read of this index and its
/// summary (LaminaMerge's `ThreadSummary`) one range read too. A message that is no reply
/// costs nothing here; the reply's root is also in its body (`MessageBodyCoding`), so every
/// read of the message carries it. Rows stay when the reply is deleted (the deletion is the
/// message row's flag, the summary leaves it out) and follow their messages into a distinct
/// merge's survivor (the root id does not change).
enum ThreadSchema {
    static let migration = "v24-threads"

    static let sqlite: [String] = [
        """
        CREATE TABLE thread_replies (
            root_id BLOB NOT NULL CHECK (length(root_id) = 16),
            pos_physical INTEGER NOT NULL,
            pos_logical INTEGER NOT NULL,
            pos_node INTEGER NOT NULL,
            message_id BLOB NOT NULL UNIQUE CHECK (length(message_id) = 16),
            PRIMARY KEY (root_id, pos_physical, pos_logical, pos_node)
        ) STRICT, WITHOUT ROWID
        """
    ]

    static let postgres: [String] = [
        """
        CREATE TABLE thread_replies (
            root_id BYTEA NOT NULL,
            pos_physical BIGINT NOT NULL,
            pos_logical BIGINT NOT NULL,
            pos_node BIGINT NOT NULL,
            message_id BYTEA NOT NULL UNIQUE,
            PRIMARY KEY (root_id, pos_physical, pos_logical, pos_node)
        )
        """
    ]
}
