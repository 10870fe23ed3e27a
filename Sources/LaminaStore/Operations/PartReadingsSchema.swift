/// v27: per-part edits (SPEC §6.2, LaminaMerge's `MessagePartsMap`). `message_part_readings`
/// holds, per message and part id, the reading of the edit that last set or removed the part
/// (`removed`: a tombstone); a part without a row dates from the send. `part_order` in
/// `message_part_updates` is the order register's list of part ids (16 bytes each; its reading
/// is the row's, the latest edit's); NULL in a row written before v27, whose parts all date
/// from that row's reading in the body's order. History and snapshots read neither: the body
/// holds the merged list, the row the edit time, as before.
enum PartReadingsSchema {
    static let migration = "v27-part-readings"

    static let sqlite: [String] = [
        """
        CREATE TABLE message_part_readings (
            message_id BLOB NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            part_id BLOB NOT NULL CHECK (length(part_id) = 16),
            hlc_physical INTEGER NOT NULL,
            hlc_logical INTEGER NOT NULL,
            hlc_node INTEGER NOT NULL,
            removed INTEGER NOT NULL CHECK (removed IN (0, 1)),
            PRIMARY KEY (message_id, part_id)
        ) STRICT, WITHOUT ROWID
        """,
        "ALTER TABLE message_part_updates ADD COLUMN part_order BLOB",
    ]

    static let postgres: [String] = [
        """
        CREATE TABLE message_part_readings (
            message_id BYTEA NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            part_id BYTEA NOT NULL,
            hlc_physical BIGINT NOT NULL,
            hlc_logical BIGINT NOT NULL,
            hlc_node BIGINT NOT NULL,
            removed BIGINT NOT NULL CHECK (removed IN (0, 1)),
            PRIMARY KEY (message_id, part_id)
        )
        """,
        "ALTER TABLE message_part_updates ADD COLUMN part_order BYTEA",
    ]
}
