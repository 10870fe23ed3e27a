import Foundation
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

/// `StorageReader.feeds(_:)`, the read a node makes once for all its sessions woken by another
/// node's commit: each user's entries are exactly what `feed(of:after:limit:)` gives (messages,
/// recorded and derived statuses included), in a constant number of statements on PostgreSQL,
/// and its limits are enforced.
@Suite struct BatchedFeedReadTests {
    private static let alice: UserID = "alice"
    private static let bob: UserID = "bob"
    private static let carol: UserID = "carol"

    /// Two conversations (alice, bob, carol; alice, bob), messages in both, a change with a
    /// payload, a recorded status and markers: every kind of entry and status source.
    private static func fill(_ store: NodeStore) async throws {
        let everyone = try conversation(alice, [bob, carol])
        let pair = try conversation(alice, [bob], distinct: false, at: 1_100)
        try await store.write { tx in
            _ = try tx.createConversation(everyone, hlc: hlc(1_000), origin: nodeA)
            _ = try tx.createConversation(pair, hlc: hlc(1_100), origin: nodeA)
            var sent: [Message] = []
            for i in 0..<6 {
                let id = i % 2 == 0 ? everyone.id : pair.id
                let message = try textMessage(
                    "m\(i)", in: id, from: i % 3 == 0 ? alice : bob, at: hlc(2_000 + UInt64(i)))
                try tx.appendMessage(message, hlc: message.position!, origin: nodeA)
                let users: Set<UserID> = id == everyone.id ? [alice, bob, carol] : [alice, bob]
                _ = try tx.appendMessageCreated(message.id, in: id, to: users, kind: 1, at: message.sentAt!)
                sent.append(message)
            }
            _ = try tx.appendChange(
                to: [alice, carol], kind: 7, conversation: everyone.id, message: nil, payload: [1, 2, 3],
                at: Timestamp(millisecondsSince1970: 3_000))
            try tx.recordStatus(.read, of: sent[2].id, for: carol)
            try tx.raise(.delivered, to: sent[1].position!, user: bob, conversation: pair.id)
            try tx.setReadUpTo(sent[0].position!, user: bob, conversation: everyone.id)
        }
    }

    @Test(arguments: StoreBackend.allCases) func eachUsersEntriesAreWhatTheirOwnFeedReadGives(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            try await Self.fill(store)
            let ranges = [
                FeedRange(user: Self.alice, after: 1, through: 5),
                FeedRange(user: Self.bob, after: 0, through: 6),
                FeedRange(user: Self.carol, after: 1, through: 30),  // beyond the head (4)
                FeedRange(user: "nobody", after: 0, through: 4),
                FeedRange(user: "empty-range", after: 3, through: 3),
            ]
            let statementsBefore = store.postgresStatistics?.statements
            let batched = try await store.read { r in try r.feeds(ranges) }
            if let statementsBefore, let after = store.postgresStatistics?.statements {
                // BEGIN, the statuses' sources, the entries, COMMIT (and the two PREPAREs on a
                // connection's first use): whatever the number of users and conversations.
                #expect(after - statementsBefore <= 6, "\(after - statementsBefore) statements")
            }
            #expect(Set(batched.keys) == [Self.alice, Self.bob, Self.carol])
            for range in ranges {
                let own = try await store.read { r in try r.feed(of: range.user, after: range.after, limit: 100) }
                    .filter { $0.seq <= range.through }
                #expect((batched[range.user] ?? []) == own, "\(range.user)")
            }
            #expect(batched[Self.alice]?.map(\.seq) == [2, 3, 4, 5])
            #expect(batched[Self.carol]?.map(\.seq) == [2, 3, 4])
            #expect(batched[Self.carol]?.last?.payload == [1, 2, 3])
            // The messages came with their statuses (compared whole above): carol's recorded read.
            let third = batched[Self.alice]?.first { $0.seq == 3 }?.createdMessage
            #expect(third?.parts.first?.inlineBytes == Array("m2".utf8))
            #expect(third?.recipientStatus[Self.carol] == .read)
        }
    }

    @Test(arguments: StoreBackend.allCases) func itsLimitsAreEnforced(_ backend: StoreBackend) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let tooLong = [FeedRange(user: Self.alice, after: 0, through: BatchedFeedRead.maxEntriesPerUser + 1)]
            let backwards = [FeedRange(user: Self.alice, after: 5, through: 4)]
            let twice = [
                FeedRange(user: Self.alice, after: 0, through: 1), FeedRange(user: Self.alice, after: 1, through: 2),
            ]
            let many = (0...BatchedFeedRead.maxUsers).map {
                FeedRange(user: try! UserID("u\($0)"), after: 0, through: 1)
            }
            for ranges in [tooLong, backwards, twice, many] {
                #expect(
                    await storageErrorCode { _ = try await store.read { r in try r.feeds(ranges) } } == .invalidArgument
                )
            }
            let none = try await store.read { r in try r.feeds([]) }
            #expect(none.isEmpty)
        }
    }
}
