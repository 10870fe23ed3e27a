import Foundation
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

@Suite struct DurabilityTests {
    @Test func reopeningKeepsEverything() async throws {
        let (path, cleanup) = temporaryDatabasePath()
        defer { cleanup() }
        let alice: UserID = "alice"
        let bob: UserID = "bob"
        let c = try conversation(alice, [bob], metadata: ["title": .string("lunch")])
        let messages = try (0..<20).map { try textMessage("m\($0)", in: c.id, from: alice, at: hlc(UInt64(100 + $0))) }
        let session = SessionRecord(
            tokenHash: Array(repeating: 5, count: 32), user: bob, device: "phone",
            createdAt: Timestamp(millisecondsSince1970: 1), expiresAt: Timestamp(millisecondsSince1970: 1_000_000))

        let store = try NodeStore(path: path)
        try await store.write { tx in
            _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
            try tx.createSession(session)
        }
        for m in messages {
            try await store.write { tx in
                try tx.appendMessage(m, hlc: m.position!, origin: nodeA)
                _ = try tx.recordStatus(.delivered, of: m.id, for: bob)
                _ = try tx.appendChange(
                    to: [alice, bob], kind: 1, conversation: c.id, message: m.id, payload: Array(m.id.url.utf8),
                    at: Timestamp(millisecondsSince1970: 2))
            }
        }
        try await store.write { tx in
            _ = try tx.advanceCursor(of: "phone", user: bob, to: 7, at: Timestamp(millisecondsSince1970: 3))
            _ = try tx.setReadUpTo(messages[9].position!, user: bob, conversation: c.id)
        }
        let before = try await store.read { r in
            (
                try r.history(of: c.id, for: bob, .complete(after: nil, limit: 100)),
                try r.feed(of: bob, after: 0, limit: 100), try r.conversation(c.id)
            )
        }
        try store.close()

        let reopened = try NodeStore(path: path)
        let after = try await reopened.read { r in
            (
                try r.history(of: c.id, for: bob, .complete(after: nil, limit: 100)),
                try r.feed(of: bob, after: 0, limit: 100), try r.conversation(c.id)
            )
        }
        #expect(after.0 == before.0)
        #expect(after.0.count == 20)
        // Read up to the 10th (the read marker), delivered after it (recorded one by one).
        #expect(
            after.0.map { $0.recipientStatus[bob] } == Array(repeating: .read, count: 10)
                + Array(repeating: .delivered, count: 10))
        #expect(after.1 == before.1)
        #expect(after.1.count == 20)
        #expect(after.2 == before.2)
        #expect(after.2?.conversation.metadata == ["title": .string("lunch")])
        #expect(try await reopened.read { r in try r.cursor(of: "phone", user: bob) } == 7)
        #expect(try await reopened.read { r in try r.unreadCount(of: c.id, for: bob) } == 10)
        #expect(
            try await reopened.read { r in
                try r.session(tokenHash: session.tokenHash, at: Timestamp(millisecondsSince1970: 2))
            } == session)
        // Writes carry on where they left off.
        let next = try await reopened.write { tx in
            try tx.appendChange(
                to: [bob], kind: 1, conversation: nil, message: nil, payload: [],
                at: Timestamp(millisecondsSince1970: 4))
        }
        #expect(next == [bob: 21])
        try reopened.close()
    }
}
