import Foundation
import LaminaModel
import Testing

@testable import LaminaClient

@Suite struct StoreTests {
    @Test func conversationAndMessageRoundTripAndSurviveReopen() async throws {
        try await withTemporaryDirectory { dir in
            let location = StoreLocation(dataDirectory: dir, user: alice)
            let c = try conversation(
                [alice, bob], metadata: ["topic": .string("lunch"), "style": .dictionary(["color": .string("red")])])
            let image = richPart("image/png", size: 10_000)
            var m = try remoteMessage(in: c.id, at: 100, statuses: [bob: .read, alice: .delivered])
            m.parts.append(image)
            m.push = PushConfiguration(alert: "hi", sound: "ding", title: "T", data: ["k": "v"])
            do {
                let store = try LocalStore(location: location)
                try store.apply([.conversation(c), .message(m, receivedAt: received)], cursor: 42)
                try store.enqueue(OutboxEntry(id: m.id.uuid, kind: "receipt", payload: [9]))
                #expect(try store.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") } == "wal")
                try store.close()
            }
            let store = try LocalStore(location: location)
            defer { try? store.close() }
            let sc = try #require(try store.conversation(c.id))
            #expect(sc.conversation == c)
            #expect(sc.isSynced)
            #expect(sc.totalMessageCount == 1)
            #expect(sc.unreadMessageCount == 1)
            #expect(sc.lastMessageID == m.id)
            let sm = try #require(try store.message(m.id))
            #expect(sm.message == m)
            #expect(sm.receivedAt == received)
            #expect(sm.isUnread)
            #expect(sm.partStates.map(\.transferStatus) == [.complete, .readyForDownload])
            #expect(try store.syncCursor() == 42)
            #expect(try store.outboxEntries().map(\.payload) == [[9]])
        }
    }

    @Test func wipeDeletesEverythingAndEachUserHasOwnFolder() async throws {
        try await withTemporaryDirectory { dir in
            let location = StoreLocation(dataDirectory: dir, user: alice)
            let store = try LocalStore(location: location)
            try store.apply([.conversation(try conversation([alice, bob]))])
            #expect(FileManager.default.fileExists(atPath: location.databaseURL.path))
            try store.closeAndWipe()
            #expect(!FileManager.default.fileExists(atPath: location.userDirectory.path))
            let reopened = try LocalStore(location: location)
            defer { try? reopened.close() }
            #expect(try reopened.count(Query<StoredConversation>()) == 0)
            // Bob's store lives in its own folder, never in Alice's.
            #expect(StoreLocation(dataDirectory: dir, user: bob).userDirectory != location.userDirectory)
        }
    }

    @Test func applyingTheSameChangesTwiceIsANoOp() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            let m = try remoteMessage(in: c.id, at: 100)
            let changes: [RemoteChange] = [
                .conversation(c), .message(m, receivedAt: received),
                .recipientStatus(m.id, user: bob, status: .read),
                .metadata(c.id, path: try MetadataKeyPath(parsing: "a.b"), value: .string("x")),
                .participants(c.id, added: [carol], removed: []),
            ]
            for change in changes {
                #expect(!(try store.apply([change])).isEmpty)
                #expect(try store.apply([change]).isEmpty, "applying \(change) again changed something")
            }
            let snapshot = (try store.conversation(c.id), try store.message(m.id))
            // A replay of the whole feed (at-least-once delivery) ends in the same state.
            try store.apply(changes)
            #expect(try store.conversation(c.id) == snapshot.0)
            #expect(try store.message(m.id) == snapshot.1)
            #expect(try store.apply([changes.last!]).isEmpty)
            // A stale replay of the original message does not lower the status.
            #expect(try store.apply([.message(m, receivedAt: received)]).isEmpty)
            #expect(try store.message(m.id)?.message.recipientStatus[bob] == .read)
        }
    }

    @Test func recipientStatusOnlyMovesUp() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            let m = try remoteMessage(in: c.id, from: alice, at: 100)
            try store.apply([
                .conversation(c), .message(m, receivedAt: received),
                .recipientStatus(m.id, user: bob, status: .delivered),
            ])
            try store.apply([.recipientStatus(m.id, user: bob, status: .sent)])
            #expect(try store.message(m.id)?.message.recipientStatus[bob] == .delivered)
            try store.apply([.recipientStatus(m.id, user: bob, status: .read)])
            #expect(try store.message(m.id)?.message.recipientStatus[bob] == .read)
        }
    }

    /// A status-up-to raises the status of each held message at or below its bound (one
    /// object change per message, as per-message statuses gave) and is kept as a mark, so a
    /// message arriving later below the bound gets the raised status (LaminaMerge's rule).
    @Test func statusUpToRaisesHeldMessagesAndLaterArrivals() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            let m1 = try remoteMessage(in: c.id, from: alice, at: 100)
            let m2 = try remoteMessage(in: c.id, from: alice, at: 200)
            let late = try remoteMessage(in: c.id, from: alice, at: 150)
            let fromBob = try remoteMessage(in: c.id, from: bob, at: 120)
            try store.apply([
                .conversation(c), .message(m1, receivedAt: received), .message(m2, receivedAt: received),
                .message(fromBob, receivedAt: received),
            ])
            let changes = try store.apply([
                .statusUpTo(c.id, user: bob, status: .delivered, upTo: try #require(m2.position))
            ])
            #expect(
                Set(
                    changes.filter { $0.property == MessageProperty.recipientStatus }.compactMap {
                        change -> MessageID? in
                        if case .message(let m) = change.object { m.id } else { nil }
                    }) == [m1.id, m2.id])
            try store.apply([.statusUpTo(c.id, user: bob, status: .read, upTo: try #require(m1.position))])
            #expect(
                try store.apply([.statusUpTo(c.id, user: bob, status: .delivered, upTo: try #require(m1.position))])
                    .isEmpty)
            try store.apply([.message(late, receivedAt: received)])
            #expect(try store.message(m1.id)?.message.recipientStatus[bob] == .read)
            #expect(try store.message(late.id)?.message.recipientStatus[bob] == .delivered)
            #expect(try store.message(m2.id)?.message.recipientStatus[bob] == .delivered)
            // The local user's read-up-to makes a later arrival below it read, not unread.
            try store.apply([.statusUpTo(c.id, user: alice, status: .read, upTo: try #require(m2.position))])
            let older = try remoteMessage(in: c.id, from: bob, at: 110)
            try store.apply([.message(older, receivedAt: received)])
            #expect(try store.message(older.id)?.isUnread == false)
            #expect(try store.message(older.id)?.message.recipientStatus[alice] == .read)
            #expect(try store.conversation(c.id)?.unreadMessageCount == 0)
        }
    }

    @Test func countsAndLastMessageStayRight() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            let m1 = try remoteMessage(in: c.id, at: 100)
            let m2 = try remoteMessage(in: c.id, at: 200)
            let mine = try remoteMessage(in: c.id, from: alice, at: 150)
            try store.apply([
                .conversation(c), .message(m2, receivedAt: received), .message(m1, receivedAt: received),
                .message(mine, receivedAt: received),
            ])
            var sc = try #require(try store.conversation(c.id))
            #expect(sc.totalMessageCount == 3)
            #expect(sc.unreadMessageCount == 2)
            #expect(sc.lastMessageID == m2.id)
            #expect(try store.messages(in: c.id).map(\.id) == [m1.id, mine.id, m2.id])
            #expect(try store.markRead([m1.id]) == [m1.id])
            #expect(try store.markRead([m1.id]).isEmpty)
            sc = try #require(try store.conversation(c.id))
            #expect(sc.unreadMessageCount == 1)
            // Read on another device of the same user.
            try store.apply([.recipientStatus(m2.id, user: alice, status: .read)])
            #expect(try store.conversation(c.id)?.unreadMessageCount == 0)
            try store.apply([.messageDeleted(m2.id)])
            sc = try #require(try store.conversation(c.id))
            #expect(sc.totalMessageCount == 2)
            #expect(sc.lastMessageID == mine.id)
        }
    }

    @Test func localConversationIsUnsyncedUntilItsFirstMessageIsSent() async throws {
        try await withStore { store in
            let c = try conversation([bob], creator: alice)
            let stored = try store.insertLocalConversation(c)
            #expect(!stored.isSynced)
            #expect(try store.distinctConversation(participants: [alice, bob])?.id == c.id)
            #expect(try store.distinctConversation(participants: [alice, bob, carol]) == nil)
            let message = Message(conversationID: c.id, sender: alice, parts: [try MessagePart(text: "hello")])
            let entry = OutboxEntry(
                id: message.id.uuid, kind: "message.send", objectID: message.id.uuid, payload: [1, 2, 3])
            let local = try store.insertLocalMessage(message, outbox: entry)
            #expect(!local.message.isSent)
            #expect(!local.isUnread)
            #expect(local.message.recipientStatus == [alice: .read, bob: .pending])
            #expect(try store.conversation(c.id)?.isSynced == false)
            #expect(try store.outboxEntries().map(\.id) == [message.id.uuid])
            // The node accepts it: the ACK carries the position and sent-at time.
            var accepted = local.message
            accepted.position = position(500)
            accepted.sentAt = Timestamp(millisecondsSince1970: 500)
            accepted.recipientStatus[bob] = .sent
            try store.apply([.message(accepted, receivedAt: received)])
            let sent = try #require(try store.message(message.id))
            #expect(sent.message.isSent)
            #expect(sent.message.position == position(500))
            #expect(sent.receivedAt == nil)
            #expect(try store.conversation(c.id)?.isSynced == true)
        }
    }

    @Test func distinctMergeMovesMessagesToTheSurvivor() async throws {
        try await withStore { store in
            let loser = try conversation([alice, bob], creator: alice)
            let survivor = try conversation([alice, bob], creator: bob)
            try store.insertLocalConversation(loser)
            let mine = Message(conversationID: loser.id, sender: alice, parts: [try MessagePart(text: "first")])
            try store.insertLocalMessage(mine)
            let theirs = try remoteMessage(in: survivor.id, at: 100)
            try store.apply([.conversation(survivor), .message(theirs, receivedAt: received)])

            let changes = try store.apply([.distinctMerge(from: loser.id, into: survivor.id)])
            let idChange = try #require(changes.first { $0.property == ConversationProperty.identifier })
            #expect(idChange.before == .conversationID(loser.id))
            #expect(idChange.after == .conversationID(survivor.id))
            let moved = try #require(
                changes.first { $0.messageID == mine.id && $0.property == MessageProperty.conversation })
            #expect(moved.before == .conversationID(loser.id))
            #expect(moved.after == .conversationID(survivor.id))

            #expect(try store.conversation(loser.id)?.id == survivor.id)
            #expect(try store.currentIdentifier(of: loser.id) == survivor.id)
            #expect(try store.message(mine.id)?.message.conversationID == survivor.id)
            #expect(try store.conversation(survivor.id)?.totalMessageCount == 2)
            #expect(try store.count(Query<StoredConversation>()) == 1)
            // Again: nothing happens. A late message for the loser lands in the survivor.
            #expect(try store.apply([.distinctMerge(from: loser.id, into: survivor.id)]).isEmpty)
            let late = try remoteMessage(in: loser.id, at: 300)
            try store.apply([.message(late, receivedAt: received)])
            #expect(try store.message(late.id)?.message.conversationID == survivor.id)
            // Changes addressed to the merged-away id are stale: the survivor is untouched.
            #expect(
                try store.apply([.conversationDeleted(loser.id), .participants(loser.id, added: [carol], removed: [])])
                    .isEmpty)
            #expect(try store.conversation(survivor.id)?.conversation.participants == [alice, bob])
        }
    }

    @Test func distinctMergeIntoAnUnknownSurvivorRenamesTheConversation() async throws {
        try await withStore { store in
            let loser = try conversation([alice, bob], creator: alice, metadata: ["k": .string("v")])
            try store.insertLocalConversation(loser)
            let mine = Message(conversationID: loser.id, sender: alice, parts: [try MessagePart(text: "first")])
            try store.insertLocalMessage(mine)
            let survivorID = ConversationID.random()
            let changes = try store.apply([.distinctMerge(from: loser.id, into: survivorID)])
            #expect(
                changes.contains {
                    $0.property == ConversationProperty.identifier && $0.after == .conversationID(survivorID)
                })
            let renamed = try #require(try store.conversation(survivorID))
            #expect(renamed.conversation.participants == [alice, bob])
            #expect(renamed.conversation.metadata == loser.metadata)
            #expect(renamed.totalMessageCount == 1)
            #expect(try store.conversation(loser.id)?.id == survivorID)
            #expect(try store.message(mine.id)?.message.conversationID == survivorID)
        }
    }

    @Test func participantChangesMakeADistinctConversationNonDistinct() async throws {
        try await withStore { store in
            let c = try conversation([alice, bob])
            try store.apply([.conversation(c), .participants(c.id, added: [carol], removed: [])])
            let sc = try #require(try store.conversation(c.id))
            #expect(sc.conversation.participants == [alice, bob, carol])
            #expect(!sc.conversation.isDistinct)
        }
    }

    @Test func outboxKeepsOrderAndEachIdOnce() async throws {
        try await withStore { store in
            let ids = (0..<5).map { _ in UUID() }
            for (i, id) in ids.enumerated() { try store.enqueue(OutboxEntry(id: id, kind: "k", payload: [UInt8(i)])) }
            try store.enqueue(OutboxEntry(id: ids[1], kind: "k", payload: [99]))  // a retry: ignored
            #expect(try store.outboxEntries().map(\.id) == ids)
            let first = try store.dequeueOutbox(limit: 2)
            #expect(first.map(\.id) == Array(ids[0..<2]))
            #expect(first.allSatisfy { $0.state == .inFlight && $0.attempts == 1 })
            #expect(try store.dequeueOutbox(limit: 2).map(\.id) == Array(ids[2..<4]))
            #expect(try store.markSent(ids[0]))
            #expect(try !store.markSent(ids[0]))
            // The connection drops: what was in flight goes again, in order, before the rest.
            try store.requeueInFlight()
            let again = try store.dequeueOutbox(limit: 10)
            #expect(again.map(\.id) == Array(ids[1...]))
            #expect(again.map(\.attempts) == [2, 2, 2, 1])
            #expect(again[0].payload == [1])
            #expect(throws: ClientError.self) { try store.dequeueOutbox(limit: 0) }
        }
    }

    /// A flush still under way when its session ended takes nothing once the gate is closed,
    /// so nothing it marks in flight can outlive the engine's requeue (it would never be sent).
    @Test func anEndedSessionsFlushTakesNothingFromTheOutbox() async throws {
        try await withStore { store in
            let ids = (0..<3).map { _ in UUID() }
            for id in ids { try store.enqueue(OutboxEntry(id: id, kind: "k", payload: [1])) }
            let gate = SendGate()
            let first = try await store.dequeueOutboxForSendAsync(limit: 1, gate: gate)
            #expect(first.map(\.entry.id) == [ids[0]])
            gate.close()
            try store.requeueInFlight()
            #expect(try await store.dequeueOutboxForSendAsync(limit: 10, gate: gate).isEmpty)
            #expect(try store.outboxEntries().allSatisfy { $0.state == .pending })
            // The next session's flush takes all of them, the one sent before first.
            let next = try await store.dequeueOutboxForSendAsync(limit: 10, gate: SendGate())
            #expect(next.map(\.entry.id) == ids)
        }
    }

    @Test func applyFailsCleanlyForAnUnknownConversation() async throws {
        try await withStore { store in
            let m = try remoteMessage(in: .random(), at: 1)
            let error = #expect(throws: ClientError.self) {
                try store.apply([.message(m, receivedAt: received)], cursor: 9)
            }
            #expect(error?.code == .notFound)
            #expect(try store.syncCursor() == nil)  // the cursor did not move past what failed
        }
    }
}
