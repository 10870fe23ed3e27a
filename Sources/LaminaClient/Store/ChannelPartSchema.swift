import GRDB

/// Migration `v13-channel-content`: the parts of channel messages (SPEC §6.8) live in the
/// `part` table beside those of conversation messages, so the content machinery (transfer
/// status, auto-download, access, purge, disk use) serves both by `MessagePartID`. `part`
/// loses its foreign key to `message` (a channel message's id is in `channel_message`);
/// triggers delete a message's parts with it, whichever table held it. The triggers and indexes
/// `part` had before (those of a later migration too, when a store ran it first) are made again
/// on the rebuilt table.
enum ChannelPartSchema {
    static let migration = "v13-channel-content"

    static func migrate(_ db: Database) throws {
        let kept = try String.fetchAll(
            db,
            sql: """
                SELECT sql FROM sqlite_master WHERE tbl_name = 'part' AND type IN ('index', 'trigger') AND sql IS NOT NULL
                ORDER BY type = 'trigger', name
                """)
        // A trigger of another table that names `part` must not stop the rename below.
        try db.execute(sql: "PRAGMA legacy_alter_table = ON")
        try db.execute(sql: rebuild)
        try db.execute(sql: "PRAGMA legacy_alter_table = OFF")
        for sql in kept { try db.execute(sql: sql) }
        try db.execute(sql: triggers)
    }

    private static let rebuild = """
        CREATE TABLE part_v13 (
            message_id BLOB NOT NULL,
            idx INTEGER NOT NULL,
            part_id BLOB NOT NULL,
            mime_type TEXT NOT NULL,
            inline_bytes BLOB,
            content_id BLOB,
            content_size INTEGER,
            content_sha256 BLOB,
            local_path TEXT,
            local_size INTEGER NOT NULL DEFAULT 0,
            transfer_status INTEGER NOT NULL,
            last_access INTEGER,
            auto_downloaded INTEGER NOT NULL DEFAULT 0,
            purged INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (message_id, part_id)
        ) WITHOUT ROWID;
        INSERT INTO part_v13 (message_id, idx, part_id, mime_type, inline_bytes, content_id, content_size, content_sha256,
                              local_path, local_size, transfer_status, last_access, auto_downloaded, purged)
            SELECT message_id, idx, part_id, mime_type, inline_bytes, content_id, content_size, content_sha256,
                   local_path, local_size, transfer_status, last_access, auto_downloaded, purged FROM part;
        DROP TABLE part;
        ALTER TABLE part_v13 RENAME TO part;
        """

    private static let triggers = """
        CREATE TRIGGER part_message_delete AFTER DELETE ON message BEGIN
            DELETE FROM part WHERE message_id = OLD.id;
        END;
        CREATE TRIGGER part_message_rename AFTER UPDATE OF id ON message WHEN OLD.id IS NOT NEW.id BEGIN
            UPDATE part SET message_id = NEW.id WHERE message_id = OLD.id;
        END;
        CREATE TRIGGER part_channel_message_delete AFTER DELETE ON channel_message BEGIN
            DELETE FROM part WHERE message_id = OLD.id;
        END;
        """
}
