import Foundation
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

/// Issue 16 item 3: what a `conversation-updated` costs the node as a conversation grows
/// (SPEC §6.4: three index range reads per recipient). Measures `counts(of:for:)` after a
/// mark-all-read (the reader: nothing after the marker) and for a participant who read nothing
/// (a new participant after ADD_PARTICIPANTS: every message is after the marker, with some read
/// one by one), at two sizes,
/// and checks the counts. The times are printed for the issue; the assertions are the counts.
@Suite struct CountsCostTests {
    @Test(arguments: StoreBackend.allCases) func countsCostAtTwoConversationSizes(backend: StoreBackend) async throws {
        for size in [1_000, 20_000] {
            try await withTemporaryStore(backend: backend) { store, _ in
                let c = try conversation("alice", ["bob", "carol"], distinct: false)
                try await store.write { tx in _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA) }
                var last = hlc(1)
                // Bob read three of carol's messages one by one and got two more (delivered): those
                // three are not unread for him, the delivered ones are.
                let ids = (0..<size).map { _ in MessageID.random() }
                try await store.write { tx in
                    for i in 0..<size {
                        let position = hlc(UInt64(10 + i))
                        _ = try tx.appendMessage(
                            try textMessage(
                                "m\(i)", in: c.id, from: i % 2 == 0 ? "bob" : "carol", at: position, id: ids[i]),
                            hlc: position, origin: nodeA)
                    }
                    for i in [1, 3, 5] { _ = try tx.recordStatus(.read, of: ids[i], for: "bob") }
                    for i in [7, 9] { _ = try tx.recordStatus(.delivered, of: ids[i], for: "bob") }
                }
                last = hlc(UInt64(10 + size - 1))
                let end = last
                try await store.write { tx in _ = try tx.raise(.read, to: end, user: "alice", conversation: c.id) }
                let rounds = 5
                var readerNanos: UInt64 = 0
                var freshNanos: UInt64 = 0
                for _ in 0..<rounds {
                    let t0 = DispatchTime.now().uptimeNanoseconds
                    let reader = try await store.read { r in try r.counts(of: c.id, for: "alice") }
                    let t1 = DispatchTime.now().uptimeNanoseconds
                    let fresh = try await store.read { r in try r.counts(of: c.id, for: "bob") }
                    let t2 = DispatchTime.now().uptimeNanoseconds
                    readerNanos += t1 - t0
                    freshNanos += t2 - t1
                    #expect(reader.messages == size && reader.unread == 0)
                    #expect(fresh.messages == size && fresh.unread == size / 2 - 3)
                }
                print(
                    String(
                        format:
                            "counts cost (\(backend)): %d messages: after mark-all-read %.2f ms, nothing read %.2f ms (debug build, mean of %d)",
                        size, Double(readerNanos) / Double(rounds) / 1e6, Double(freshNanos) / Double(rounds) / 1e6,
                        rounds))
            }
        }
    }
}
