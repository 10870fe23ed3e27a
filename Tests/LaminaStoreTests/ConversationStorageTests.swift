import Foundation
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

@Suite struct ConversationStorageTests {
    let alice: UserID = "alice"
    let bob: UserID = "bob"
    let carol: UserID = "carol"

    @Test(arguments: StoreBackend.allCases) func distinctCreationResolvesToTheExistingConversation(
        _ backend: StoreBackend
    ) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let first = try conversation(alice, [bob])
            let created = try await store.write { tx in try tx.createConversation(first, hlc: hlc(1), origin: nodeA) }
            #expect(created.created)
            #expect(created.conversation.conversation.participants == [alice, bob])

            // Bob creates "the same" distinct conversation with another id: he gets Alice's.
            let again = try conversation(bob, [alice])
            let resolved = try await store.write { tx in try tx.createConversation(again, hlc: hlc(2), origin: nodeA) }
            #expect(!resolved.created)
            #expect(resolved.conversation.conversation.id == first.id)

            // A non-distinct one with the same participants is a new conversation.
            let topic = try conversation(alice, [bob], distinct: false)
            let topicCreated = try await store.write { tx in
                try tx.createConversation(topic, hlc: hlc(3), origin: nodeA)
            }
            #expect(topicCreated.created)

            // A retry with the same id resolves to itself.
            let retry = try await store.write { tx in try tx.createConversation(topic, hlc: hlc(4), origin: nodeA) }
            #expect(!retry.created && retry.conversation.conversation.id == topic.id)

            let lookup = try await store.read { r in try r.distinctConversation(participants: [alice, bob]) }
            #expect(lookup?.conversation.id == first.id)
            #expect(try await store.read { r in try r.distinctConversation(participants: [alice, carol]) } == nil)
            #expect(
                try await store.read { r in try r.conversations(of: alice) }.map(\.conversation.id) == [
                    first.id, topic.id,
                ])
        }
    }

    @Test(arguments: StoreBackend.allCases) func changingParticipantsMakesADistinctConversationNonDistinct(
        _ backend: StoreBackend
    ) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let pair = try conversation(alice, [bob])
            let trio = try conversation(alice, [bob, carol])
            try await store.write { tx in
                _ = try tx.createConversation(pair, hlc: hlc(1), origin: nodeA)
                _ = try tx.createConversation(trio, hlc: hlc(2), origin: nodeA)
            }
            let changed = try await store.write { tx in
                try tx.applyMembership(.add, user: carol, conversation: pair.id, actor: bob, hlc: hlc(3), origin: nodeA)
            }
            #expect(changed)
            let stored = try #require(try await store.read { r in try r.conversation(pair.id) })
            #expect(!stored.conversation.isDistinct)
            #expect(stored.conversation.participants == [alice, bob, carol])
            // The distinct trio is still the one found for that set.
            #expect(
                try await store.read { r in try r.distinctConversation(participants: [alice, bob, carol]) }?
                    .conversation.id == trio.id)
        }
    }

    @Test(arguments: StoreBackend.allCases) func membershipIsDecidedByTheGreatestHLCWhateverTheArrivalOrder(
        _ backend: StoreBackend
    ) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let c = try conversation(alice, [bob], distinct: false)
            try await store.write { tx in _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA) }
            // Remove at 10 arrives after a re-add at 20: carol stays... and the older removal is ignored.
            try await store.write { tx in
                try tx.applyMembership(.add, user: carol, conversation: c.id, actor: alice, hlc: hlc(5), origin: nodeA)
                try tx.applyMembership(.add, user: carol, conversation: c.id, actor: alice, hlc: hlc(20), origin: nodeB)
                let late = try tx.applyMembership(
                    .remove, user: carol, conversation: c.id, actor: bob, hlc: hlc(10), origin: nodeA)
                #expect(!late)
                // A replayed operation changes nothing.
                let replay = try tx.applyMembership(
                    .add, user: carol, conversation: c.id, actor: alice, hlc: hlc(20), origin: nodeB)
                #expect(!replay)
            }
            let state = try await store.read { r in try r.participantState(of: carol, in: c.id) }
            #expect(state == ParticipantState(isMember: true, since: hlc(20)))
            #expect(try await store.read { r in try r.membershipLog(of: c.id) }.count == 2 + 3)
        }
    }

    @Test(arguments: StoreBackend.allCases) func aRemovedParticipantSeesOnlyWhatCameBeforeTheRemoval(
        _ backend: StoreBackend
    ) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let c = try conversation(alice, [bob, carol], distinct: false)
            try await store.write { tx in
                _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
                try tx.appendMessage(
                    try textMessage("before", in: c.id, from: alice, at: hlc(10)), hlc: hlc(10), origin: nodeA)
                try tx.applyMembership(
                    .remove, user: carol, conversation: c.id, actor: bob, hlc: hlc(15), origin: nodeA)
                try tx.appendMessage(
                    try textMessage("after", in: c.id, from: alice, at: hlc(20)), hlc: hlc(20), origin: nodeA)
            }
            let carolSees = try await store.read { r in
                try r.history(of: c.id, for: carol, .complete(after: nil, limit: 100))
            }
            #expect(carolSees.map { $0.parts[0].inlineBytes! } == [Array("before".utf8)])
            let bobSees = try await store.read { r in
                try r.history(of: c.id, for: bob, .complete(after: nil, limit: 100))
            }
            #expect(bobSees.count == 2)
            #expect(try await store.read { r in try r.participants(of: c.id) } == [alice, bob])
            #expect(try await store.read { r in try r.conversations(of: carol) }.isEmpty)
            let stranger = await storageErrorCode {
                _ = try await store.read { r in try r.history(of: c.id, for: "mallory", .last(10)) }
            }
            #expect(stranger == .notAParticipant)
            // A newly added participant sees everything before.
            _ = try await store.write { tx in
                try tx.applyMembership(.add, user: "dave", conversation: c.id, actor: bob, hlc: hlc(30), origin: nodeA)
            }
            #expect(
                try await store.read { r in try r.history(of: c.id, for: "dave", .complete(after: nil, limit: 100)) }
                    .count == 2)
        }
    }

    @Test(arguments: StoreBackend.allCases) func retiringADistinctConversationMovesItsContentToTheSurvivor(
        _ backend: StoreBackend
    ) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let survivor = try conversation(alice, [bob], distinct: false)
            let retired = try conversation(bob, [alice], distinct: false, metadata: ["title": .string("from bob")])
            try await store.write { tx in
                _ = try tx.createConversation(survivor, hlc: hlc(1), origin: nodeA)
                _ = try tx.createConversation(retired, hlc: hlc(2), origin: nodeB)
                try tx.appendMessage(
                    try textMessage("a", in: survivor.id, from: alice, at: hlc(10)), hlc: hlc(10), origin: nodeA)
                try tx.appendMessage(
                    try textMessage("b", in: retired.id, from: bob, at: hlc(11, 0, nodeB)), hlc: hlc(11, 0, nodeB),
                    origin: nodeB)
                try tx.retireConversation(retired.id, mergedInto: survivor.id)
            }
            let history = try await store.read { r in
                try r.history(of: survivor.id, for: alice, .complete(after: nil, limit: 10))
            }
            #expect(history.map(\.sender) == [alice, bob])
            #expect(history.allSatisfy { $0.conversationID == survivor.id })
            let old = try #require(try await store.read { r in try r.conversation(retired.id) })
            #expect(old.mergedInto == survivor.id && !old.isLive)
            #expect(try await store.read { r in try r.metadata(of: survivor.id) } == ["title": .string("from bob")])
            let write = await storageErrorCode {
                try await store.write { tx in
                    _ = try tx.appendMessage(
                        try textMessage("late", in: retired.id, from: bob, at: hlc(50)), hlc: hlc(50), origin: nodeA)
                }
            }
            #expect(write == .conversationRetired)
        }
    }

    @Test(arguments: StoreBackend.allCases, [true, false])
    func aConcurrentDistinctConversationFromAPeerIsMergedEitherWay(_ backend: StoreBackend, incomingWins: Bool)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let local = try conversation(alice, [bob])
            let incoming = try conversation(bob, [alice], metadata: ["from": .string("peer")])
            let survivor = incomingWins ? incoming.id : local.id
            let loser = incomingWins ? local.id : incoming.id
            try await store.write { tx in
                _ = try tx.createConversation(local, hlc: hlc(1), origin: nodeA)
                try tx.appendMessage(
                    try textMessage("local", in: local.id, from: alice, at: hlc(5)), hlc: hlc(5), origin: nodeA)
            }
            // The earlier creation survives (LaminaMerge's rule); the other survivor is refused.
            let incomingHLC = incomingWins ? hlc(0, 1, nodeB) : hlc(2, 0, nodeB)
            #expect(
                await storageErrorCode {
                    _ = try await store.write { tx in
                        try tx.insertConcurrentDistinct(incoming, hlc: incomingHLC, origin: nodeB, survivor: loser)
                    }
                } == .invalidArgument)
            let merged = try await store.write { tx in
                try tx.insertConcurrentDistinct(incoming, hlc: incomingHLC, origin: nodeB, survivor: survivor)
            }
            #expect(merged.conversation.id == survivor)
            #expect(merged.isLive && merged.conversation.isDistinct)
            #expect(merged.conversation.metadata == ["from": .string("peer")])
            #expect(try await store.read { r in try r.conversation(loser) }?.mergedInto == survivor)
            #expect(
                try await store.read { r in try r.distinctConversation(participants: [alice, bob]) }?.conversation.id
                    == survivor)
            #expect(try await store.read { r in try r.history(of: survivor, for: bob, .last(10)) }.count == 1)
            #expect(try await store.read { r in try r.conversations(of: alice) }.map(\.conversation.id) == [survivor])
            let stranger = try conversation(alice, [carol])
            #expect(
                await storageErrorCode {
                    _ = try await store.write { tx in
                        try tx.insertConcurrentDistinct(stranger, hlc: hlc(3), origin: nodeB, survivor: stranger.id)
                    }
                } == .notFound)
        }
    }

    @Test(arguments: StoreBackend.allCases) func metadataIsLastWriterWinsPerKeyInAnyArrivalOrder(
        _ backend: StoreBackend
    ) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let title = try MetadataKeyPath(parsing: "title")
            let color = try MetadataKeyPath(parsing: "style.color")
            let style = try MetadataKeyPath(parsing: "style")
            let writes: [(MetadataValue?, MetadataKeyPath, HLCTimestamp)] = [
                (.string("one"), title, hlc(10)),
                (.string("two"), title, hlc(10, 1, nodeB)),
                (nil, title, hlc(9)),
                (.string("red"), color, hlc(12)),
                (nil, style, hlc(11)),
            ]
            var results: [Metadata] = []
            var permutations: [[Int]] = [[]]
            for i in 0..<writes.count {
                permutations = permutations.flatMap { p in
                    (0...p.count).map {
                        var q = p
                        q.insert(i, at: $0)
                        return q
                    }
                }
            }
            #expect(permutations.count == 120)
            for order in permutations {
                let c = try conversation(alice, [bob], distinct: false)
                let metadata = try await store.write { tx in
                    _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
                    for i in order {
                        let (value, path, time) = writes[i]
                        _ = try tx.setMetadata(value, at: path, in: c.id, hlc: time, origin: time.node)
                    }
                    return try tx.read.metadata(of: c.id)
                }
                results.append(metadata)
            }
            let expected: Metadata = ["title": .string("two"), "style": .dictionary(["color": .string("red")])]
            #expect(results.allSatisfy { $0 == expected })
            // An older write loses and says so.
            let c = try conversation(alice, [carol], distinct: false)
            let (newer, older) = try await store.write { tx in
                _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
                let newer = try tx.setMetadata(.string("new"), at: title, in: c.id, hlc: hlc(5), origin: nodeA)
                let older = try tx.setMetadata(.string("old"), at: title, in: c.id, hlc: hlc(4), origin: nodeA)
                return (newer, older)
            }
            #expect(newer && !older)
        }
    }

    @Test(arguments: StoreBackend.allCases) func metadataOverTheModelLimitIsRefusedAndRolledBack(
        _ backend: StoreBackend
    ) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let c = try conversation(alice, [bob], distinct: false)
            try await store.write { tx in _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA) }
            let big = String(repeating: "x", count: Limits.maxMetadataValueBytes)
            let code = await storageErrorCode {
                try await store.write { tx in
                    for i in 0..<10 {
                        _ = try tx.setMetadata(
                            .string(big), at: try MetadataKeyPath(["k\(i)"]), in: c.id, hlc: hlc(UInt64(10 + i)),
                            origin: nodeA)
                    }
                }
            }
            #expect(code == .invalidArgument)
            #expect(try await store.read { r in try r.metadataEntries(of: c.id) }.isEmpty)
        }
    }
}
