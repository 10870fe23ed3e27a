import LaminaModel

/// What the writer keeps between commands so a command does not read or write it again:
/// the headers (flags and participants) of conversations recently written to, the head of
/// each feed recently appended to, each origin's latest replication counter, which conversations are known to hold a message, and
/// the prepared hot-path statements. Touched only on the writer thread, inside commands.
///
/// Correctness rule: an entry is the committed-or-about-to-commit state it describes. Every
/// write that changes a header (membership, distinctness, merge, deletion, creation) clears
/// the headers, and every rollback (a failing command, a failing group) clears everything,
/// so nothing a rollback undid can be served. A feed head is exactly the greatest seq
/// stored for the user (`StorageReader.feedHead`), so after a clear it is read again.
final class WriterCache: @unchecked Sendable {
    /// Entries per map at most; past it that map starts over.
    static let maxEntries = 10_000
    private var headers: [ConversationID: ConversationHeader] = [:]
    private var feedHeads: [UserID: Int64] = [:]
    private var withMessages: Set<ConversationID> = []
    private var counters: [NodeID: UInt64] = [:]
    private var prepared: HotStatements?
    private var commandEndHooks: [(Bool) -> Void] = []
    /// Several writers: the conversations whose rows this transaction has locked (their
    /// headers can then be kept until the transaction ends: no other writer changes them).
    private var locked: Set<ConversationID> = []
    /// Feed heads the running command advanced (several writers only: announced at COMMIT).
    private var commandHeads: [UserID: Int64] = [:]
    /// Feed heads the group's released commands advanced.
    private var groupHeads: [UserID: Int64] = [:]
    /// Whether the group logged a replicated operation (several writers only: a group that
    /// advanced no feed is still announced, so the other nodes' peer links ship it).
    private var groupLoggedOperations = false

    /// Whether other writers share the database (PostgreSQL: other nodes may commit to it at
    /// any time). Then only what no other writer can change is kept between commands (the
    /// prepared statements, "holds messages", which only ever becomes true, the counter of
    /// the node's own operations); headers, feed heads and other origins' replication
    /// counters are read inside each command, and feed heads are
    /// allocated under the row lock of `feed_heads` (see `Storage+Feed.swift`).
    let sharedWriters: Bool
    /// Entries in `feed_tail` that make the writer move the tail into `feed_entries` (`FeedTail`).
    let feedTailLimit: Int
    /// Entries in `feed_tail` now, when known (nil after a rollback: counted again).
    var feedTailRows: Int?
    /// The running group appends feed entries to `feed_entries` directly, not to the tail
    /// (a large group: see `FeedTail`). Set by the writer when a group begins.
    var feedsDirect = false

    /// SQLite's search backlog (`SearchBacklog`): the mark when known (nil after a rollback:
    /// read again), the newest message waiting, since when the oldest waits (nil: none known
    /// to wait), and whether the transaction emptied the backlog.
    let searchBacklog: SearchBacklog
    var searchIndexedThrough: Int64?
    var searchNewest: Int64 = 0
    var searchWaitingSince: ContinuousClock.Instant?
    var searchBacklogEmptied = false

    init(
        sharedWriters: Bool = false, feedTailLimit: Int = StorageConfiguration.defaultFeedTailRows,
        searchBacklog: SearchBacklog = SearchBacklog()
    ) {
        self.sharedWriters = sharedWriters
        self.feedTailLimit = feedTailLimit
        self.searchBacklog = searchBacklog
    }

    /// The writer, after a COMMIT: an emptied backlog is announced to searches, unless a
    /// message appended after the batch waits again.
    func searchCommitted() {
        if searchBacklogEmptied, searchWaitingSince == nil { searchBacklog.markIndexed() }
        searchBacklogEmptied = false
    }

    /// A command appended `count` entries to the tail.
    func staged(feedTailRows count: Int) {
        if let rows = feedTailRows { feedTailRows = rows + count }
    }

    /// A command deleted entries from the tail: it is counted again.
    func forgetFeedTailRows() { feedTailRows = nil }

    /// The hot-path statements on the writer's connection `db`, prepared on first use.
    func statements(_ db: any SQLSession) throws(StorageError) -> HotStatements {
        if let prepared { return prepared }
        let made = try HotStatements(db)
        prepared = made
        return made
    }

    /// Finalizes the prepared statements: before the connection closes.
    func dropStatements() { prepared = nil }

    func header(_ id: ConversationID) -> ConversationHeader? { headers[id] }

    func remember(_ header: ConversationHeader) {
        if sharedWriters, !locked.contains(header.id) { return }
        if headers.count >= Self.maxEntries { headers.removeAll(keepingCapacity: true) }
        headers[header.id] = header
    }

    /// Several writers: whether this transaction holds the conversation's row lock.
    func holdsLock(on id: ConversationID) -> Bool { locked.contains(id) }

    func didLock(_ id: ConversationID) { locked.insert(id) }

    /// The writer, after a COMMIT: the row locks are gone, and with several writers so is
    /// what they protected.
    func endTransaction() {
        guard sharedWriters else { return }
        locked.removeAll(keepingCapacity: true)
        headers.removeAll(keepingCapacity: true)
    }

    func feedHead(_ user: UserID) -> Int64? { feedHeads[user] }

    func remember(feedHead: Int64, of user: UserID) {
        if sharedWriters { return }
        if feedHeads.count >= Self.maxEntries, feedHeads[user] == nil { feedHeads.removeAll(keepingCapacity: true) }
        feedHeads[user] = feedHead
    }

    /// Whether the conversation is known to hold a message (false: unknown).
    func holdsMessages(_ id: ConversationID) -> Bool { withMessages.contains(id) }

    func rememberHoldsMessages(_ id: ConversationID) {
        if withMessages.count >= Self.maxEntries { withMessages.removeAll(keepingCapacity: true) }
        withMessages.insert(id)
    }

    /// The highest replication counter of `origin` in the log, if known.
    func counter(of origin: NodeID) -> UInt64? { counters[origin] }

    /// `bornHere`: the writer's own node is `origin`, and only it appends operations born
    /// there, so the counter is kept even with several writers.
    func remember(counter: UInt64, of origin: NodeID, bornHere: Bool = false) {
        if sharedWriters, !bornHere { return }
        if counters.count >= Self.maxEntries, counters[origin] == nil { counters.removeAll(keepingCapacity: true) }
        counters[origin] = counter
    }

    /// After a write that changed a conversation's header.
    func clearHeaders() { headers.removeAll(keepingCapacity: true) }

    /// Calls `body` when the command running now ends: true when its savepoint was released,
    /// false when its writes were rolled back (the group may still commit the others').
    func afterCommand(_ body: @escaping (Bool) -> Void) { commandEndHooks.append(body) }

    /// A command appended to `user`'s feed up to `head` (several writers only): announced
    /// to the other nodes when the group commits, unless the command is rolled back.
    func announce(feedHead head: Int64, of user: UserID) {
        commandHeads[user] = max(commandHeads[user] ?? 0, head)
    }

    /// A set-oriented group (`PostgresWriteBatch`) advanced `user`'s feed to `head`: announced
    /// at COMMIT (every command of such a group applied).
    func announceCommitted(feedHead head: Int64, of user: UserID) {
        groupHeads[user] = max(groupHeads[user] ?? 0, head)
    }

    /// The feed heads the group's released commands advanced, forgotten here: the writer
    /// sends them in the group's transaction just before COMMIT.
    func takeAnnouncedHeads() -> [UserID: Int64] {
        defer { groupHeads.removeAll(keepingCapacity: true) }
        return groupHeads
    }

    /// After an operation was appended to the replication log (several writers only).
    func didLogOperation() {
        if sharedWriters { groupLoggedOperations = true }
    }

    /// Whether the group logged an operation since the last call (then forgotten).
    func takeLoggedOperations() -> Bool {
        defer { groupLoggedOperations = false }
        return groupLoggedOperations
    }

    /// The writer, after each command of a group: runs (and forgets) the command's hooks.
    func endCommand(succeeded: Bool) {
        if !commandHeads.isEmpty {
            if succeeded { groupHeads.merge(commandHeads) { max($0, $1) } }
            commandHeads.removeAll(keepingCapacity: true)
        }
        guard !commandEndHooks.isEmpty else { return }
        let hooks = commandEndHooks
        commandEndHooks.removeAll(keepingCapacity: true)
        for hook in hooks { hook(succeeded) }
    }

    /// After a rollback: forgets everything but the prepared statements (and the heads the
    /// group's released commands announce: a failing command does not undo those).
    func clear() {
        commandHeads.removeAll(keepingCapacity: true)
        // A rolled-back savepoint released the locks it took: forget them all (safe: the
        // next header read locks again, which is a no-op for a lock still held).
        locked.removeAll(keepingCapacity: true)
        headers.removeAll(keepingCapacity: true)
        feedHeads.removeAll(keepingCapacity: true)
        withMessages.removeAll(keepingCapacity: true)
        counters.removeAll(keepingCapacity: true)
        feedTailRows = nil
        searchIndexedThrough = nil
        searchBacklogEmptied = false
        // Messages that still wait (committed before) are found again from the mark; a
        // rollback leaves the flag set, so a search still indexes first.
        if searchWaitingSince != nil { searchWaitingSince = .now }
    }
}
