/// The full-text index of the messages on this device (`v14-message-search`): one FTS5 row per
/// inline text part (`text/*`), kept by triggers in the same transaction as the part, so every
/// path that stores, replaces or deletes a message (sync, local sends, part updates, deletions,
/// history purges) keeps the index exact.
///
/// The index is contentless (the text stays in `part` only); a row's id is the message's rowid
/// × 1,024 + the part's index (a message has at most 1,000 parts), so results join back to
/// `message` without a mapping table. Removing a row from a contentless index needs the text it
/// was indexed with: the triggers pass the old part's bytes. A message's parts leave the index
/// before the message row goes (a `part` row deleted by the cascade no longer finds its message).
enum MessageSearchSchema {
    /// Parts per message are below this (`Limits.maxPartsPerMessage` is 1,000).
    static let rowsPerMessage = 1_024

    static let create = """
        CREATE VIRTUAL TABLE message_search USING fts5(
            body, content = '', tokenize = 'unicode61 remove_diacritics 2'
        );

        CREATE TRIGGER message_search_part_insert AFTER INSERT ON part
        WHEN NEW.inline_bytes IS NOT NULL AND NEW.mime_type LIKE 'text/%'
        BEGIN
            INSERT INTO message_search(rowid, body)
            SELECT m.rowid * 1024 + NEW.idx, CAST(NEW.inline_bytes AS TEXT) FROM message m WHERE m.id = NEW.message_id;
        END;

        CREATE TRIGGER message_search_part_delete AFTER DELETE ON part
        WHEN OLD.inline_bytes IS NOT NULL AND OLD.mime_type LIKE 'text/%'
        BEGIN
            INSERT INTO message_search(message_search, rowid, body)
            SELECT 'delete', m.rowid * 1024 + OLD.idx, CAST(OLD.inline_bytes AS TEXT) FROM message m
            WHERE m.id = OLD.message_id;
        END;

        CREATE TRIGGER message_search_part_update AFTER UPDATE OF inline_bytes, mime_type, idx, message_id ON part
        BEGIN
            INSERT INTO message_search(message_search, rowid, body)
            SELECT 'delete', m.rowid * 1024 + OLD.idx, CAST(OLD.inline_bytes AS TEXT) FROM message m
            WHERE m.id = OLD.message_id AND OLD.inline_bytes IS NOT NULL AND OLD.mime_type LIKE 'text/%';
            INSERT INTO message_search(rowid, body)
            SELECT m.rowid * 1024 + NEW.idx, CAST(NEW.inline_bytes AS TEXT) FROM message m
            WHERE m.id = NEW.message_id AND NEW.inline_bytes IS NOT NULL AND NEW.mime_type LIKE 'text/%';
        END;

        CREATE TRIGGER message_search_message_delete BEFORE DELETE ON message
        BEGIN
            INSERT INTO message_search(message_search, rowid, body)
            SELECT 'delete', OLD.rowid * 1024 + p.idx, CAST(p.inline_bytes AS TEXT) FROM part p
            WHERE p.message_id = OLD.id AND p.inline_bytes IS NOT NULL AND p.mime_type LIKE 'text/%';
        END;

        INSERT INTO message_search(rowid, body)
        SELECT m.rowid * 1024 + p.idx, CAST(p.inline_bytes AS TEXT) FROM part p JOIN message m ON m.id = p.message_id
        WHERE p.inline_bytes IS NOT NULL AND p.mime_type LIKE 'text/%';
        """
}
