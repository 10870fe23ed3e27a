import Foundation
import GRDB
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

@Suite struct StorageWriterTests {
    @Test func migratesAnEmptyDatabaseWithDurablePragmas() async throws {
        try await withTemporaryStore { store, _ in
            let applied = try await store.pool.read { db in try StorageSchema.migrator.appliedMigrations(db) }
            #expect(applied == StorageSchema.migrationNames)
            #expect(!applied.isEmpty)
            let tables = try await store.pool.read { db in
                try String.fetchAll(
                    db,
                    sql:
                        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'grdb_%'"
                )
            }
            let expected: Set = [
                "node_settings", "conversations", "membership_ops", "participants", "messages", "message_parts",
                "recipient_status", "read_markers", "delivered_markers", "metadata_entries", "feed_heads",
                "feed_entries", "feed_tail", "device_cursors",
                "idempotency_records", "nonces", "sessions", "content_uploads", "replication_log",
                "conversation_aliases", "identities",
                "webhooks", "webhook_queue", "blocks", "badges", "push_tokens", "push_queue", "replication_parked",
                "user_state_registers", "message_part_updates", "distinct_births",
                "message_counts", "user_suspensions", "follows", "last_seen", "channels", "channel_members",
                "channel_messages", "channel_standings", "channel_content", "message_reactions", "thread_replies",
                "notification_levels", "message_part_readings",
                // The FTS5 search index (`v26-message-search`) and its shadow tables.
                "message_search", "message_search_data", "message_search_idx", "message_search_content",
                "message_search_docsize", "message_search_config",
                // Up to where the index holds every message (`v30-search-backlog`).
                "search_backlog",
            ]
            #expect(Set(tables) == expected)
            let pragmas = try store.writerPragmas()
            #expect(pragmas["journal_mode"] == "wal")
            #expect(pragmas["synchronous"] == "2")  // FULL
            #expect(pragmas["foreign_keys"] == "1")
        }
    }

    @Test func replicatedTablesCarryOriginAndHLCAndReopeningMigratesNothing() async throws {
        let (path, cleanup) = temporaryDatabasePath()
        defer { cleanup() }
        let store = try NodeStore(path: path)
        let columns = try await store.pool.read { db in
            try ["conversations", "membership_ops", "messages", "metadata_entries"].map { table in
                (table, Set(try db.columns(in: table).map(\.name)))
            }
        }
        for (table, names) in columns {
            #expect(
                names.isSuperset(of: ["origin_node", "hlc_physical", "hlc_logical", "hlc_node"]),
                "\(table) lacks replication columns")
        }
        try store.close()
        let reopened = try NodeStore(path: path)
        let applied = try await reopened.pool.read { db in try StorageSchema.migrator.appliedMigrations(db) }
        #expect(applied == StorageSchema.migrationNames)
        #expect(try reopened.writerPragmas()["synchronous"] == "2")
        try reopened.close()
    }

    @Test(arguments: StoreBackend.allCases) func groupCommitPutsQueuedCommandsIntoFewTransactions(
        _ backend: StoreBackend
    ) async throws {
        try await withTemporaryStore(
            StorageConfiguration(writeQueueCapacity: 2_000, maxBatchSize: 512), backend: backend
        ) { store, _ in
            let gate = WriterGate()
            try gate.hold(store)
            await gate.entered.wait()
            let counter = CompletionCounter(expected: 1_000)
            for i in 0..<1_000 {
                try store.submit({ tx in try tx.setSetting("k\(i)", [UInt8(i % 256)]) }, completion: counter.record)
            }
            gate.open()
            await counter.done.wait()
            #expect(counter.successes == 1_000)
            let stats = store.writerStatistics
            // The gate's own transaction, then 1,000 commands in groups of at most 512.
            #expect(stats.transactions == 3)
            #expect(stats.committedCommands == 1_001)
            #expect(stats.largestBatch == 512)
            let stored = try await store.read { r in try r.db.int64("SELECT count(*) FROM node_settings") }
            #expect(stored == 1_000)
        }
    }

    @Test(arguments: StoreBackend.allCases) func concurrentWritersShareTransactions(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<1_000 {
                    group.addTask { try await store.write { tx in try tx.setSetting("c\(i)", [1]) } }
                }
                try await group.waitForAll()
            }
            let stats = store.writerStatistics
            #expect(stats.committedCommands == 1_000)
            #expect(stats.transactions < 500, "1,000 concurrent writes took \(stats.transactions) transactions")
            #expect(stats.largestBatch > 1)
        }
    }

    @Test func completionComesOnlyAfterCommit() async throws {
        try await withTemporaryStore { store, path in
            // Checked inside the completion itself: a separate connection already sees the row.
            let seen = Signal()
            let visible = LockedBox<Bool?>(nil)
            try store.submit(
                { tx in try tx.setSetting("durable", [42]) },
                completion: { _ in
                    let fresh = try? DatabaseQueue(path: path)
                    visible.set(
                        (try? fresh?.read { db in
                            try Data.fetchOne(db, sql: "SELECT value FROM node_settings WHERE key = 'durable'")
                        }) == Data([42]))
                    seen.fire()
                })
            await seen.wait()
            #expect(visible.get() == true)

            try await store.write { tx in try tx.setSetting("after-await", [7]) }
            let fresh = try DatabaseQueue(path: path)
            let value = try await fresh.read { db in
                try Data.fetchOne(db, sql: "SELECT value FROM node_settings WHERE key = 'after-await'")
            }
            #expect(value == Data([7]))
            try fresh.close()
        }
    }

    /// The writer and completion threads carry their names where `top -H`, `perf` and `/proc`
    /// show them (a name over 15 bytes is refused by Linux and the thread keeps its starter's).
    @Test func theStoresThreadsAreNamedAsTheSystemShowsThem() async throws {
        #expect(StorageThreadName.all.allSatisfy { $0.utf8.count <= StorageThreadName.maxBytes })
        @Sendable func currentThreadName() -> String? {
            (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8))?.trimmingCharacters(in: .newlines)
        }
        try await withTemporaryStore { store, _ in
            let names = LockedBox<(apply: String?, complete: String?)>((nil, nil))
            let done = Signal()
            try store.submit(
                { tx in
                    names.set((currentThreadName(), nil))
                    try tx.setSetting("named", [1])
                },
                completion: { _ in
                    let applied = names.get().apply
                    names.set((applied, currentThreadName()))
                    done.fire()
                })
            await done.wait()
            #expect(names.get().apply == StorageThreadName.writer)
            // Completed by the completion thread, or by the writer when nothing else waits.
            #expect(
                [StorageThreadName.writer, StorageThreadName.completions].contains(names.get().complete ?? "none"),
                "\(names.get().complete ?? "none")")
        }
    }

    @Test(arguments: StoreBackend.allCases) func callbackReadsSeeCommittedWrites(_ backend: StoreBackend) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            try await store.write { tx in try tx.setSetting("seen", [3]) }
            let got = LockedBox<[UInt8]?>(nil)
            let done = Signal()
            store.read(
                { r in try r.setting("seen") },
                completion: { result in
                    got.set(try? result.get() ?? nil)
                    done.fire()
                })
            await done.wait()
            #expect(got.get() == [3])
        }
    }

    @Test(arguments: StoreBackend.allCases) func aFailingCommandRollsBackAloneWithinItsGroup(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let gate = WriterGate()
            try gate.hold(store)
            await gate.entered.wait()
            let counter = CompletionCounter(expected: 3)
            try store.submit({ tx in try tx.setSetting("first", [1]) }, completion: counter.record)
            try store.submit(
                { tx in
                    try tx.setSetting("doomed", [2])
                    throw StorageError(.invalidArgument, "refused on purpose")
                }, completion: counter.record)
            try store.submit({ tx in try tx.setSetting("third", [3]) }, completion: counter.record)
            gate.open()
            await counter.done.wait()
            #expect(counter.successes == 2)
            #expect((counter.failures.first as? StorageError)?.code == .invalidArgument)
            let keys = try await store.read { r in try ["first", "doomed", "third"].map { try r.setting($0) } }
            #expect(keys == [[1], nil, [3]])
            #expect(store.writerStatistics.transactions == 2)
        }
    }

    @Test(arguments: StoreBackend.allCases) func aFullQueueRefusesWithAClearError(_ backend: StoreBackend) async throws
    {
        try await withTemporaryStore(StorageConfiguration(writeQueueCapacity: 4, maxBatchSize: 16), backend: backend) {
            store, _ in
            let gate = WriterGate()
            try gate.hold(store)
            await gate.entered.wait()
            let counter = CompletionCounter(expected: 4)
            for i in 0..<4 {
                try store.submit({ tx in try tx.setSetting("q\(i)", [1]) }, completion: counter.record)
            }
            var refusal: StorageError?
            do {
                try store.submit({ tx in try tx.setSetting("overflow", [1]) }, completion: { _ in })
            } catch let error as StorageError {
                refusal = error
            }
            #expect(refusal?.code == .writeQueueFull)
            #expect(refusal?.reason.contains("4") == true)
            // The async API refuses the same way.
            let asyncCode = await storageErrorCode {
                try await store.write { tx in try tx.setSetting("overflow2", [1]) }
            }
            #expect(asyncCode == .writeQueueFull)
            gate.open()
            await counter.done.wait()
            #expect(counter.successes == 4)
            #expect(store.writerStatistics.refusedCommands == 2)
            // Room again once drained.
            try await store.write { tx in try tx.setSetting("later", [1]) }
            #expect(try await store.read { r in try r.setting("overflow") } == nil)
        }
    }

    @Test(arguments: StoreBackend.allCases) func aClosedStoreRefusesWritesButCommitsWhatWasQueued(
        _ backend: StoreBackend
    ) async throws {
        let (location, cleanup) = try temporaryStoreLocation(backend)
        defer { cleanup() }
        let store = try NodeStore(location: location)
        let gate = WriterGate()
        try gate.hold(store)
        await gate.entered.wait()
        let counter = CompletionCounter(expected: 1)
        try store.submit({ tx in try tx.setSetting("queued", [9]) }, completion: counter.record)
        let closer = Task.detached { try store.close() }
        gate.open()
        try await closer.value
        await counter.done.wait()
        #expect(counter.successes == 1)
        let code = await storageErrorCode { try await store.write { tx in try tx.setSetting("late", [1]) } }
        #expect(code == .closed)
        let reopened = try NodeStore(location: location)
        #expect(try await reopened.read { r in try r.setting("queued") } == [9])
        try reopened.close()
    }

    /// A command after a quiet spell commits at once; commands right after a commit wait for
    /// the group to fill (here to 3, within a delay far longer than the test: 1 s, as 100 ms
    /// passed between the first commit and the third submit in loaded full runs) and commit as
    /// one group; closing the store commits a gathering group at once. The group waits only
    /// while commands arrive closer together than the delay (``ArrivalGaps``): the writes
    /// before it, milliseconds apart, open a window of ~0.6 s.
    @Test(arguments: StoreBackend.allCases) func smallGroupsGatherUntilTheTargetAfterACommit(_ backend: StoreBackend)
        async throws
    {
        var configuration = StorageConfiguration()
        configuration.groupCommitDelayMicroseconds = 1_000_000
        configuration.groupCommitTarget = 3
        let (location, cleanup) = try temporaryStoreLocation(backend)
        defer { cleanup() }
        let store = try NodeStore(location: location, configuration: configuration)
        try await store.write { tx in try tx.setSetting("first", [0]) }
        // A second, warm commit to measure from (a backend's first transaction can take longer
        // than the delay on a loaded machine: PostgreSQL's did).
        try await store.write { tx in try tx.setSetting("second", [0]) }
        for i in 1...4 { try await store.write { tx in try tx.setSetting("warm\(i)", [0]) } }
        #expect(store.writerStatistics.transactions == 6)
        let group = CompletionCounter(expected: 3)
        for i in 1...3 {
            try store.submit({ tx in try tx.setSetting("k\(i)", [UInt8(i)]) }, completion: group.record)
        }
        await group.done.wait()
        #expect(group.successes == 3)
        // The delay would have committed each of them alone only after 1 s each.
        #expect(store.writerStatistics.transactions == 7)
        #expect(store.writerStatistics.largestBatch == 3)
        let alone = CompletionCounter(expected: 1)
        try store.submit({ tx in try tx.setSetting("last", [4]) }, completion: alone.record)
        try store.close()
        await alone.done.wait()
        #expect(alone.successes == 1)
    }

    /// Readers map nothing and keep a small cache, so a long history read grows the node by
    /// at most the readers' caches (RESOURCES.md §5); the writer keeps its map and cache.
    @Test func readersMapNothingAndKeepASmallCache() async throws {
        try await withTemporaryStore { store, _ in
            let reader = try await store.pool.read { db in
                (try Int.fetchOne(db, sql: "PRAGMA mmap_size"), try Int.fetchOne(db, sql: "PRAGMA cache_size"))
            }
            #expect(reader.0 == 0)
            #expect(reader.1 == -StorageConfiguration.defaultReaderPageCacheKiB)
            let writer = try store.writerPragmas()
            #expect(writer["mmap_size"] == String(StorageConfiguration().mmapBytes))
            #expect(writer["cache_size"] == String(-StorageConfiguration().pageCacheKiB))
        }
        var mapped = StorageConfiguration()
        mapped.readerMmapBytes = 1 << 20
        mapped.readerPageCacheKiB = 512
        let (path, cleanup) = temporaryDatabasePath()
        defer { cleanup() }
        let store = try NodeStore(path: path, configuration: mapped)
        let reader = try await store.pool.read { db in
            (try Int.fetchOne(db, sql: "PRAGMA mmap_size"), try Int.fetchOne(db, sql: "PRAGMA cache_size"))
        }
        #expect(reader.0 == 1 << 20)
        #expect(reader.1 == -512)
        try store.close()
    }

    @Test func configurationLimitsAreChecked() {
        #expect(throws: StorageError.self) { try StorageConfiguration(writeQueueCapacity: 0).validate() }
        #expect(throws: StorageError.self) { try StorageConfiguration(maxBatchSize: 0).validate() }
        #expect(throws: StorageError.self) { try StorageConfiguration(readerCount: 0).validate() }
        var delay = StorageConfiguration()
        delay.groupCommitDelayMicroseconds = -1
        #expect(throws: StorageError.self) { try delay.validate() }
        var target = StorageConfiguration()
        target.groupCommitTarget = 0
        #expect(throws: StorageError.self) { try target.validate() }
        var readerCache = StorageConfiguration()
        readerCache.readerPageCacheKiB = readerCache.pageCacheKiB + 1
        #expect(throws: StorageError.self) { try readerCache.validate() }
    }
}

/// A value shared between a completion and the test.
final class LockedBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T
    init(_ value: T) { self.value = value }
    func set(_ v: T) {
        lock.lock()
        value = v
        lock.unlock()
    }
    func get() -> T {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}

/// The group-commit spacing and ``CommandSources`` (the writer's `commit_siblings`).
@Suite struct StorageWriterCommitPolicyTests {
    /// With a spacing far longer than the test (an hour), the commands of a lone pipelining
    /// session are committed at once after a commit; with a second session in flight, the
    /// next command waits for the spacing (the writer gathers) until shutdown commits it.
    @Test func aLonePipeliningSessionIsCommittedWithoutTheSpacing() async throws {
        let (path, cleanup) = temporaryDatabasePath()
        defer { cleanup() }
        try NodeStore(path: path).close()  // a migrated database
        let pool = try DatabasePool(path: path)
        let sources = CommandSources()
        let writer = StorageWriter(
            connection: SQLiteWriterConnection(pool: pool, joinsWALWrites: false), capacity: 100, maxBatchSize: 64,
            groupDelay: .seconds(3_600), groupTarget: 64, sources: sources)

        // After a quiet spell a command commits at once (the policy before this one).
        let first = CompletionCounter(expected: 1)
        try writer.enqueue(NoteCommand(first))
        #expect(await first.done.wait(within: .seconds(60)))

        // One session with two commands in flight and nothing else: no spacing.
        sources.moved(from: 0, to: 1)
        sources.moved(from: 1, to: 2)
        #expect(sources.isLonePipeline)
        let lone = CompletionCounter(expected: 2)
        try writer.enqueue(NoteCommand(lone))
        try writer.enqueue(NoteCommand(lone))
        #expect(await lone.done.wait(within: .seconds(60)))
        #expect(lone.successes == 2)

        // A second session with a command in flight: the spacing applies again.
        sources.moved(from: 0, to: 1)
        #expect(!sources.isLonePipeline)
        let gathered = CompletionCounter(expected: 1)
        try writer.enqueue(NoteCommand(gathered))
        let deadline = ContinuousClock.now + .seconds(60)
        while !writer.isGathering, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(writer.isGathering)
        #expect(gathered.successes == 0)
        writer.shutdown()  // commits the gathering group at once
        #expect(await gathered.done.wait(within: .seconds(60)))
        #expect(gathered.successes == 1)
    }

    /// The spacing waits only while the next command is expected before it ends: commands
    /// arriving further apart than the spacing leave no window (nothing waits at a low rate);
    /// at a quarter of it the window approaches three quarters; a quiet spell closes it again.
    @Test func theGatheringWindowFollowsTheArrivalRate() {
        let ms: UInt64 = 1_000_000
        var gaps = ArrivalGaps(spacing: 0.002)
        #expect(gaps.gatheringWindow == 0)  // before any arrival
        var now: UInt64 = 1_000 * ms
        for _ in 0..<50 {
            gaps.note(at: now)
            now += 3 * ms  // slower than the spacing
        }
        #expect(gaps.gatheringWindow == 0)
        for _ in 0..<50 {
            gaps.note(at: now)
            now += ms / 2  // 2,000 a second
        }
        #expect(abs(gaps.mean - 0.0005) < 0.000_01)
        #expect(abs(gaps.gatheringWindow - 0.0015) < 0.000_01)
        now += 10_000 * ms  // a quiet spell counts as one gap of the spacing
        gaps.note(at: now)
        #expect(gaps.gatheringWindow < 0.0015 && gaps.gatheringWindow > 0.001)
        for _ in 0..<50 {
            now += 5 * ms
            gaps.note(at: now)
        }
        #expect(gaps.gatheringWindow < 0.000_01)
    }

    @Test func sourcesCountOnlyTransitions() {
        let sources = CommandSources()
        #expect(!sources.isLonePipeline)
        sources.moved(from: 0, to: 1)
        #expect(!sources.isLonePipeline)  // one command: a request/response client
        sources.moved(from: 1, to: 2)
        sources.moved(from: 2, to: 3)
        #expect(sources.isLonePipeline)
        sources.moved(from: 0, to: 1)  // another session
        #expect(!sources.isLonePipeline)
        sources.moved(from: 1, to: 0)
        sources.moved(from: 3, to: 2)
        #expect(sources.isLonePipeline)
        sources.moved(from: 2, to: 1)
        #expect(!sources.isLonePipeline)
    }
}

/// A command that writes nothing and reports its completion.
private final class NoteCommand: StorageCommand {
    let counter: CompletionCounter
    init(_ counter: CompletionCounter) { self.counter = counter }
    func apply(_ db: any SQLSession, cache: WriterCache) throws {}
    func complete(_ failure: (any Error)?) {
        counter.record(failure.map { Result<Void, any Error>.failure($0) } ?? .success(()))
    }
}

extension Signal {
    /// Waits until fired or until `timeout` passed; true when fired.
    func wait(within timeout: Duration) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await self.wait()
                return true
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            if !first { self.fire() }  // lets the waiting child end
            group.cancelAll()
            return first
        }
    }
}
