import Foundation
import LaminaMerge
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

/// SQLite's full-text index written behind the messages (`SearchBacklog`): a message waits,
/// the writer indexes a batch once enough wait, a search never misses a committed message,
/// and edits, deletions and a restart while messages wait leave the index exact.
@Suite struct SearchBacklogTests {
    let alice: UserID = "alice"
    let bob: UserID = "bob"

    func search(_ store: NodeStore, _ text: String, for user: UserID) async throws -> [String] {
        let query = NodeMessageSearch(try MessageSearchTerms(text))
        return try await store.searchRead { r in try r.searchMessages(query, for: user) }.map(
            MessageSearchStorageTests.text)
    }

    /// Entries in the FTS5 table, read without indexing what waits.
    func indexed(_ store: NodeStore) async throws -> Int {
        try await store.read { r in Int(try r.db.int64("SELECT count(*) FROM message_search", []) ?? 0) }
    }

    /// A day: no batch comes about by age during a test (the count and searches bring them).
    static func waitingLong(messages: Int = 256) -> StorageConfiguration {
        var configuration = StorageConfiguration()
        configuration.searchBacklogMessages = messages
        configuration.searchBacklogMilliseconds = 86_400_000
        return configuration
    }

    func mark(_ store: NodeStore) async throws -> Int64 {
        try await store.read { r in try r.db.int64("SELECT indexed_through FROM search_backlog", []) ?? -1 }
    }

    @Test func aMessageWaitsAndASearchIndexesItFirst() async throws {
        try await withTemporaryStore(Self.waitingLong(), backend: .sqlite) { store, _ in
            try await MessageSearchStorageTests.oneMessage("plum jam", from: alice, in: store)
            #expect(try await indexed(store) == 0)
            #expect(store.searchBacklog.isPending)
            #expect(try await search(store, "plum", for: bob) == ["plum jam"])
            #expect(try await indexed(store) == 1)
            #expect(!store.searchBacklog.isPending)
            #expect(try await mark(store) == 1)
        }
    }

    @Test func theWriterIndexesABatchOnceEnoughWait() async throws {
        try await withTemporaryStore(Self.waitingLong(messages: 8), backend: .sqlite) { store, _ in
            let c = try conversation(alice, [bob])
            try await store.write { tx in _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA) }
            for i in 0..<7 {
                let m = try textMessage("pear \(i)", in: c.id, from: alice, at: hlc(100 + UInt64(i)))
                try await store.write { tx in try tx.appendMessage(m, hlc: m.position!, origin: nodeA) }
            }
            #expect(try await indexed(store) == 0, "one short of the batch")
            let last = try textMessage("pear last", in: c.id, from: alice, at: hlc(1_000))
            try await store.write { tx in try tx.appendMessage(last, hlc: last.position!, origin: nodeA) }
            #expect(try await indexed(store) == 8)
            #expect(try await mark(store) == 8)
            #expect(!store.searchBacklog.isPending)
        }
    }

    @Test func aBatchIsDueOnceTheOldestWaitedLongEnough() async throws {
        var configuration = Self.waitingLong()
        configuration.searchBacklogMilliseconds = 0
        try await withTemporaryStore(configuration, backend: .sqlite) { store, _ in
            try await MessageSearchStorageTests.oneMessage("fig", from: alice, in: store)
            #expect(try await indexed(store) == 1)
            #expect(!store.searchBacklog.isPending)
        }
    }

    /// Edited and deleted while waiting: the batch reads each message as it is then.
    @Test func changesToAWaitingMessageReachTheIndex() async throws {
        try await withTemporaryStore(Self.waitingLong(), backend: .sqlite) { store, _ in
            let c = try conversation(alice, [bob])
            let edited = try textMessage("melon old", in: c.id, from: alice, at: hlc(100))
            let deleted = try textMessage("melon gone", in: c.id, from: alice, at: hlc(110))
            let kept = try textMessage("melon kept", in: c.id, from: bob, at: hlc(120))
            let newParts = [try MessagePart(text: "melon new")]
            try await store.write { tx in
                _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
                for m in [edited, deleted, kept] { try tx.appendMessage(m, hlc: m.position!, origin: nodeA) }
            }
            try await store.write { tx in
                let edit = MessagePartsEdit.diff(from: edited.parts, to: newParts, at: hlc(500))
                _ = try tx.applyPartsEdit(of: edited.id, edit, origin: nodeA, by: alice)
                try tx.deleteMessage(deleted.id)
            }
            #expect(try await indexed(store) == 0)
            #expect(Set(try await search(store, "melon", for: alice)) == ["melon new", "melon kept"])
            #expect(try await search(store, "old", for: alice) == [])
            #expect(try await indexed(store) == 2)
            // Once indexed, an edit replaces the entry at once.
            try await store.write { tx in
                let edit = MessagePartsEdit.diff(from: newParts, to: [try MessagePart(text: "lime")], at: hlc(600))
                _ = try tx.applyPartsEdit(of: edited.id, edit, origin: nodeA, by: alice)
            }
            #expect(try await search(store, "lime", for: bob) == ["lime"])
        }
    }

    /// Messages still waiting when the node stops are indexed after it starts again.
    @Test func messagesWaitingAtARestartAreIndexedAfterIt() async throws {
        let (location, cleanup) = try temporaryStoreLocation(.sqlite)
        defer { cleanup() }
        var store = try NodeStore(location: location, configuration: Self.waitingLong())
        try await MessageSearchStorageTests.oneMessage("quince", from: bob, in: store)
        #expect(try await indexed(store) == 0)
        try store.close()
        store = try NodeStore(location: location)
        defer { try? store.close() }
        #expect(store.searchBacklog.isPending)
        #expect(try await search(store, "quince", for: alice) == ["quince"])
        #expect(!store.searchBacklog.isPending)
    }
}
