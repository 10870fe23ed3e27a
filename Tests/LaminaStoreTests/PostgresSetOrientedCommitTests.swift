import Foundation
import LaminaModel
import LaminaStoreTestSupport
import LaminaTestPostgres
import Testing

@testable import LaminaStore

/// PostgreSQL's set-oriented group commit (`PostgresWriteBatch`): a group of sends costs a
/// constant number of statements, the seqs a command gets are the ones stored, a taken message
/// id fails its command alone, and a statement outside the batch sees the writes before it.
@Suite struct PostgresSetOrientedCommitTests {
    private static let alice: UserID = "alice"
    private static let bob: UserID = "bob"
    private static let carol: UserID = "carol"
    private static let users = [alice, bob, carol]

    /// A store with one conversation of alice, bob and carol holding one message.
    private static func storeWithConversation() async throws -> (NodeStore, ConversationID) {
        let store = try NodeStore(location: .postgres(try PostgresTestCluster.newLocation()))
        let created = try conversation(alice, [bob, carol])
        try await store.write { tx in
            _ = try tx.createConversation(created, hlc: hlc(1_000), origin: nodeA)
            let first = try textMessage("first", in: created.id, from: alice, at: hlc(1_001))
            try tx.appendMessage(first, hlc: hlc(1_001), origin: nodeA)
            _ = try tx.appendMessageCreated(
                first.id, in: created.id, to: Set(users), kind: 1, at: Timestamp(millisecondsSince1970: 1_001))
        }
        return (store, created.id)
    }

    /// Queues `messages` as one group behind a held writer (each: the message, its feed entries)
    /// and returns each one's outcome once all completed.
    private static func sendAsOneGroup(
        _ store: NodeStore, _ messages: [Message], between: (@Sendable (StorageTransaction) throws -> Void)? = nil
    ) async throws -> [Result<SentSeqs, any Error>] {
        let gate = WriterGate()
        try gate.hold(store)
        await gate.entered.wait()
        let outcomes = Outcomes(count: messages.count)
        let counter = CompletionCounter(expected: messages.count)
        for (i, message) in messages.enumerated() {
            try store.submit(
                { tx in
                    if i == messages.count / 2 { try between?(tx) }
                    try tx.appendMessage(message, hlc: message.position!, origin: nodeA)
                    return SentSeqs(
                        seqs: try tx.appendMessageCreated(
                            message.id, in: message.conversationID, to: Set(users), kind: 1,
                            at: message.sentAt!))
                },
                completion: {
                    outcomes.set(i, $0)
                    counter.record($0)
                })
        }
        gate.open()
        await counter.done.wait()
        return outcomes.all
    }

    private static func messages(_ count: Int, in id: ConversationID, from start: UInt64 = 2_000) throws -> [Message] {
        try (0..<count).map { i in
            try textMessage("m\(i)", in: id, from: users[i % 3], at: hlc(start + UInt64(i)))
        }
    }

    /// Each user's feed as stored: seq → message id.
    private static func feeds(_ store: NodeStore) async throws -> [UserID: [UInt64: MessageID]] {
        try await store.read { r in
            var out: [UserID: [UInt64: MessageID]] = [:]
            for user in users {
                for entry in try r.feed(of: user, after: 0, limit: 1_000) {
                    out[user, default: [:]][entry.seq] = entry.message
                }
            }
            return out
        }
    }

    @Test func aGroupOfSendsIsAConstantNumberOfStatements() async throws {
        let (store, id) = try await Self.storeWithConversation()
        defer { try? store.close() }
        // A first group prepares what is prepared once per connection.
        _ = try await Self.sendAsOneGroup(store, try Self.messages(4, in: id, from: 1_500))
        let before = store.postgresStatistics!.statements
        let sent = try Self.messages(60, in: id)
        let outcomes = try await Self.sendAsOneGroup(store, sent)
        let statements = store.postgresStatistics!.statements - before
        // BEGIN, the conversation's header (locked), the messages, their counts, their feed
        // entries, the notification, COMMIT: no statement per message (before: 4 × 60).
        #expect(statements <= 10, "\(statements) statements for a group of 60 sends")
        #expect(store.writerStatistics.largestBatch >= 60)

        // Every command got the seqs stored for its message, each feed gapless.
        let feeds = try await Self.feeds(store)
        for (message, outcome) in zip(sent, outcomes) {
            let seqs = try outcome.get().seqs
            #expect(Set(seqs.keys) == Set(Self.users))
            for (user, seq) in seqs {
                #expect(feeds[user]?[seq] == message.id, "\(user) seq \(seq)")
            }
        }
        for user in Self.users {
            #expect(feeds[user]?.keys.sorted() == Array(1...65).map { UInt64($0) })
        }
        // The counts moved by each message: 65 messages, unread for the two others of each.
        let unread = try await store.read { r in try Self.users.map { try r.unreadCount(of: id, for: $0) } }
        // alice sent 1 + 2 + 20 of the 65, bob and carol 1 + 20 each.
        #expect(unread == [65 - 23, 65 - 21, 65 - 21])
        #expect(try await store.read { r in try r.messageCount(of: id) } == 65)
    }

    @Test func aTakenMessageIdFailsItsCommandAloneAndTheOthersGetTheirSeqs() async throws {
        let (store, id) = try await Self.storeWithConversation()
        defer { try? store.close() }
        var sent = try Self.messages(20, in: id)
        sent[12].id = sent[3].id  // the same id twice in one group: the second is refused
        let outcomes = try await Self.sendAsOneGroup(store, sent)
        for (i, outcome) in outcomes.enumerated() {
            if i == 12 {
                #expect(
                    (outcome.failureError as? StorageError)?.code == .alreadyExists,
                    "\(String(describing: outcome.failureError))")
            } else {
                #expect(outcome.failureError == nil)
            }
        }
        let feeds = try await Self.feeds(store)
        for (i, (message, outcome)) in zip(sent, outcomes).enumerated() where i != 12 {
            for (user, seq) in try outcome.get().seqs { #expect(feeds[user]?[seq] == message.id) }
        }
        for user in Self.users { #expect(feeds[user]?.keys.sorted() == Array(1...20).map { UInt64($0) }) }
    }

    @Test func aStatementOutsideTheBatchSeesTheWritesBeforeIt() async throws {
        let (store, id) = try await Self.storeWithConversation()
        defer { try? store.close() }
        let seen = Outcomes(count: 1)
        let sent = try Self.messages(10, in: id)
        // The sixth command first reads bob's feed head: the five sends before it are written by then.
        let outcomes = try await Self.sendAsOneGroup(store, sent) { tx in
            seen.set(0, .success(SentSeqs(seqs: [Self.bob: try tx.read.feedHead(of: Self.bob)])))
        }
        #expect(try seen.all[0].get().seqs[Self.bob] == 6)
        let feeds = try await Self.feeds(store)
        for (message, outcome) in zip(sent, outcomes) {
            for (user, seq) in try outcome.get().seqs { #expect(feeds[user]?[seq] == message.id) }
        }
        for user in Self.users { #expect(feeds[user]?.keys.sorted() == Array(1...11).map { UInt64($0) }) }
    }
}

/// A test command's result: the seqs its feed appends returned, resolved by the writer.
private struct SentSeqs: ProvisionalFeedSeqs {
    var seqs: [UserID: UInt64]

    func resolvingFeedSeqs(_ resolve: (UserID, UInt64) -> UInt64) -> SentSeqs {
        SentSeqs(seqs: Dictionary(uniqueKeysWithValues: seqs.map { ($0.key, resolve($0.key, $0.value)) }))
    }
}

private final class Outcomes: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [Result<SentSeqs, any Error>?]

    init(count: Int) { results = Array(repeating: nil, count: count) }

    func set(_ i: Int, _ result: Result<SentSeqs, any Error>) {
        lock.lock()
        results[i] = result
        lock.unlock()
    }

    var all: [Result<SentSeqs, any Error>] {
        lock.lock()
        defer { lock.unlock() }
        return results.map { $0 ?? .failure(StorageError(.closed, "no outcome")) }
    }
}

extension Result {
    fileprivate var failureError: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
