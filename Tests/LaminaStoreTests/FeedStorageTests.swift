import Foundation
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

@Suite struct FeedStorageTests {
    let alice: UserID = "alice"
    let bob: UserID = "bob"
    let t = Timestamp(millisecondsSince1970: 5_000)

    @Test(arguments: StoreBackend.allCases) func feedsCountUpPerUserAndReadInOrderAfterACursor(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let c = ConversationID.random()
            var seqs: [[UserID: UInt64]] = []
            for i in 0..<5 {
                let s = try await store.write { [t] tx in
                    try tx.appendChange(
                        to: [self.alice, self.bob, self.alice], kind: 1, conversation: c, message: nil,
                        payload: [UInt8(i)], at: t)
                }
                seqs.append(s)
            }
            let onlyBob = try await store.write { [t] tx in
                try tx.appendChange(to: [self.bob], kind: 2, conversation: nil, message: .random(), payload: [9], at: t)
            }
            #expect(seqs.map { $0[alice] } == [1, 2, 3, 4, 5])
            #expect(seqs.map { $0[bob] } == [1, 2, 3, 4, 5])
            #expect(onlyBob == [bob: 6])
            #expect(try await store.read { r in try r.feedHead(of: self.bob) } == 6)
            #expect(try await store.read { r in try r.feedHead(of: "nobody") } == 0)

            let afterTwo = try await store.read { r in try r.feed(of: self.alice, after: 2, limit: 10) }
            #expect(afterTwo.map(\.seq) == [3, 4, 5])
            #expect(afterTwo.map(\.payload) == [[2], [3], [4]])
            #expect(afterTwo.allSatisfy { $0.conversation == c && $0.kind == 1 && $0.createdAt == self.t })
            let page = try await store.read { r in try r.feed(of: self.bob, after: 0, limit: 4) }
            #expect(page.map(\.seq) == [1, 2, 3, 4])
            #expect(try await store.read { r in try r.feed(of: self.bob, after: 6, limit: 10) }.isEmpty)
            #expect(
                await storageErrorCode {
                    _ = try await store.read { r in try r.feed(of: self.bob, after: 0, limit: 0) }
                } == .invalidArgument)
        }
    }

    @Test(arguments: StoreBackend.allCases) func deviceCursorsOnlyMoveForwardAndStayWithinTheFeed(
        _ backend: StoreBackend
    ) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            for _ in 0..<4 {
                _ = try await store.write { [t] tx in
                    try tx.appendChange(to: [self.alice], kind: 1, conversation: nil, message: nil, payload: [], at: t)
                }
            }
            let (a, b, c) = try await store.write { [t] tx in
                (
                    try tx.advanceCursor(of: "phone", user: self.alice, to: 3, at: t),
                    try tx.advanceCursor(of: "phone", user: self.alice, to: 1, at: t),
                    try tx.advanceCursor(of: "laptop", user: self.alice, to: 2, at: t)
                )
            }
            #expect((a, b, c) == (3, 3, 2))
            #expect(try await store.read { r in try r.cursors(of: self.alice) } == ["phone": 3, "laptop": 2])
            #expect(try await store.read { r in try r.cursor(of: "tablet", user: self.alice) } == 0)
            let beyond = await storageErrorCode {
                try await store.write { [t] tx in _ = try tx.advanceCursor(of: "phone", user: self.alice, to: 5, at: t)
                }
            }
            #expect(beyond == .invalidArgument)
            let badDevice = await storageErrorCode {
                try await store.write { [t] tx in _ = try tx.advanceCursor(of: "", user: self.alice, to: 1, at: t) }
            }
            #expect(badDevice == .invalidArgument)
            // Catch-up from a device's cursor, then pruning what every device has.
            #expect(
                try await store.read { r in
                    try r.feed(of: self.alice, after: r.cursor(of: "laptop", user: self.alice), limit: 100)
                }.map(\.seq) == [3, 4])
            let pruned = try await store.write { tx in try tx.pruneFeed(of: self.alice, through: 2) }
            #expect(pruned == 2)
            #expect(
                try await store.read { r in try r.feed(of: self.alice, after: 0, limit: 100) }.map(\.seq) == [3, 4])
            // Seqs keep counting after pruning.
            let next = try await store.write { [t] tx in
                try tx.appendChange(to: [self.alice], kind: 1, conversation: nil, message: nil, payload: [], at: t)
            }
            #expect(next == [alice: 5])
        }
    }

    /// Feeds are pruned through what every device seen since the retention's start has; a user
    /// whose devices were all away longer loses the whole feed; a user no device ever synced
    /// with a cursor keeps theirs (SPEC §6.3 retention).
    @Test(arguments: StoreBackend.allCases) func feedsArePrunedThroughWhatRecentDevicesHave(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let carol: UserID = "carol"
            for _ in 0..<5 {
                _ = try await store.write { [t] tx in
                    try tx.appendChange(
                        to: [self.alice, self.bob, carol], kind: 1, conversation: nil, message: nil, payload: [], at: t)
                }
            }
            let old = Timestamp(millisecondsSince1970: 1_000)
            let recent = Timestamp(millisecondsSince1970: 9_000)
            try await store.write { tx in
                _ = try tx.advanceCursor(of: "phone", user: self.alice, to: 4, at: recent)
                _ = try tx.advanceCursor(of: "laptop", user: self.alice, to: 2, at: recent)
                _ = try tx.advanceCursor(of: "tablet", user: self.alice, to: 1, at: old)  // away: not waited for
                _ = try tx.advanceCursor(of: "phone", user: self.bob, to: 3, at: old)
            }
            let pruned = try await store.write { tx in
                try tx.pruneFeeds(devicesSeenSince: Timestamp(millisecondsSince1970: 5_000))
            }
            #expect(pruned == 2 + 5)
            #expect(
                try await store.read { r in try r.feed(of: self.alice, after: 0, limit: 10) }.map(\.seq) == [3, 4, 5])
            #expect(try await store.read { r in try r.feed(of: self.bob, after: 0, limit: 10) }.isEmpty)
            #expect(try await store.read { r in try r.feedHead(of: self.bob) } == 5)
            #expect(try await store.read { r in try r.feed(of: carol, after: 0, limit: 10) }.count == 5)
        }
    }

    /// A feed's head is derived from its entries, and pruning every entry leaves it behind as
    /// a floor: seqs never restart, whether the writer remembers the head or reads it again.
    @Test(arguments: StoreBackend.allCases) func seqsKeepCountingAfterEveryEntryIsPruned(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            for _ in 0..<3 {
                _ = try await store.write { [t] tx in
                    try tx.appendChange(to: [self.alice], kind: 1, conversation: nil, message: nil, payload: [], at: t)
                }
            }
            #expect(try await store.write { tx in try tx.pruneFeed(of: self.alice, through: 3) } == 3)
            #expect(try await store.read { r in try r.feed(of: self.alice, after: 0, limit: 10) }.isEmpty)
            #expect(try await store.read { r in try r.feedHead(of: self.alice) } == 3)
            // A failing command rolls back and makes the writer forget what it cached.
            struct Refused: Error {}
            await #expect(throws: Refused.self) { try await store.write { _ in throw Refused() } }
            let next = try await store.write { [t] tx in
                try tx.appendChange(to: [self.alice], kind: 1, conversation: nil, message: nil, payload: [], at: t)
            }
            #expect(next == [alice: 4])
            #expect(try await store.read { r in try r.feedHead(of: self.alice) } == 4)
        }
    }

    /// New entries wait in `feed_tail` and move into `feed_entries` when the tail is full
    /// (SQLite's one writer; PostgreSQL's writers append to the feeds directly); a group of at
    /// least `feedDirectGroupCommands` commands moves the tail first and appends directly.
    /// Every read (whole feeds, pages that straddle the two tables, heads, pruning) sees one
    /// feed, whichever table holds each entry, including after a rolled-back command.
    @Test(arguments: StoreBackend.allCases) func feedsReadAsOneAcrossTheTailAndItsMoves(_ backend: StoreBackend)
        async throws
    {
        var configuration = StorageConfiguration()
        configuration.feedTailRows = 12
        configuration.feedDirectGroupCommands = 4
        try await withTemporaryStore(configuration, backend: backend) { store, _ in
            var expected: [UserID: [UInt64: [UInt8]]] = [alice: [:], bob: [:]]
            var payload: UInt8 = 0
            var moves = 0
            var largeGroups = 0
            var tailBefore = 0
            for i in 0..<30 {
                let users: [UserID] = i % 3 == 2 ? [bob] : [alice, bob]
                if i == 7 {
                    // Appends, then fails: rolled back, and the writer counts its tail again.
                    struct Refused: Error {}
                    await #expect(throws: Refused.self) {
                        try await store.write { [t] tx in
                            _ = try tx.appendChange(
                                to: users, kind: 1, conversation: nil, message: nil, payload: [0xFF], at: t)
                            throw Refused()
                        }
                    }
                }
                var appended = 0
                // Six commands of one entry each in one group (queued behind a held writer): a
                // large group, at a point where the tail would have kept them (it moves them
                // first and appends directly, so the tail is empty after it).
                let large = i >= 14 && i % 3 == 0 && tailBefore + 6 < configuration.feedTailRows
                if large {
                    let users: [UserID] = [bob]
                    let gate = WriterGate()
                    try gate.hold(store)
                    await gate.entered.wait()
                    let results = LockedBox<[(UInt8, [UserID: UInt64])]>([])
                    let counter = CompletionCounter(expected: 6)
                    for k in 0..<6 {
                        let p = payload &+ UInt8(k)
                        try store.submit(
                            { [t] tx in
                                try tx.appendChange(
                                    to: users, kind: 1, conversation: nil, message: nil, payload: [p], at: t)
                            },
                            completion: { (result: Result<[UserID: UInt64], any Error>) in
                                if case .success(let seqs) = result { results.set(results.get() + [(p, seqs)]) }
                                counter.record(result)
                            })
                    }
                    gate.open()
                    await counter.done.wait()
                    #expect(results.get().count == 6)
                    for (p, seqs) in results.get() {
                        for user in users { expected[user]![seqs[user]!] = [p] }
                    }
                    payload &+= 6
                    appended = 6
                    largeGroups += 1
                } else {
                    let seqs = try await store.write { [t, payload] tx in
                        try tx.appendChange(
                            to: users, kind: 1, conversation: nil, message: nil, payload: [payload], at: t)
                    }
                    for user in users { expected[user]![seqs[user]!] = [payload] }
                    payload &+= 1
                    appended = users.count
                }
                let tail = try await store.read { r in Int(try r.db.int64("SELECT count(*) FROM feed_tail") ?? -1) }
                if backend == .sqlite {
                    #expect(tail < configuration.feedTailRows)
                    if large {
                        #expect(tail == 0)
                    } else if tail < tailBefore + appended {
                        moves += 1
                    }
                } else {
                    #expect(tail == 0)
                }
                tailBefore = tail
                for user in [alice, bob] {
                    let want = expected[user]!.sorted { $0.key < $1.key }
                    #expect(want.map(\.key) == (0..<want.count).map { UInt64($0 + 1) })
                    let whole = try await store.read { r in try r.feed(of: user, after: 0, limit: 1_000) }
                    #expect(whole.map(\.seq) == want.map(\.key))
                    #expect(whole.map(\.payload) == want.map(\.value))
                    #expect(try await store.read { r in try r.feedHead(of: user) } == UInt64(want.count))
                    // Pages of 3 from every cursor: each straddles the tables somewhere.
                    var paged: [[UInt8]] = []
                    var cursor: UInt64 = 0
                    while true {
                        let page = try await store.read { [cursor] r in try r.feed(of: user, after: cursor, limit: 3) }
                        guard let last = page.last else { break }
                        #expect(page.count <= 3)
                        paged += page.map(\.payload)
                        cursor = last.seq
                    }
                    #expect(paged == want.map(\.value))
                }
            }
            if backend == .sqlite {
                #expect(moves >= 2)
                #expect(largeGroups >= 2)
            }
            // Pruning takes entries from both tables; seqs keep counting.
            let head = UInt64(expected[bob]!.count)
            #expect(try await store.write { tx in try tx.pruneFeed(of: self.bob, through: head - 1) } == Int(head - 1))
            #expect(try await store.read { r in try r.feed(of: self.bob, after: 0, limit: 100) }.map(\.seq) == [head])
            let next = try await store.write { [t] tx in
                try tx.appendChange(to: [self.bob], kind: 1, conversation: nil, message: nil, payload: [], at: t)
            }
            #expect(next == [bob: head + 1])
        }
    }

    @Test(arguments: StoreBackend.allCases) func anIdempotentRetryReturnsTheFirstResultAndWritesNothing(
        _ backend: StoreBackend
    ) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let c = try conversation(alice, [bob])
            try await store.write { tx in _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA) }
            let key = IdempotencyKey(user: alice, id: UUID())
            let first = try textMessage("once", in: c.id, from: alice, at: hlc(10))
            let retry = try textMessage("twice", in: c.id, from: alice, at: hlc(11))
            let send: @Sendable (Message) async throws -> IdempotentOutcome<UInt64> = { m in
                try await store.write(idempotencyKey: key) { tx in
                    try tx.appendMessage(m, hlc: m.position!, origin: nodeA)
                    let seqs = try tx.appendChange(
                        to: [self.alice, self.bob], kind: 1, conversation: m.conversationID, message: m.id,
                        payload: [1], at: self.t)
                    return (seqs[self.bob]!, Array("ack \(m.position!)".utf8))
                }
            }
            let a = try await send(first)
            guard case .applied(let seq, let record) = a else {
                Issue.record("first send not applied")
                return
            }
            #expect(seq == 1)
            let b = try await send(retry)
            guard case .replayed(let replayed) = b else {
                Issue.record("retry was applied again")
                return
            }
            #expect(replayed == record)
            #expect(try await store.read { r in try r.messageCount(of: c.id) } == 1)
            #expect(try await store.read { r in try r.message(retry.id) } == nil)
            #expect(try await store.read { r in try r.feedHead(of: self.bob) } == 1)
            // Another user's key with the same id is a different command.
            let other = try await store.write(idempotencyKey: IdempotencyKey(user: bob, id: key.id)) { _ in (0, [2]) }
            #expect(other.record == [2])
        }
    }

    @Test(arguments: StoreBackend.allCases) func twoCommandsWithOneKeyInOneGroupApplyOnce(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let key = IdempotencyKey(user: alice, id: UUID())
            let gate = WriterGate()
            try gate.hold(store)
            await gate.entered.wait()
            let outcomes = LockedBox<[String]>([])
            let counter = CompletionCounter(expected: 2)
            for i in 0..<2 {
                try store.submit(
                    { tx in
                        if let recorded = try tx.read.recordedResult(for: key) { return recorded }
                        try tx.setSetting("winner", [UInt8(i)])
                        try tx.recordResult([UInt8(i)], for: key, at: Timestamp(millisecondsSince1970: 1))
                        return [UInt8(i)]
                    },
                    completion: { (result: Result<[UInt8], any Error>) in
                        if case .success(let r) = result { outcomes.set(outcomes.get() + ["\(r)"]) }
                        counter.record(result)
                    })
            }
            gate.open()
            await counter.done.wait()
            #expect(outcomes.get() == ["[0]", "[0]"])
            #expect(try await store.read { r in try r.setting("winner") } == [0])
            // Recording the same key twice directly is refused.
            let twice = await storageErrorCode {
                try await store.write { tx in
                    try tx.recordResult([1], for: key, at: Timestamp(millisecondsSince1970: 2))
                }
            }
            #expect(twice == .alreadyExists)
            let pruned = try await store.write { tx in
                try tx.pruneIdempotencyRecords(before: Timestamp(millisecondsSince1970: 2))
            }
            #expect(pruned == 1)
        }
    }

    @Test(arguments: StoreBackend.allCases) func aThrowingIdempotentCommandRecordsNothing(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let key = IdempotencyKey(user: alice, id: UUID())
            let failed = await storageErrorCode {
                _ = try await store.write(idempotencyKey: key) { (tx) throws -> (value: Int, record: [UInt8]) in
                    try tx.setSetting("partial", [1])
                    throw StorageError(.invalidArgument, "rejected")
                }
            }
            #expect(failed == .invalidArgument)
            #expect(try await store.read { r in try r.recordedResult(for: key) } == nil)
            #expect(try await store.read { r in try r.setting("partial") } == nil)
            let retried = try await store.write(idempotencyKey: key) { _ in (1, [7]) }
            guard case .applied(1, [7]) = retried else {
                Issue.record("retry after failure did not apply")
                return
            }
        }
    }
}
