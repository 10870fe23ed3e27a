import Foundation
import LaminaMerge
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

/// The store's thread index against LaminaMerge (issue 38 item 3): replies appended and
/// deleted for everyone in random orders, on both backends; the summary the store reports is
/// `ThreadSummary` over the same replies and deletions, the thread's history is the live
/// replies in position order a page at a time, and a message that is no reply is in no thread.
@Suite struct ThreadStorageTests {
    let alice: UserID = "alice"
    let bob: UserID = "bob"

    @Test(arguments: StoreBackend.allCases) func summariesAndPagesAgreeWithThreadSummary(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let c = try conversation(alice, [bob])
            let root = try textMessage("root", in: c.id, from: alice, at: hlc(100))
            let other = try textMessage("not in the thread", in: c.id, from: bob, at: hlc(101))
            try await store.write { tx in
                _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
                try tx.appendMessage(root, hlc: hlc(100), origin: nodeA)
                try tx.appendMessage(other, hlc: hlc(101), origin: nodeA)
            }
            var generator = Seeded(state: 0x7E4D_5EED)
            var model = ThreadSummary()
            var replies: [Message] = []
            var deleted = Set<MessageID>()
            for round in 0..<6 {
                // A few replies, positioned out of order among the existing ones.
                var batch: [Message] = []
                for i in 0..<5 {
                    var reply = try textMessage(
                        "r\(round)-\(i)", in: c.id, from: i % 2 == 0 ? bob : alice,
                        at: hlc(UInt64(200 + Int.random(in: 0..<10_000, using: &generator))))
                    reply.replyTo = root.id
                    guard !replies.contains(where: { $0.position == reply.position }),
                        !batch.contains(where: { $0.position == reply.position })
                    else { continue }
                    batch.append(reply)
                }
                let toAppend = batch
                try await store.write { tx in
                    for reply in toAppend { try tx.appendMessage(reply, hlc: reply.position!, origin: nodeA) }
                }
                for reply in batch { model.apply(.replied(reply.id, at: reply.position!)) }
                replies += batch
                // Delete one live reply for everyone now and then.
                if let victim = replies.filter({ !deleted.contains($0.id) }).randomElement(using: &generator),
                    round % 2 == 1
                {
                    try await store.write { tx in try tx.deleteMessage(victim.id) }
                    deleted.insert(victim.id)
                    model.apply(.deleted(victim.id))
                }
                let summary = try await store.read { r in try r.threadSummary(of: root.id) }
                #expect(summary?.replyCount == UInt64(model.replyCount))
                #expect(summary?.lastReply == model.lastReply?.id)
                #expect(summary?.lastReplyAt == model.lastReply?.at)
            }
            // History of the thread: live replies in position order, in pages of 4.
            let expected = replies.filter { !deleted.contains($0.id) }.sorted { $0.position! < $1.position! }.map(\.id)
            var paged: [MessageID] = []
            var after: MessagePosition?
            while true {
                let start = after
                let page = try await store.read { r in
                    try r.threadHistory(root: root.id, in: c.id, for: bob, after: start, limit: 4)
                }
                paged += page.map(\.id)
                #expect(page.allSatisfy { $0.replyTo == root.id })
                guard page.count == 4, let last = page.last?.position else { break }
                after = last
            }
            #expect(paged == expected)
            // Summaries attach to roots only; the other message and the replies get none.
            let sample = [root, other] + replies.prefix(2)
            let withSummaries = try await store.read { r in try r.withThreadSummaries(sample) }
            #expect(withSummaries[0].thread?.replyCount == UInt64(model.replyCount))
            #expect(withSummaries.dropFirst().allSatisfy { $0.thread == nil })
        }
    }
}

/// A fixed-seed generator (SplitMix64), so every run appends and deletes the same replies.
private struct Seeded: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
