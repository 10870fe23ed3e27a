import Foundation
import GRDB
import LaminaModel
import Logging

/// Counters of the writer, for tests and metrics.
package struct StorageWriterStatistics: Sendable {
    /// Transactions committed (each one a group of commands).
    package var transactions: Int
    /// Commands whose effects were committed.
    package var committedCommands: Int
    /// Commands that failed (their own error, or their group's commit failed).
    package var failedCommands: Int
    /// Commands refused because the queue was full.
    package var refusedCommands: Int
    /// The most commands committed in one transaction.
    package var largestBatch: Int
    /// Groups committed inline by the caller's thread (``StorageWriter/enqueue(_:mayCommitInline:)``),
    /// part of `transactions`.
    package var inlineCommits: Int = 0
    /// Group commits whose transaction failed (nothing of the group was written).
    package var failedCommits: Int = 0
    /// Errors SQLite reported (in a command or a commit), as opposed to commands refused by
    /// their own rules: disk full, I/O, a damaged file.
    package var databaseErrors: Int = 0
    /// Why the latest group commit failed; nil once a later one succeeds.
    package var lastCommitFailure: String? = nil
    /// The latest error SQLite reported and when (uptime), constraint violations aside.
    package var lastDatabaseError: (reason: String, at: ContinuousClock.Instant)? = nil
    /// When the latest group commit that committed with no database error in it finished.
    package var lastCleanCommit: ContinuousClock.Instant? = nil
}

/// The writer's connection to the store.
protocol WriterConnection: Sendable {
    /// Runs `body` on the writer's session (writer thread only); `fresh` is true when the
    /// session is new since the last call, so what was prepared on the old one is gone.
    func withSession<T>(_ body: (any SQLSession, _ fresh: Bool) throws -> T) throws -> T
    /// Calls `body` with the session if one is open (no reconnecting), then lets the
    /// connection go: after the writer's last group.
    func finish(_ body: (any SQLSession) -> Void)
}

/// A queued write: applied inside the group's transaction, completed after the commit.
protocol StorageCommand: AnyObject, Sendable {
    /// Runs the command against the open transaction; the result is kept until completion.
    func apply(_ db: any SQLSession, cache: WriterCache) throws
    /// Called after the group committed (the command applied) or failed.
    func complete(_ failure: (any Error)?)
    /// Whether the command's result can take feed seqs handed out provisionally
    /// (`resolveFeedSeqs`): only then may its group's feed appends be held back (PostgreSQL's
    /// set-oriented group commit, `PostgresWriteBatch`).
    var resolvesFeedSeqs: Bool { get }
    /// Replaces the provisional feed seqs in the result: `base + provisional` per user.
    func resolveFeedSeqs(_ bases: [UserID: Int64])
    /// The conversations the command will write to, as far as known before it runs: with
    /// several writers the group locks them all first, in one order (`lockAhead`).
    var conversations: [ConversationID] { get }
    /// The feed entries the applied command's result holds, with their encoded events, for
    /// the other nodes' notification (several writers; asked just before COMMIT, seqs real).
    func announcedFeedEvents() -> [AnnouncedFeedEvent]
}

extension StorageCommand {
    var resolvesFeedSeqs: Bool { false }
    func resolveFeedSeqs(_ bases: [UserID: Int64]) {}
    var conversations: [ConversationID] { [] }
    func announcedFeedEvents() -> [AnnouncedFeedEvent] { [] }
}

/// A command result that holds feed seqs (`StorageTransaction.appendChange` and
/// `appendMessageCreated`'s answers) and can have the provisional ones replaced once its group's
/// feeds are written (PostgreSQL's set-oriented group commit: a command learns its seqs only
/// after the batched statement ran). Every seq in it must come from those appends.
package protocol ProvisionalFeedSeqs: Sendable {
    /// This value with each seq `seq` of `user`'s feed replaced by `resolve(user, seq)`.
    func resolvingFeedSeqs(_ resolve: (UserID, UInt64) -> UInt64) -> Self
}

/// One writer with group commit. A dedicated thread takes every waiting command (up to
/// `maxBatchSize`), runs them in ONE immediate transaction, each inside its own savepoint (a
/// failing command rolls back alone), commits (`synchronous=FULL`: the WAL is synced), and
/// only then completes each command. Commands that arrive while a group commits wait for
/// the next group, so the more load, the larger the groups.
///
/// Completions (ACKs, fan-out) run in commit order on a second thread while the writer
/// applies the next group; when no command waits and no earlier group is still completing,
/// the writer completes the group itself (saving a thread wake-up per group at low load).
/// At a low rate an event loop may commit the command it read itself, as a group of one,
/// while the writer is idle (``enqueue(_:mayCommitInline:)``): a wake-up of the writer and
/// one of the loop fewer per command; `committing` keeps it and the writer thread apart.
///
/// The spacing: a group that would start within `groupDelay` of the previous commit's start
/// waits until then, or until `groupTarget` commands wait, unless the only session with
/// commands in flight pipelines them (``CommandSources``): its next commands come after
/// its ACKs, so the wait would only add to its latency.
final class StorageWriter: @unchecked Sendable {
    private let connection: any WriterConnection
    private let capacity: Int
    private let maxBatchSize: Int
    // Everything below is guarded by `condition`.
    private let condition = NSCondition()
    private var pending: [any StorageCommand] = []
    private var pendingHead = 0
    private var accepting = true
    private var finished = false
    private var stats = StorageWriterStatistics(
        transactions: 0, committedCommands: 0, failedCommands: 0, refusedCommands: 0, largestBatch: 0)
    private var thread: Thread?
    private let completions = CompletionQueue()
    /// Writer thread only.
    private let cache: WriterCache
    /// Several writers (PostgreSQL): sends the feed heads a group advanced to the other
    /// nodes, inside the group's transaction (delivered at COMMIT). Writer thread only.
    private let announcer: FeedAnnouncer?
    private let logger = Logger(label: "lamina.storage")

    private let groupDelay: Duration
    private let groupTarget: Int
    /// A group of at least this many commands appends to the feeds directly (`FeedTail`).
    private let feedDirectGroup: Int
    /// How far apart commands arrive: how long a small group waits for more.
    private var arrivals: ArrivalGaps
    /// Who has commands in flight: a lone pipelining session skips the spacing.
    let sources: CommandSources
    /// The writer is waiting for a small group to fill (guarded by `condition`).
    private var gathering = false
    /// When the last group began to commit (writer thread).
    private var lastCommitStart = Date.distantPast
    /// A group is being committed, by the writer thread or inline by a caller (guarded by `condition`).
    private var committing = false
    /// The thread committing inline, while it does (guarded by `condition`).
    private var inlineCommitter: pthread_t?
    /// How long recent commits took, seconds: a moving average (guarded by `condition`).
    private var commitSeconds = 0.0
    /// The longest recent commits may take, on average, for a caller that may block to commit
    /// its command itself, seconds (``enqueue(_:mayCommitInline:)``; 0: never).
    private let inlineCommitLimit: Double

    init(
        connection: any WriterConnection, capacity: Int, maxBatchSize: Int, groupDelay: Duration = .zero,
        groupTarget: Int = 1,
        announcer: FeedAnnouncer? = nil, sources: CommandSources = CommandSources(),
        feedTailRows: Int = StorageConfiguration.defaultFeedTailRows,
        feedDirectGroup: Int = StorageConfiguration.defaultFeedDirectGroupCommands,
        searchBacklog: SearchBacklog = SearchBacklog(), inlineCommitLimit: Duration = .zero
    ) {
        self.inlineCommitLimit = inlineCommitLimit.seconds
        self.connection = connection
        self.announcer = announcer
        self.cache = WriterCache(
            sharedWriters: announcer != nil, feedTailLimit: feedTailRows, searchBacklog: searchBacklog)
        self.sources = sources
        self.capacity = capacity
        self.maxBatchSize = maxBatchSize
        self.groupDelay = groupDelay
        self.groupTarget = groupTarget
        self.feedDirectGroup = feedDirectGroup
        self.arrivals = ArrivalGaps(spacing: groupDelay.seconds)
        let thread = Thread { [self] in
            StorageThreadName.nameCurrentThread(StorageThreadName.writer)
            self.run()
        }
        self.thread = thread
        thread.start()
    }

    var statistics: StorageWriterStatistics {
        condition.lock()
        defer { condition.unlock() }
        return stats
    }

    /// Queues a command for the next group. Throws at once when the queue is full or closed.
    ///
    /// With `mayCommitInline` (a caller that may block for one commit: an event loop that
    /// read the command), when the writer is idle, nothing waits, recent commits took at most
    /// the inline limit, commands arrive on average at least twice that far apart and this one
    /// after a quiet time of at least a commit's (not in a burst, nor while an inline commit kept
    /// its loop busy), the caller's thread commits the command as a group of one and completes
    /// it before this returns: no hop to the writer thread and back, a wake-up fewer per command
    /// at a low rate. Commands arriving meanwhile, or in a burst, go to the writer thread and
    /// group there.
    func enqueue(_ command: any StorageCommand, mayCommitInline: Bool = false) throws(StorageError) {
        condition.lock()
        guard accepting else {
            condition.unlock()
            throw StorageError(.closed, "the store is closed and takes no more writes")
        }
        guard pending.count - pendingHead < capacity else {
            stats.refusedCommands += 1
            condition.unlock()
            throw StorageError(.writeQueueFull, "the write queue holds its limit of \(capacity) commands; retry later")
        }
        if groupDelay > .zero { arrivals.note(at: DispatchTime.now().uptimeNanoseconds) }
        if mayCommitInline, inlineCommitLimit > 0, !committing, pending.count == pendingHead,
            commitSeconds <= inlineCommitLimit, arrivals.mean >= 2 * commitSeconds, arrivals.quiet >= commitSeconds
        {
            committing = true
            inlineCommitter = pthread_self()
            condition.unlock()
            commit([command], inline: true)
            condition.lock()
            committing = false
            inlineCommitter = nil
            arrivals.busy(until: DispatchTime.now().uptimeNanoseconds)
            if pending.count > pendingHead || !accepting { condition.broadcast() }
            condition.unlock()
            return
        }
        pending.append(command)
        // The writer waits for a first command, or for a small group to fill up.
        let waiting = pending.count - pendingHead
        if waiting == 1 || (gathering && waiting == groupTarget) { condition.signal() }
        condition.unlock()
    }

    /// Whether the writer is waiting for a small group to fill (for tests of the commit policy).
    var isGathering: Bool {
        condition.lock()
        defer { condition.unlock() }
        return gathering
    }

    /// Whether the caller runs on the writer thread or the completion thread, or commits
    /// inline (inside a command or a completion).
    var isWriterThread: Bool {
        condition.lock()
        defer { condition.unlock() }
        return isCommittingThread
    }

    /// See ``isWriterThread`` (`condition` held).
    private var isCommittingThread: Bool {
        Thread.current === thread || completions.isCurrentThread
            || inlineCommitter.map { pthread_equal($0, pthread_self()) != 0 } ?? false
    }

    /// Stops taking commands and lets the writer finish every queued one. Waits for it unless
    /// called on the writer thread itself (from a completion), where waiting would deadlock.
    func shutdown() {
        condition.lock()
        accepting = false
        condition.broadcast()
        let wait = !isCommittingThread
        if wait {
            while !finished { condition.wait() }
        }
        condition.unlock()
        // Queued completions still run (in order); the completion thread ends after them.
        completions.finish(waiting: wait)
    }

    private func run() {
        while let batch = nextBatch() {
            commit(batch)
            condition.lock()
            committing = false
            condition.unlock()
        }
        // Finalized on the connection's queue, before the pool closes it.
        connection.finish { _ in cache.dropStatements() }
        condition.lock()
        finished = true
        // The thread's closure holds the writer: let both go once it ends (else a closed
        // store's writer, pool and caches stay in memory for good).
        thread = nil
        condition.broadcast()
        condition.unlock()
    }

    /// Waits for work; nil once closed and drained.
    private func nextBatch() -> [any StorageCommand]? {
        condition.lock()
        defer { condition.unlock() }
        while (pending.count == pendingHead && accepting) || committing { condition.wait() }
        if groupDelay > .zero, pending.count - pendingHead < groupTarget, accepting, !sources.isLonePipeline {
            // A small group right after the last commit: let the commands on their way join
            // it until `groupDelay` after that commit began, less one mean gap between arriving
            // commands (``ArrivalGaps``: at a low rate nothing waits), or until `groupTarget`
            // wait. A command after a quiet spell is committed at once. Not when one pipelining
            // session is all there is (``CommandSources``): its next commands wait for its ACKs.
            let earliest = lastCommitStart.addingTimeInterval(arrivals.gatheringWindow)
            if earliest > Date() {
                gathering = true
                while pending.count - pendingHead < groupTarget, accepting, condition.wait(until: earliest) {}
                gathering = false
            }
        }
        lastCommitStart = Date()
        let available = pending.count - pendingHead
        if available == 0 { return nil }
        committing = true
        let take = min(available, maxBatchSize)
        let batch = Array(pending[pendingHead..<(pendingHead + take)])
        pendingHead += take
        if pendingHead == pending.count {
            pending.removeAll(keepingCapacity: true)
            pendingHead = 0
        } else if pendingHead > 4_096 {
            pending.removeFirst(pendingHead)
            pendingHead = 0
        }
        return batch
    }

    /// How a group ran without savepoints.
    private enum FirstPass {
        /// Every command applied and the group committed.
        case committed
        /// The group's only command failed (rolled back: nothing to commit).
        case failedAlone(any Error)
        /// A command of several failed: the transaction was rolled back, to run again with savepoints.
        case rolledBack
    }

    /// Applies `batch` in the open transaction without a savepoint per command and commits.
    /// A failing command rolls the whole transaction back (and what the commands before it
    /// kept in the cache or hooked to their end: they run again). Errors of the commit itself
    /// are thrown.
    private func applyWithoutSavepoints(_ batch: [any StorageCommand], _ db: any SQLSession) throws -> FirstPass {
        let postgres = db as? PostgresSession
        // Set-oriented (PostgreSQL): the group's hot-path writes go as one statement per kind,
        // when every command's result can take provisional feed seqs.
        postgres?.deferring = batch.count > 1 && batch.allSatisfy { $0.resolvesFeedSeqs }
        do {
            try lockAhead(batch, db)
            for (i, command) in batch.enumerated() {
                try command.apply(db, cache: cache)
                // A statement of the last command not waited for that failed fails it here,
                // not the commit (a failure of another one is its successor's: all run again).
                if i == batch.count - 1 { try db.checkSent() }
                cache.endCommand(succeeded: true)
            }
            if let postgres, postgres.deferring {
                for (user, feed) in postgres.feedBases { cache.announceCommitted(feedHead: feed.head, of: user) }
            }
        } catch {
            cache.endCommand(succeeded: false)
            db.rollback()
            cache.clear()
            _ = cache.takeAnnouncedHeads()
            let reported = error is GRDB.DatabaseError ? StorageError.wrapping(error) : error
            return batch.count == 1 ? .failedAlone(reported) : .rolledBack
        }
        // The real seqs go into the results before COMMIT, so the notification carries them
        // (a failed COMMIT fails every command: their results are not used).
        let bases = postgres?.feedBases.mapValues { $0.base } ?? [:]
        if !bases.isEmpty {
            for command in batch { command.resolveFeedSeqs(bases) }
        }
        do {
            try announceAndCommit(db, applied: batch)
        } catch {
            db.rollback()
            throw error
        }
        return .committed
    }

    /// Several writers: locks the group's conversations (the ones its commands name) in id
    /// order and then the feeds of their participants in user order, in two statements, before
    /// any other lock of the group; the headers read are kept for the transaction. Every node
    /// takes its locks in that order, so groups on several nodes that touch the same
    /// conversations or feeds wait for each other instead of deadlocking (a command that names
    /// no conversation still locks what it touches as it goes).
    private func lockAhead(_ batch: [any StorageCommand], _ db: any SQLSession) throws {
        guard cache.sharedWriters else { return }
        var ids = Set<ConversationID>()
        for command in batch { ids.formUnion(command.conversations) }
        guard !ids.isEmpty else { return }
        let reader = StorageReader(db: db)
        let headers = try reader.lockConversationHeaders(Array(ids))
        var users = Set<UserID>()
        for header in headers {
            cache.didLock(header.id)
            cache.remember(header)
            users.formUnion(header.states.keys)
        }
        try reader.lockFeeds(users.sorted())
    }

    /// Ends the group's transaction: announces the feed heads it advanced (several writers;
    /// a group that advanced none but logged replicated operations is announced with no heads,
    /// so that the nodes with peer links ship them) or moves a full feed tail into the feeds
    /// (one writer), indexes SQLite's search backlog when it is due, then commits.
    private func announceAndCommit(_ db: any SQLSession, applied: [any StorageCommand]) throws {
        if let announcer {
            let heads = cache.takeAnnouncedHeads()
            let logged = cache.takeLoggedOperations()
            if !heads.isEmpty {
                let events = announcer.carriesEntries ? applied.flatMap { $0.announcedFeedEvents() } : []
                try announcer.announce(heads, events: events, on: db)
            } else if logged {
                try announcer.announceLogged(on: db)
            }
        } else {
            try FeedTail.settle(db, cache: cache)
        }
        if db.dialect == .sqlite { try StorageTransaction(db: db, cache: cache).settleSearchBacklog() }
        try db.commit()
        cache.endTransaction()
        cache.searchCommitted()
    }

    /// Runs one group in one transaction and completes its commands after the commit.
    /// `inline`: run by the caller of `enqueue` (counted apart in the statistics).
    private func commit(_ batch: [any StorageCommand], inline: Bool = false) {
        let started = DispatchTime.now().uptimeNanoseconds
        var outcomes = [(any Error)?](repeating: nil, count: batch.count)
        var applied = 0
        var commitError: StorageError?
        var databaseErrors: [StorageError] = []
        do {
            try connection.withSession { db, fresh in
                if fresh {
                    // A new connection (PostgreSQL reconnected): nothing prepared or cached survives.
                    cache.dropStatements()
                    cache.clear()
                }
                // A connection the server closed while idle fails here, before anything is
                // applied: the connection may then run the group again on a new one.
                do throws(StorageError) { try db.begin() } catch { throw StaleConnection(error: error) }
                if db.dialect == .postgres {
                    // Each savepoint costs two round trips to the server: first the whole group
                    // without them. Should a command fail, everything is rolled back and the group
                    // runs again with them (below), unless it was alone: its failure is then the
                    // group's whole outcome.
                    switch try applyWithoutSavepoints(batch, db) {
                    case .committed:
                        applied = batch.count
                        return
                    case .failedAlone(let error):
                        outcomes[0] = error
                        if let reported = Self.databaseError(error, inCommand: true) { databaseErrors.append(reported) }
                        return
                    case .rolledBack:
                        try db.begin()  // not deferring: each command's statements run as before
                    }
                }
                do {
                    if announcer == nil {
                        try FeedTail.beginGroup(db, cache: cache, commands: batch.count, largeGroup: feedDirectGroup)
                    }
                    try lockAhead(batch, db)
                    let statements = try cache.statements(db)
                    // A command alone needs no savepoint: its failure rolls back a transaction
                    // that holds nothing else (and nothing is committed).
                    let alone = batch.count == 1
                    for (i, command) in batch.enumerated() {
                        do {
                            if alone {
                                try command.apply(db, cache: cache)
                            } else {
                                try statements.inSavepoint { try command.apply(db, cache: cache) }
                            }
                            cache.endCommand(succeeded: true)
                            applied += 1
                        } catch {
                            cache.endCommand(succeeded: false)
                            cache.clear()  // the command's writes were rolled back
                            if let reported = Self.databaseError(error, inCommand: true) {
                                databaseErrors.append(reported)
                            }
                            outcomes[i] = error is GRDB.DatabaseError ? StorageError.wrapping(error) : error
                            if !db.isInsideTransaction {
                                // The database aborted the whole transaction (e.g. disk full): what ran before is gone.
                                throw StorageError.wrapping(error, as: .commitFailed)
                            }
                            if alone {
                                db.rollback()
                                return
                            }
                        }
                    }
                    try announceAndCommit(
                        db, applied: batch.indices.filter { outcomes[$0] == nil }.map { batch[$0] })
                } catch {
                    db.rollback()
                    throw error
                }
            }
        } catch {
            let error = (error as? StaleConnection)?.error ?? error
            cache.clear()  // the group was rolled back
            _ = cache.takeAnnouncedHeads()
            let reported = Self.databaseError(error, inCommand: false)
            commitError = StorageError.wrapping(reported.map { $0 as any Error } ?? error, as: .commitFailed)
            commitError?.code =
                reported.map {
                    $0.code == .databaseUnavailable || $0.code == .authenticationFailed ? $0.code : .commitFailed
                } ?? .commitFailed
            if let reported, !databaseErrors.contains(where: { $0.reason == reported.reason }) {
                databaseErrors.append(reported)
            }
        }

        for error in databaseErrors where error.code != .constraintViolation {
            logger.error("storage error", metadata: ["code": "\(error.code)", "reason": "\(error.reason)"])
        }
        if let commitError {
            logger.error(
                "group commit failed", metadata: ["commands": "\(batch.count)", "reason": "\(commitError.reason)"])
        }
        condition.lock()
        commitSeconds += (Double(DispatchTime.now().uptimeNanoseconds &- started) / 1e9 - commitSeconds) / 4
        let reported = databaseErrors.filter { $0.code != .constraintViolation }
        stats.databaseErrors += reported.count
        if let last = reported.last { stats.lastDatabaseError = (last.reason, .now) }
        if let commitError {
            stats.failedCommands += batch.count
            stats.failedCommits += 1
            stats.lastCommitFailure = commitError.reason
        } else {
            stats.lastCommitFailure = nil
            if reported.isEmpty { stats.lastCleanCommit = .now }
            stats.transactions += 1
            if inline { stats.inlineCommits += 1 }
            stats.committedCommands += applied
            stats.failedCommands += batch.count - applied
            stats.largestBatch = max(stats.largestBatch, applied)
        }
        condition.unlock()

        let group = batch.enumerated().map { (i, command) in
            (command, commitError.map { outcomes[i] ?? $0 } ?? outcomes[i])
        }
        // With nothing waiting to commit and no earlier group still completing, the writer
        // completes this group itself: waking the completion thread would cost more (a
        // context switch per group) than the completions. Commit order is kept either way.
        if queueIsEmpty, completions.takeIfIdle() {
            for (command, failure) in group { command.complete(failure) }
            completions.release()
        } else {
            completions.enqueue(group)
        }
    }

    /// Whether no command waits for the next group.
    private var queueIsEmpty: Bool {
        condition.lock()
        defer { condition.unlock() }
        return pending.count == pendingHead
    }

    /// The error as a `StorageError` when the database itself failed (I/O, disk full, a lost
    /// connection), else nil: a command refused by its own rules, or a constraint. Inside a
    /// command, SQLite's failures count when GRDB raised them directly (the storage code's
    /// own statements report theirs as the command's outcome); PostgreSQL's always.
    private static func databaseError(_ error: any Error, inCommand: Bool) -> StorageError? {
        if let error = error as? GRDB.DatabaseError {
            return error.resultCode == .SQLITE_CONSTRAINT ? nil : StorageError.wrapping(error)
        }
        guard let error = error as? StorageError else { return nil }
        switch error.code {
        case .databaseUnavailable, .authenticationFailed:
            return error
        case .database, .commitFailed:
            return !inCommand || error.reason.hasPrefix("PostgreSQL") ? error : nil
        default:
            return nil
        }
    }
}

/// BEGIN failed (nothing of the group applied): the connection may have been closed while idle.
struct StaleConnection: Error {
    var error: StorageError
}

/// The thread that completes committed commands, in the order their groups committed.
private final class CompletionQueue: @unchecked Sendable {
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var groups: [[(any StorageCommand, (any Error)?)]] = []
    private var stopping = false
    private var stopped = false
    private var thread: Thread?
    /// A group is being completed (by this thread, or by the writer after `takeIfIdle`).
    private var busy = false

    init() {
        let thread = Thread { [self] in
            StorageThreadName.nameCurrentThread(StorageThreadName.completions)
            self.run()
        }
        self.thread = thread
        thread.start()
    }

    var isCurrentThread: Bool {
        condition.lock()
        defer { condition.unlock() }
        return Thread.current === thread
    }

    /// True when no group is queued or being completed: the caller then completes its group
    /// itself and calls `release()` after; queued groups wait until then.
    func takeIfIdle() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard groups.isEmpty, !busy else { return false }
        busy = true
        return true
    }

    /// Ends a group completed by the caller of `takeIfIdle()`.
    func release() {
        condition.lock()
        busy = false
        // Wakes the thread only when it has something to do (a wake is what this saves).
        if !groups.isEmpty || stopping { condition.broadcast() }
        condition.unlock()
    }

    func enqueue(_ group: [(any StorageCommand, (any Error)?)]) {
        condition.lock()
        groups.append(group)
        condition.broadcast()
        condition.unlock()
    }

    /// Lets the thread end once every queued group is completed; with `waiting`, returns
    /// only then (never wait from the completion thread itself).
    func finish(waiting: Bool) {
        condition.lock()
        stopping = true
        condition.broadcast()
        if waiting {
            while !stopped { condition.wait() }
        }
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            busy = false
            while groups.isEmpty || busy {
                if stopping, groups.isEmpty, !busy {
                    stopped = true
                    thread = nil  // its closure holds this queue (see StorageWriter.run)
                    condition.broadcast()
                    condition.unlock()
                    return
                }
                condition.wait()
            }
            let taken = groups
            groups.removeAll(keepingCapacity: true)
            busy = true
            condition.unlock()
            for group in taken {
                for (command, failure) in group { command.complete(failure) }
            }
        }
    }
}

extension Duration {
    /// The duration in seconds, for `Date` arithmetic.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
