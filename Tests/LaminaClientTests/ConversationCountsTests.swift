import Foundation
import GRDB
import LaminaModel
import Testing

@testable import LaminaClient

/// A conversation's counts and last message, kept by triggers since v8 (`ConversationSummary`),
/// stay what a scan of its messages makes them, whatever sequence of writes made the store.
@Suite struct ConversationCountsTests {
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func countsMatchAScanAfterEveryTransaction(seed: UInt64) async throws {
        try await withStore { store in
            let (failures, done) = try await onOwnThread {
                var run = CountsRun(store: store, seed: seed)
                var failures: [String] = []
                for step in 0..<220 where failures.isEmpty {
                    let op = try run.step()
                    failures = try run.mismatches().map { "seed \(seed), step \(step) (\(op)): \($0)" }
                }
                return (failures, run.done)
            }
            try #require(failures.isEmpty, "\(failures.joined(separator: "\n"))")
            // The run reached what it is meant to exercise.
            #expect(
                done.isSuperset(of: [
                    "send", "ack", "receive", "markRead", "readUpTo", "deleteMessage", "deleteBelow",
                    "merge", "mergeRename", "deleteConversation", "dropMessages", "dropConversations",
                ]),
                "operations never run: \(CountsRun.names.subtracting(done))")
        }
    }

    @Test func aStoreFromBeforeTheCountsLearnsThem() async throws {
        try await withTemporaryDirectory { dir in
            let location = StoreLocation(dataDirectory: dir, user: alice)
            try FileManager.default.createDirectory(at: location.contentDirectory, withIntermediateDirectories: true)
            let a = ConversationID.random()
            let b = ConversationID.random()
            let empty = ConversationID.random()
            do {
                // A store as the previous version left it: up to v7, two conversations with messages
                // (unread, read, sent, not sent) and one without.
                let pool = try DatabasePool(path: location.databaseURL.path)
                try StoreSchema.migrator().migrate(pool, upTo: "v7-outbox-conversation")
                try pool.write { db in
                    for id in [a, b, empty] {
                        try db.execute(
                            sql:
                                "INSERT INTO conversation(id, creator, is_distinct, receipts_enabled, created_at, metadata, is_synced) VALUES (?, 'bob', 0, 1, 1, ?, 1)",
                            arguments: [StoreCoding.blob(id), StoreCoding.encode(Metadata())])
                    }
                    let rows: [(ConversationID, UserID, UInt64?, Bool)] = [
                        (a, bob, 10, true), (a, bob, 11, false), (a, alice, 12, false), (a, alice, nil, false),
                        (a, bob, 13, true),
                        (b, alice, nil, false),
                    ]
                    for (conversation, sender, physical, unread) in rows {
                        try db.execute(
                            sql: """
                                INSERT INTO message(id, conversation_id, sender, pos_physical, pos_logical, pos_node, is_sent, is_unread)
                                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                                """,
                            arguments: [
                                StoreCoding.blob(MessageID.random()), StoreCoding.blob(conversation), sender.rawValue,
                                physical.map { Int64($0) }, physical.map { _ in 0 }, physical.map { _ in 1 },
                                physical != nil, unread,
                            ])
                    }
                }
                try pool.close()
            }
            let store = try LocalStore(location: location)
            defer { try? store.close() }
            for id in [a, b, empty] {
                #expect(try store.read { db in try ConversationSummary.read(db, id) } == (try scanned(store, id)))
            }
            #expect(try store.read { db in try ConversationSummary.read(db, a) }.total == 5)
            // The next write refreshes the summary from the counts.
            try store.apply([.message(try remoteMessage(in: a, at: 5), receivedAt: received)])
            let stored = try #require(try store.conversation(a))
            #expect(stored.totalMessageCount == 6 && stored.unreadMessageCount == 3)
            #expect(stored.lastMessageID == (try scanned(store, a)).lastMessageID)
        }
    }

    /// Each read of the summary is a lookup in an index, never a scan or a sort of the messages.
    @Test func theSummaryReadsUseIndexesOnly() async throws {
        try await withStore { store in
            let plans = try store.read { db in
                try ConversationSummary.statements.map { sql in
                    try Row.fetchAll(
                        db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: [StoreCoding.blob(ConversationID.random())]
                    ).map { $0["detail"] as String }
                }
            }
            #expect(plans.count == 3)
            for plan in plans {
                #expect(
                    plan.count == 1 && plan.allSatisfy { $0.hasPrefix("SEARCH") && !$0.contains("TEMP B-TREE") },
                    "\(plan)")
            }
        }
    }
}

/// Runs `body` on a thread of its own, off Swift's cooperative pool (a long run of synchronous
/// store writes there would hold up other tests' streams).
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

/// The summary as the store computed it before v8, by scanning the conversation's messages.
func scanned(_ store: LocalStore, _ id: ConversationID) throws -> ConversationSummary {
    try store.read { db in
        let key = StoreCoding.blob(id)
        let row = try Row.fetchOne(
            db,
            sql: """
                SELECT COUNT(*) AS total, COALESCE(SUM(is_unread), 0) AS unread, MAX(is_sent) AS anySent, COALESCE(SUM(pos_physical IS NULL), 0) AS unsent
                FROM message WHERE conversation_id = ?
                """, arguments: [key])!
        let last = try Data.fetchOne(
            db,
            sql: """
                SELECT id FROM message WHERE conversation_id = ?
                ORDER BY (pos_physical IS NULL) DESC, pos_physical DESC, pos_logical DESC, pos_node DESC, rowid DESC LIMIT 1
                """, arguments: [key])
        return ConversationSummary(
            total: row["total"], unread: row["unread"], anySent: (row["anySent"] as Bool?) == true,
            unsent: row["unsent"],
            lastMessageID: last.map { MessageID(uuid: StoreCoding.uuid($0)) })
    }
}
