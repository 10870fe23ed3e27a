import Foundation
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

@Suite struct MessageStorageTests {
    let alice: UserID = "alice"
    let bob: UserID = "bob"

    func seeded(_ store: NodeStore, messages count: Int) async throws -> (ConversationID, [Message]) {
        let c = try conversation(alice, [bob])
        let messages = try (0..<count).map { i in
            try textMessage("m\(i)", in: c.id, from: i % 2 == 0 ? alice : bob, at: hlc(UInt64(100 + i)))
        }
        try await store.write { tx in
            _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
            for m in messages { try tx.appendMessage(m, hlc: m.position!, origin: nodeA) }
        }
        return (c.id, messages)
    }

    @Test(arguments: StoreBackend.allCases) func messagesRoundTripWithPartsPushAndStatus(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let c = try conversation(alice, [bob])
            let ref = ContentReference(id: .random(), size: 5_000_000, sha256: Array(repeating: 7, count: 32))
            let message = Message(
                conversationID: c.id, sender: alice,
                parts: [
                    try MessagePart(text: "hi"), MessagePart(mimeType: "image/png", content: .external(ref)),
                    try MessagePart(mimeType: "application/octet-stream", bytes: []),
                ],
                sentAt: Timestamp(millisecondsSince1970: 1_234), position: hlc(1_234, 2, nodeB),
                push: PushConfiguration(alert: "New", sound: "ding", data: ["k": "v"]),
                recipientStatus: [alice: .read, bob: .sent]
            )
            try await store.write { tx in
                _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
                try tx.appendMessage(message, hlc: hlc(1_234, 2, nodeB), origin: nodeB)
            }
            let stored = try #require(try await store.read { r in try r.message(message.id) })
            #expect(stored.message == message)
            #expect(stored.origin == nodeB && stored.hlc == hlc(1_234, 2, nodeB))
            var plain = message
            plain.push = nil
            plain.id = .random()
            plain.position = hlc(1_235)
            let second = plain
            try await store.write { tx in _ = try tx.appendMessage(second, hlc: hlc(1_235), origin: nodeA) }
            #expect(try await store.read { r in try r.message(second.id) }?.message == second)
        }
    }

    @Test(arguments: StoreBackend.allCases) func positionsAndIdsAreUnique(_ backend: StoreBackend) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let (c, messages) = try await seeded(store, messages: 2)
            let samePosition = try textMessage("clash", in: c, from: bob, at: messages[0].position!)
            #expect(
                await storageErrorCode {
                    try await store.write { tx in _ = try tx.appendMessage(samePosition, hlc: hlc(999), origin: nodeA) }
                } == .positionTaken)
            let sameID = try textMessage("again", in: c, from: bob, at: hlc(999), id: messages[1].id)
            #expect(
                await storageErrorCode {
                    try await store.write { tx in _ = try tx.appendMessage(sameID, hlc: hlc(999), origin: nodeA) }
                } == .alreadyExists)
            var draft = try textMessage("x", in: c, from: bob, at: hlc(1_000))
            draft.position = nil
            let unpositioned = draft
            #expect(
                await storageErrorCode {
                    try await store.write { tx in _ = try tx.appendMessage(unpositioned, hlc: hlc(1_000), origin: nodeA)
                    }
                } == .invalidArgument)
            let nowhere = try textMessage("x", in: .random(), from: bob, at: hlc(1_001))
            #expect(
                await storageErrorCode {
                    try await store.write { tx in _ = try tx.appendMessage(nowhere, hlc: hlc(1_001), origin: nodeA) }
                } == .notFound)
            #expect(try await store.read { r in try r.messageCount(of: c) } == 2)
        }
    }

    @Test(arguments: StoreBackend.allCases) func historyPolicies(_ backend: StoreBackend) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let (c, messages) = try await seeded(store, messages: 10)
            let complete = try await store.read { r in try r.history(of: c, for: bob, .complete(after: nil, limit: 100))
            }
            #expect(complete.map(\.id) == messages.map(\.id))
            let page = try await store.read { r in
                try r.history(of: c, for: bob, .complete(after: messages[3].position, limit: 4))
            }
            #expect(page.map(\.id) == messages[4..<8].map(\.id))
            let last = try await store.read { r in try r.history(of: c, for: bob, .last(3)) }
            #expect(last.map(\.id) == messages[7..<10].map(\.id))
            #expect(try await store.read { r in try r.history(of: c, for: bob, .unread(limit: 100)) }.count == 10)
            try await store.write { tx in _ = try tx.setReadUpTo(messages[5].position!, user: bob, conversation: c) }
            let unread = try await store.read { r in try r.history(of: c, for: bob, .unread(limit: 100)) }
            #expect(unread.map(\.id) == messages[6..<10].map(\.id))
            #expect(
                await storageErrorCode { _ = try await store.read { r in try r.history(of: c, for: bob, .last(0)) } }
                    == .invalidArgument)
            try await store.write { tx in try tx.deleteMessage(messages[9].id) }
            #expect(
                try await store.read { r in try r.history(of: c, for: bob, .last(1)) }.map(\.id) == [messages[8].id])
        }
    }

    @Test(arguments: StoreBackend.allCases) func unreadCountsFollowTheReadMarker(_ backend: StoreBackend) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let (c, messages) = try await seeded(store, messages: 10)  // alice sent 0,2,4,6,8
            #expect(try await store.read { r in try r.unreadCount(of: c, for: bob) } == 5)
            #expect(try await store.read { r in try r.unreadCount(of: c, for: alice) } == 5)
            let moved = try await store.write { tx in
                try tx.setReadUpTo(messages[4].position!, user: bob, conversation: c)
            }
            #expect(moved)
            #expect(try await store.read { r in try r.unreadCount(of: c, for: bob) } == 2)
            // The marker never moves back.
            let back = try await store.write { tx in
                try tx.setReadUpTo(messages[1].position!, user: bob, conversation: c)
            }
            #expect(!back)
            #expect(try await store.read { r in try r.readUpTo(conversation: c, user: bob) } == messages[4].position)
            let counts = try await store.read { r in try r.unreadCounts(for: bob) }
            #expect(counts == [c: 2])
        }
    }

    @Test(arguments: StoreBackend.allCases) func statusNeverMovesDown(_ backend: StoreBackend) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let (_, messages) = try await seeded(store, messages: 1)
            let id = messages[0].id
            let changes = try await store.write { tx in
                [
                    try tx.recordStatus(.delivered, of: id, for: bob),
                    try tx.recordStatus(.sent, of: id, for: bob),
                    try tx.recordStatus(.delivered, of: id, for: bob),
                    try tx.recordStatus(.pending, of: id, for: bob),
                ]
            }
            #expect(changes == [StatusChange(user: bob, before: .sent, after: .delivered), nil, nil, nil])
            #expect(try await store.read { r in try r.recipientStatus(of: id) }[bob] == .delivered)
            let up = try await store.write { tx in try tx.recordStatus(.read, of: id, for: bob) }
            #expect(up == StatusChange(user: bob, before: .delivered, after: .read))
            let down = try await store.write { tx in try tx.recordStatus(.sent, of: id, for: bob) }
            #expect(down == nil)
            #expect(try await store.read { r in try r.recipientStatus(of: id) }[bob] == .read)
            #expect(
                await storageErrorCode {
                    try await store.write { tx in _ = try tx.recordStatus(.read, of: .random(), for: bob) }
                } == .notFound)
        }
    }

    @Test(arguments: StoreBackend.allCases) func markersRaiseStatusesOfOthersMessagesUpToThePositionInOneWrite(
        _ backend: StoreBackend
    ) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let (c, messages) = try await seeded(store, messages: 6)
            let moved = try await store.write { tx in
                [
                    try tx.raise(.delivered, to: messages[4].position!, user: bob, conversation: c),
                    try tx.raise(.read, to: messages[2].position!, user: bob, conversation: c),
                    try tx.raise(.delivered, to: messages[0].position!, user: bob, conversation: c),
                ]
            }
            #expect(moved == [true, true, false])  // a marker never moves back
            let history = try await store.read { r in try r.history(of: c, for: alice, .complete(after: nil, limit: 10))
            }
            // alice sent the even ones: read up to 2, delivered up to 4, sent after; bob's own are read for bob.
            #expect(history.map { $0.recipientStatus[bob] } == [.read, .read, .read, .read, .delivered, .read])
            #expect(history.map { $0.recipientStatus[alice] } == [.read, .sent, .read, .sent, .read, .sent])
            #expect(try await store.read { r in try r.unreadCount(of: c, for: bob) } == 1)
            // A status recorded for one message is derived against the markers.
            #expect(
                try await store.write { tx in try tx.recordStatus(.delivered, of: messages[4].id, for: bob) } == nil)
            #expect(
                try await store.write { tx in try tx.recordStatus(.read, of: messages[4].id, for: bob) }
                    == StatusChange(user: bob, before: .delivered, after: .read))
        }
    }
}
