import Foundation
import LaminaModel
import Testing

@testable import LaminaClient

/// Applies changes the way a list view does: remove deletes and moved-from rows, then
/// insert inserted and moved-to rows at their new indices, ascending.
func applyChanges<T>(_ changes: QueryChanges, old: [T], new: [T]) -> [T] {
    let removed = Set(changes.deletes).union(changes.moves.map(\.from))
    var result = old.enumerated().filter { !removed.contains($0.offset) }.map(\.element)
    var placements: [(Int, T)] = changes.inserts.map { ($0, new[$0]) }
    placements += changes.moves.map { ($0.to, old[$0.from]) }
    for (index, element) in placements.sorted(by: { $0.0 < $1.0 }) { result.insert(element, at: index) }
    return result
}

/// A small deterministic generator (SplitMix64) for reproducible random cases.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite struct QueryDiffTests {
    @Test func insertsDeletesAndUpdates() {
        let changes = QueryDiff.diff(old: ["a", "b", "c"], new: ["x", "a", "c", "y"], changed: ["c"])
        #expect(changes.deletes == [1])
        #expect(changes.inserts == [0, 3])
        #expect(changes.moves.isEmpty)
        #expect(changes.updates == [2])
    }

    @Test func aRotationIsOneMove() {
        let changes = QueryDiff.diff(old: ["a", "b", "c", "d"], new: ["d", "a", "b", "c"])
        #expect(changes.moves == [QueryChanges.Move(from: 3, to: 0)])
        #expect(changes.inserts.isEmpty && changes.deletes.isEmpty)
        let swap = QueryDiff.diff(old: ["a", "b"], new: ["b", "a"])
        #expect(swap.moves.count == 1)
        #expect(applyChanges(swap, old: ["a", "b"], new: ["b", "a"]) == ["b", "a"])
        #expect(QueryDiff.diff(old: ["a", "b"], new: ["a", "b"]).isEmpty)
    }

    @Test func randomListsReconstructWithTheFewestMoves() {
        var rng = SplitMix64(state: 0x1A_2B_3C)
        for _ in 0..<300 {
            let old = Array(0..<Int.random(in: 0...40, using: &rng)).shuffled(using: &rng)
            var new = old.filter { _ in Int.random(in: 0..<4, using: &rng) != 0 }
            new += (100..<(100 + Int.random(in: 0...8, using: &rng)))
            new.shuffle(using: &rng)
            let changed = Set(new.filter { _ in Bool.random(using: &rng) })
            let changes = QueryDiff.diff(old: old, new: new, changed: changed)
            #expect(applyChanges(changes, old: old, new: new) == new)
            // Minimal: kept objects minus the longest run already in order.
            let keptNewIndices = old.compactMap { new.firstIndex(of: $0) }
            #expect(changes.moves.count == keptNewIndices.count - Self.lisLength(keptNewIndices))
            #expect(Set(changes.updates.map { new[$0] }) == changed.intersection(old))
        }
    }

    /// Quadratic reference implementation.
    static func lisLength(_ values: [Int]) -> Int {
        var best = [Int](repeating: 1, count: values.count)
        for i in values.indices { for j in 0..<i where values[j] < values[i] { best[i] = max(best[i], best[j] + 1) } }
        return best.max() ?? 0
    }
}

@Suite struct QueryControllerTests {
    @Test func reportsInsertsDeletesMovesAndUpdates() async throws {
        try await withStore { store in
            let c1 = try conversation([alice, bob])
            let c2 = try conversation([alice, carol])
            let a = try remoteMessage(in: c1.id, at: 100)
            let b = try remoteMessage(in: c2.id, from: carol, at: 200)
            try store.apply([
                .conversation(c1), .conversation(c2), .message(a, receivedAt: received),
                .message(b, receivedAt: received),
            ])

            // Conversations, most recent activity first.
            let byActivity = Query<StoredConversation>(sortDescriptors: [
                QuerySortDescriptor("lastMessage.position", ascending: false)
            ])
            let conversations = try QueryController(store: store, query: byActivity)
            #expect(try conversations.start().map(\.id) == [c2.id, c1.id])
            var convUpdates = conversations.updates.makeAsyncIterator()

            // Messages of c1 in position order.
            let inC1 = Query<StoredMessage>(
                predicate: .compare("conversation", .equalTo, .conversation(c1.id)),
                sortDescriptors: [QuerySortDescriptor("position")])
            let messages = try QueryController(store: store, query: inC1)
            #expect(try messages.start().map(\.id) == [a.id])
            var msgUpdates = messages.updates.makeAsyncIterator()

            // Insert: a newer message in c1, which also moves c1 to the top.
            let c = try remoteMessage(in: c1.id, at: 300)
            try store.apply([.message(c, receivedAt: received)])
            var m = try await nextUpdate(&msgUpdates)
            #expect(m.changes.inserts == [1])
            #expect(m.objects.map(\.id) == [a.id, c.id])
            let conv = try await nextUpdate(&convUpdates)
            #expect(conv.changes.moves.count == 1)
            #expect(conv.objects.map(\.id) == [c1.id, c2.id])
            #expect(conv.changes.updates.contains(0))  // c1 changed too (last message, counts)

            // Insert at the front: an older message arriving late.
            let early = try remoteMessage(in: c1.id, at: 50)
            try store.apply([.message(early, receivedAt: received)])
            m = try await nextUpdate(&msgUpdates)
            #expect(m.changes.inserts == [0])

            // Update: reading a message.
            try store.markRead([a.id])
            m = try await nextUpdate(&msgUpdates)
            #expect(m.changes.updates == [1])
            #expect(m.changes.inserts.isEmpty && m.changes.deletes.isEmpty && m.changes.moves.isEmpty)
            #expect(m.objects[1].isUnread == false)

            // Delete.
            try store.apply([.messageDeleted(early.id)])
            m = try await nextUpdate(&msgUpdates)
            #expect(m.changes.deletes == [0])
            #expect(messages.objects.map(\.id) == [a.id, c.id])

            // A change outside the query reports nothing to the messages controller; the next
            // update it reports is the one after it.
            try store.apply([.message(try remoteMessage(in: c2.id, from: carol, at: 400), receivedAt: received)])
            try store.apply([.messageDeleted(c.id)])
            m = try await nextUpdate(&msgUpdates)
            #expect(m.changes.deletes == [1])
            messages.stop()
            conversations.stop()
        }
    }
}

/// The next update from a controller, or a failure after a timeout.
func nextUpdate<O>(_ iterator: inout AsyncThrowingStream<QueryUpdate<O>, any Error>.Iterator) async throws
    -> QueryUpdate<O>
{
    let box = UnsafeIteratorBox(iterator)
    let update = try await withThrowingTaskGroup(of: QueryUpdate<O>?.self) { group in
        group.addTask { try await box.next() }
        group.addTask {
            try await Task.sleep(for: .seconds(5))
            throw ClientError(.timedOut, "no query update arrived")
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
    iterator = box.iterator
    return try #require(update)
}

/// Lets a task group child drive an iterator the caller owns between calls.
final class UnsafeIteratorBox<O: QueryableObject>: @unchecked Sendable {
    var iterator: AsyncThrowingStream<QueryUpdate<O>, any Error>.Iterator
    init(_ iterator: AsyncThrowingStream<QueryUpdate<O>, any Error>.Iterator) { self.iterator = iterator }
    func next() async throws -> QueryUpdate<O>? { try await iterator.next() }
}
