import Foundation
import LaminaModel
import Synchronization

/// SQLite's full-text index is written behind the messages, in batches (`v30-search-backlog`).
///
/// FTS5 writes a new segment of the index (its data, structure and document rows) whenever
/// its pending terms are flushed, and it flushes them at every savepoint of the transaction
/// that wrote them and at its commit. Indexed in the message's own command, one message in a
/// small group commit cost a segment (several pages, a tenth of the writer's time at
/// 2,000 msg/s) and its merges later. So an appended message is not indexed at once: the
/// `search_backlog` row says up to which `messages` rowid the index holds every message,
/// and the writer indexes the messages after it in one batch, at the end of a group (outside
/// every command's savepoint), once `StorageConfiguration.searchBacklogMessages` (256) wait
/// or the oldest has waited `searchBacklogMilliseconds` (1 s).
///
/// Searches read an index that holds every committed message: `NodeStore.searchRead` first
/// has the writer index what waits (`SearchBacklog.isPending`, set in the transaction that
/// appended, cleared after the commit that indexed). A crash loses nothing: the messages after
/// the mark are indexed by the next batch. `messages` rows are never deleted (a deletion marks
/// them), so a new message's rowid is above every indexed one; an insert below the mark would
/// still be indexed at once (`deferIndexing`).
///
/// Edits, deletions and merges of a message the index does not hold yet change nothing in
/// the index: the batch reads each message's body, deletion and conversation as they are then.
/// PostgreSQL fills its `tsvector` column in the message's insert (no backlog).
package final class SearchBacklog: Sendable {
    /// Messages waiting that make the writer index them at the end of the group.
    let maxMessages: Int64
    /// How long the oldest waiting message waits at most, when the writer commits anything.
    let maxAge: Duration

    private let pending = Atomic<Bool>(false)

    init(maxMessages: Int = 256, maxAge: Duration = .seconds(1)) {
        self.maxMessages = Int64(maxMessages)
        self.maxAge = maxAge
    }

    /// Whether committed (or committing) messages may be missing from the index.
    package var isPending: Bool { pending.load(ordering: .acquiring) }

    func markPending() { pending.store(true, ordering: .releasing) }

    func markIndexed() { pending.store(false, ordering: .releasing) }
}

/// `v30-search-backlog` (SQLite): the mark, starting after every message (all were indexed).
enum SearchBacklogSchema {
    static let migration = "v30-search-backlog"

    static let sqlite: [String] = [
        """
        CREATE TABLE search_backlog (
            only INTEGER PRIMARY KEY NOT NULL CHECK (only = 1),
            indexed_through INTEGER NOT NULL
        ) STRICT
        """,
        "INSERT INTO search_backlog (only, indexed_through) SELECT 1, COALESCE(MAX(rowid), 0) FROM messages",
    ]
}

extension StorageTransaction {
    /// The rowid of `messages` up to which the index holds every message (SQLite).
    func searchIndexedThrough() throws(StorageError) -> Int64 {
        if let known = cache.searchIndexedThrough { return known }
        let mark = try db.int64("SELECT indexed_through FROM search_backlog WHERE only = 1", []) ?? 0
        cache.searchIndexedThrough = mark
        return mark
    }

    /// Indexes every message after the mark that is not deleted for everyone and has text,
    /// and moves the mark past them (SQLite; nothing on PostgreSQL).
    package func indexWaitingMessages() throws(StorageError) {
        guard db.dialect == .sqlite else { return }
        let through = try searchIndexedThrough()
        var last = through
        try db.eachRow(
            "SELECT rowid, body, conversation_id, deleted FROM messages WHERE rowid > ? ORDER BY rowid",
            bind: { $0.bind(1, through) }
        ) { (row) throws(StorageError) in
            last = row.int64(0)
            guard row.int64(3) == 0, let body = row.bytes(1), let conversation = row.uuid(2),
                let text = try MessageSearchSchema.indexedText(ofBody: body)
            else { return }
            try insertIndexEntry(rowid: last, text: text, conversation: conversation)
        }
        if last > through {
            try db.run("UPDATE search_backlog SET indexed_through = ? WHERE only = 1", [last])
        }
        cache.searchIndexedThrough = last
        cache.searchWaitingSince = nil
        cache.searchBacklogEmptied = true
    }

    /// The writer, before a group's COMMIT: indexes the waiting messages when enough wait or
    /// the oldest waited long enough.
    func settleSearchBacklog() throws(StorageError) {
        guard let since = cache.searchWaitingSince else { return }
        let waiting = cache.searchNewest - (cache.searchIndexedThrough ?? 0)
        let backlog = cache.searchBacklog
        guard waiting >= backlog.maxMessages || ContinuousClock.now - since >= backlog.maxAge else {
            return
        }
        try indexWaitingMessages()
    }

    /// `appendMessage` on SQLite, after the insert: the message waits for the next batch
    /// (or is indexed at once when its rowid is not above the mark).
    func deferIndexing(of rowid: Int64, text: String, in conversation: ConversationID) throws(StorageError) {
        guard rowid > (try searchIndexedThrough()) else {
            try insertIndexEntry(rowid: rowid, text: text, conversation: conversation.uuid)
            return
        }
        cache.searchNewest = max(cache.searchNewest, rowid)
        // A message already waiting means the flag is set (it is cleared only with none waiting).
        if cache.searchWaitingSince == nil {
            cache.searchWaitingSince = .now
            cache.searchBacklog.markPending()
        }
    }

    /// One index entry (SQLite).
    func insertIndexEntry(rowid: Int64, text: String, conversation: UUID) throws(StorageError) {
        try db.runRaw(
            """
            INSERT INTO message_search (rowid, body, conversation)
                VALUES (?, ?, \(MessageSearchSchema.conversationToken("?")))
            """
        ) {
            $0.bind(1, rowid)
            $0.bind(2, text)
            $0.bind(3, conversation)
        }
    }
}
