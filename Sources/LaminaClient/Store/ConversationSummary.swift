import Foundation
import GRDB
import LaminaModel

/// What `WriteContext.finish()` derives a conversation's summary from, read in time
/// independent of the conversation's size (a send or an arriving message used to scan every
/// message of its conversation, twice).
///
/// The counts come from `message_count`, which SQLite triggers keep equal to the aggregate
/// over `message` (`MessageCountSchema`). Triggers rather than deltas tracked in Swift: no
/// write path can forget them, bulk statements (a merge's move, a cascade) included; rather
/// than partial indexes: those would still cost O(unread) and O(unsent) per transaction, and
/// the total needs a counter anyway. The last message is one lookup along the
/// `message_position` index: the newest not sent yet when there is one (they come last),
/// else the highest position; ordering by `pos_physical IS NULL` sorted every message.
struct ConversationSummary: Hashable {
    var total = 0
    var unread = 0
    /// Whether any message has reached the node (`is_sent`).
    var anySent = false
    /// Messages without a position (not sent yet).
    var unsent = 0
    /// The last message in `StoreReader.positionOrder`.
    var lastMessageID: MessageID?

    static func read(_ db: Database, _ id: ConversationID) throws -> ConversationSummary {
        let key = StoreCoding.blob(id)
        var out = ConversationSummary()
        guard let row = try Row.fetchOne(db.cachedStatement(sql: counts), arguments: [key]), (row["total"] as Int) > 0
        else { return out }
        out.total = row["total"]
        out.unread = row["unread"]
        out.anySent = (row["sent"] as Int) > 0
        out.unsent = row["unsent"]
        out.lastMessageID = try Data.fetchOne(
            db.cachedStatement(sql: out.unsent > 0 ? lastUnsent : lastSent), arguments: [key]
        )
        .map { MessageID(uuid: StoreCoding.uuid($0)) }
        return out
    }

    private static let counts = "SELECT total, unread, sent, unsent FROM message_count WHERE conversation_id = ?"
    // The order of `positionOrder(descending: true)`, served by the index: among messages not
    // sent yet (when there are any, they come last), else among all (NULLs sort lowest).
    private static let lastUnsent =
        "SELECT id FROM message WHERE conversation_id = ? AND pos_physical IS NULL ORDER BY pos_logical DESC, pos_node DESC, rowid DESC LIMIT 1"
    private static let lastSent =
        "SELECT id FROM message WHERE conversation_id = ? ORDER BY pos_physical DESC, pos_logical DESC, pos_node DESC, rowid DESC LIMIT 1"
    /// Every statement `read` runs (each takes the conversation's key).
    static let statements = [counts, lastUnsent, lastSent]
}
