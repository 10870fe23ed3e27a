/// The `message_count` table (migration v8): per conversation, its messages (`total`), those
/// unread (`unread`), sent (`sent`) and not sent yet (`unsent`, no position), always equal to
/// the aggregate over `message` of that conversation. SQLite triggers keep it: every write to
/// `message` moves it in the same statement, whichever path makes it (the row primitives of
/// `WriteContext`, a merge's bulk move, the ON UPDATE / ON DELETE CASCADE of a renamed or
/// deleted conversation), at O(1) per row written. A conversation without a row has no messages.
/// Shipped in migration v8: never edited; a change goes in a later migration.
enum MessageCountSchema {
    static let create = """
        CREATE TABLE message_count (
            conversation_id BLOB PRIMARY KEY NOT NULL,
            total INTEGER NOT NULL,
            unread INTEGER NOT NULL,
            sent INTEGER NOT NULL,
            unsent INTEGER NOT NULL
        ) WITHOUT ROWID;
        INSERT INTO message_count(conversation_id, total, unread, sent, unsent)
            SELECT conversation_id, COUNT(*), SUM(is_unread), SUM(is_sent), SUM(pos_physical IS NULL)
            FROM message GROUP BY conversation_id;

        CREATE TRIGGER message_count_insert AFTER INSERT ON message BEGIN
            \(add("NEW"))
        END;
        CREATE TRIGGER message_count_delete AFTER DELETE ON message BEGIN
            \(remove("OLD"))
        END;
        CREATE TRIGGER message_count_update AFTER UPDATE OF conversation_id, is_unread, is_sent, pos_physical ON message
        WHEN OLD.conversation_id IS NOT NEW.conversation_id OR OLD.is_unread IS NOT NEW.is_unread
            OR OLD.is_sent IS NOT NEW.is_sent OR (OLD.pos_physical IS NULL) IS NOT (NEW.pos_physical IS NULL)
        BEGIN
            \(remove("OLD"))
            \(add("NEW"))
        END;
        CREATE TRIGGER message_count_forget AFTER DELETE ON conversation BEGIN
            DELETE FROM message_count WHERE conversation_id = OLD.id;
        END;
        """

    /// Counts the message row `row` (NEW or OLD) in its conversation.
    private static func add(_ row: String) -> String {
        """
        INSERT INTO message_count(conversation_id, total, unread, sent, unsent)
                VALUES (\(row).conversation_id, 1, \(row).is_unread, \(row).is_sent, \(row).pos_physical IS NULL)
                ON CONFLICT(conversation_id) DO UPDATE SET total = total + 1, unread = unread + excluded.unread,
                    sent = sent + excluded.sent, unsent = unsent + excluded.unsent;
        """
    }

    /// Uncounts the message row `row` (OLD) from its conversation.
    private static func remove(_ row: String) -> String {
        """
        UPDATE message_count SET total = total - 1, unread = unread - \(row).is_unread, sent = sent - \(row).is_sent,
                    unsent = unsent - (\(row).pos_physical IS NULL)
                WHERE conversation_id = \(row).conversation_id;
        """
    }
}
