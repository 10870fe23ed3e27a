import Foundation
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

/// Issue 16: the node's counts come from stored counters (`StoredCounts`), kept in the
/// transaction of each change. Checks them against the counts read from the messages
/// (`countsByScan`) after every kind of change, on both backends, and that what a membership
/// change costs (SQLite VM steps, PostgreSQL rows read) does not grow with the conversation.
@Suite struct StoredCountsTests {
    /// Each user's stored counts equal the scanned ones (each with their own block list).
    func expectExact(_ store: NodeStore, _ c: ConversationID, _ users: [UserID], _ step: String) async throws {
        let pairs = try await store.read { r in
            try users.map { u in
                let blocked = Set(try r.blocks(of: u))
                return (
                    try r.counts(of: c, for: u, blocked: blocked), try r.countsByScan(of: c, for: u, blocked: blocked)
                )
            }
        }
        for (i, (stored, scanned)) in pairs.enumerated() {
            #expect(stored == scanned, "\(step): \(users[i]) stored \(stored) scanned \(scanned)")
        }
    }

    @Test(arguments: StoreBackend.allCases) func countsStayExactAcrossChanges(backend: StoreBackend) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let users: [UserID] = ["alice", "bob", "carol", "dave"]
            let c = try conversation("alice", ["bob", "carol"], distinct: false)
            try await store.write { tx in _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA) }
            let senders: [UserID] = ["alice", "bob", "carol"]
            let ids = (0..<30).map { _ in MessageID.random() }
            try await store.write { tx in
                for i in 0..<30 {
                    _ = try tx.appendMessage(
                        try textMessage("m\(i)", in: c.id, from: senders[i % 3], at: hlc(UInt64(10 + i)), id: ids[i]),
                        hlc: hlc(UInt64(10 + i)), origin: nodeA)
                }
            }
            try await expectExact(store, c.id, users, "sends")
            let before = try await store.read { r in try r.counts(of: c.id, for: "bob") }
            #expect(before.messages == 30 && before.unread == 20)

            // Reads one by one (carol's 2 and 5), a delivery, a range read.
            try await store.write { tx in
                _ = try tx.recordStatus(.read, of: ids[2], for: "bob")
                _ = try tx.recordStatus(.read, of: ids[5], for: "bob")
                _ = try tx.recordStatus(.read, of: ids[5], for: "bob")
                _ = try tx.recordStatus(.delivered, of: ids[8], for: "bob")
                _ = try tx.recordStatus(.read, of: ids[1], for: "bob")  // his own
            }
            try await expectExact(store, c.id, users, "reads")
            #expect(try await store.read { r in try r.counts(of: c.id, for: "bob") }.unread == 18)
            try await store.write { tx in _ = try tx.raise(.read, to: hlc(20), user: "alice", conversation: c.id) }
            try await store.write { tx in _ = try tx.raise(.delivered, to: hlc(25), user: "carol", conversation: c.id) }
            try await expectExact(store, c.id, users, "range read")

            // Deletions for everyone (one twice), of a read and of an unread message.
            try await store.write { tx in
                try tx.deleteMessage(ids[14])
                try tx.deleteMessage(ids[14])
                try tx.deleteMessage(ids[5])
            }
            try await expectExact(store, c.id, users, "deletions")
            #expect(try await store.read { r in try r.counts(of: c.id, for: "bob") }.messages == 28)

            // Membership: a new participant, a removal, messages while away, the return.
            try await store.write { tx in
                _ = try tx.applyMembership(
                    .add, user: "dave", conversation: c.id, actor: "alice", hlc: hlc(100), origin: nodeA)
            }
            try await expectExact(store, c.id, users, "add")
            #expect(
                try await store.read { r in try r.counts(of: c.id, for: "dave") }
                    == ConversationCounts(messages: 28, unread: 28, lastMessage: ids[29]))
            try await store.write { tx in
                _ = try tx.applyMembership(
                    .remove, user: "carol", conversation: c.id, actor: "alice", hlc: hlc(101), origin: nodeA)
            }
            try await expectExact(store, c.id, users, "remove")
            let late = (0..<4).map { _ in MessageID.random() }
            try await store.write { tx in
                for (i, id) in late.enumerated() {
                    let at = hlc(UInt64(200 + i))
                    _ = try tx.appendMessage(
                        try textMessage("late\(i)", in: c.id, from: i % 2 == 0 ? "alice" : "dave", at: at, id: id),
                        hlc: at, origin: nodeA)
                }
            }
            try await expectExact(store, c.id, users, "sends while removed")
            #expect(try await store.read { r in try r.counts(of: c.id, for: "carol") }.messages == 28)
            try await store.write { tx in
                _ = try tx.applyMembership(
                    .add, user: "carol", conversation: c.id, actor: "alice", hlc: hlc(300), origin: nodeA)
            }
            try await expectExact(store, c.id, users, "back")
            #expect(try await store.read { r in try r.counts(of: c.id, for: "carol") }.messages == 32)

            // Blocks: bob blocks carol, then not.
            try await store.write { tx in _ = try tx.block("carol", by: "bob", at: .now()) }
            try await expectExact(store, c.id, users, "block")
            #expect(
                try await store.read { r in try r.counts(of: c.id, for: "bob", blocked: ["carol"]) }.messages == 32 - 8)
            // Messages stored under the block and under a read marker: carol's new one, and one
            // replicated from the past (below alice's read marker at 20, read by dave).
            let unreadBefore = try await store.read { r in try users.map { try r.counts(of: c.id, for: $0).unread } }
            try await store.write { tx in
                _ = try tx.appendMessage(
                    try textMessage("blocked", in: c.id, from: "carol", at: hlc(400), id: .random()),
                    hlc: hlc(400), origin: nodeA)
                var past = try textMessage("past", in: c.id, from: "carol", at: hlc(15, 1, nodeB), id: .random())
                past.recipientStatus["dave"] = .read
                _ = try tx.appendMessage(past, hlc: hlc(401), origin: nodeB)
            }
            try await expectExact(store, c.id, users, "stored under a block and a read marker")
            let unreadAfter = try await store.read { r in try users.map { try r.counts(of: c.id, for: $0).unread } }
            // The new one: unread for alice and dave. The past one: read for alice by her marker, for
            // dave by his status. Bob blocks carol; carol sent both.
            #expect(unreadAfter == zip(unreadBefore, [1, 0, 0, 1]).map { $0 + $1 })
            try await store.write { tx in _ = try tx.unblock("carol", by: "bob") }
            try await expectExact(store, c.id, users, "unblock")

            // A range deletion, then the migration's fill over what is stored gives the same counters.
            try await store.write { tx in _ = try tx.deleteMessages(of: c.id, before: hlc(16)) }
            try await expectExact(store, c.id, users, "range deletion")
            let kept = try await store.read { r in try users.map { try r.counts(of: c.id, for: $0) } }
            try await store.write { tx in for statement in StoredCounts.fill { try tx.db.run(statement) } }
            #expect(try await store.read { r in try users.map { try r.counts(of: c.id, for: $0) } } == kept)
        }
    }

    /// A membership change and the counts it sends every participant (`emitCounts`) cost the
    /// same at 1,000 and at 10,000 messages; counting by scan, for contrast, grows tenfold.
    @Test(arguments: StoreBackend.allCases) func membershipChangeCostDoesNotGrowWithTheConversation(
        backend: StoreBackend
    ) async throws {
        var stored: [Int64] = []
        var scanned: [Int64] = []
        for size in [1_000, 10_000] {
            try await withTemporaryStore(backend: backend) { store, _ in
                let c = try conversation("alice", ["bob", "carol"], distinct: false)
                try await store.write { tx in _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA) }
                try await store.write { tx in
                    for i in 0..<size {
                        let at = hlc(UInt64(10 + i))
                        _ = try tx.appendMessage(
                            try textMessage("m\(i)", in: c.id, from: i % 2 == 0 ? "bob" : "carol", at: at), hlc: at,
                            origin: nodeA)
                    }
                    _ = try tx.raise(.read, to: hlc(UInt64(10 + size / 2)), user: "alice", conversation: c.id)
                }
                // PostgreSQL plans by its statistics: without them a fresh table of a few thousand
                // rows is read whole rather than through an index.
                if backend == .postgres { try await store.write { tx in try tx.db.run("ANALYZE") } }
                let at = hlc(UInt64(10 + size + 1))
                let (change, scan) = try await store.write { tx in
                    var after: [UserID] = []
                    let change = try tx.db.measuringWork { () throws(StorageError) in
                        _ = try tx.applyMembership(
                            .add, user: "dave", conversation: c.id, actor: "alice", hlc: at, origin: nodeA)
                        after = try tx.read.participants(of: c.id).sorted()
                        for u in after { _ = try tx.read.counts(of: c.id, for: u) }
                    }
                    let scan = try tx.db.measuringWork { () throws(StorageError) in
                        for u in after { _ = try tx.read.countsByScan(of: c.id, for: u) }
                    }
                    #expect(
                        try tx.read.counts(of: c.id, for: "dave") == (try tx.read.countsByScan(of: c.id, for: "dave")))
                    return (change, scan)
                }
                stored.append(change)
                scanned.append(scan)
                print(
                    "membership change cost (\(backend)): \(size) messages: \(change) with stored counters, \(scan) counting by scan"
                )
            }
        }
        #expect(stored[1] <= stored[0] + stored[0] / 4, "stored counters: \(stored)")
        #expect(scanned[1] >= scanned[0] * 5, "the meter sees a scan grow: \(scanned)")
    }
}
