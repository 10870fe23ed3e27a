import Foundation
import LaminaModel
import LaminaTestPostgres
import LaminaWire
import Testing

@testable import LaminaStore

/// Cross-node delivery from the notification (issue 34 item 4): another node's commit carries
/// its feed entries in `lamina_feed`, and a caught-up session gets them without a read of its
/// feed; what the notification cannot carry (an event too big for a payload), or a
/// notification missed while the listening connection was down, is read from the feed.
@Suite struct SharedPostgresDeliveryTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    /// The seqs of `changes`' message-created entries, in arrival order.
    static func messageSeqs(_ changes: [Change]) -> [UInt64] {
        changes.compactMap { change in
            if case .messageCreated = change.event { return change.seq }
            return nil
        }
    }

    @Test func entriesCrossNodesInTheNotificationWithoutAFeedRead() async throws {
        let database = try PostgresTestCluster.newDatabase()
        let first = try await SharedPostgresNodesTests.node("pg-deliver-a", on: database)
        let second = try await SharedPostgresNodesTests.node("pg-deliver-b", on: database, trusting: first)
        let alice = try await first.session(Self.alice, device: UUID())
        let bob = try await second.session(Self.bob, device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: [Self.alice, Self.bob])
        let (opening, _) = try await MessagingTests.send(alice, conversation, "opening")
        _ = try await bob.message(opening)

        let before = try #require(second.server.store.postgresStatistics)
        var sent: [MessageID] = []
        for n in 0..<30 { sent.append(try await MessagingTests.send(alice, conversation, "message \(n)").0) }
        for id in sent { _ = try await bob.message(id) }
        let after = try #require(second.server.store.postgresStatistics)

        let received = SharedPostgresNodesTests.messages(bob.seenChanges)
        #expect(received == [opening] + sent, "every message once, in order")
        let seqs = Self.messageSeqs(bob.seenChanges)
        #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $1 == $0 + 1 }, "bob's feed without a gap: \(seqs)")
        #expect(after.feedEntriesReceived - before.feedEntriesReceived >= 30)
        // Every feed came as entries: none was named by its head alone (which makes a read).
        #expect(after.feedHeadsReceived - before.feedHeadsReceived == 0)
        // A read per woken session was 2 or more statements per message on the receiving node
        // (60 here). What is left is time-driven (the listener's lease retries, last-seen
        // batches): a few on a quiet machine, 40 once in a whole parallel suite run.
        #expect(
            after.statements - before.statements < 2 * sent.count,
            "statements on the receiving node: \(after.statements - before.statements)")
        await alice.close()
        await bob.close()
        await first.stop()
        await second.stop()
    }

    /// A message whose event does not fit in a notification is named by its feed head and read;
    /// notifications sent while the receiving node's listening connection was cut are missed,
    /// and its catch-up at the next connect reads them. Nothing is lost or sent twice.
    @Test func whatTheNotificationDoesNotCarryIsReadFromTheFeed() async throws {
        let database = try PostgresTestCluster.newDatabase()
        let first = try await SharedPostgresNodesTests.node("pg-fallback-a", on: database)
        let second = try await SharedPostgresNodesTests.node("pg-fallback-b", on: database, trusting: first)
        let alice = try await first.session(Self.alice, device: UUID())
        let bob = try await second.session(Self.bob, device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: [Self.alice, Self.bob])
        let (opening, _) = try await MessagingTests.send(alice, conversation, "opening")
        _ = try await bob.message(opening)

        // Five parts of 1,900 bytes: more than one payload holds.
        let heads = try #require(second.server.store.postgresStatistics).feedHeadsReceived
        let parts = try (0..<5).map { n in try MessagePart(text: String(repeating: "\(n)", count: 1_900)) }
        let (big, _) = try await MessagingTests.send(alice, conversation, "", parts: parts)
        #expect(try await bob.message(big).parts.count == parts.count)
        #expect((second.server.store.postgresStatistics?.feedHeadsReceived ?? 0) > heads)

        // The receiving node's listening connection is cut while messages are sent.
        let connects = try #require(second.server.store.postgresStatistics).listenerConnects
        let pid = try #require(second.server.store.listener?.backendPID)
        try PostgresAdmin(database).psql("SELECT pg_terminate_backend(\(pid))")
        var sent: [MessageID] = []
        for n in 0..<10 { sent.append(try await MessagingTests.send(alice, conversation, "meanwhile \(n)").0) }
        for id in sent { _ = try await bob.message(id) }
        let deadline = ContinuousClock.now + .seconds(60)
        while (second.server.store.postgresStatistics?.listenerConnects ?? 0) <= connects {
            guard ContinuousClock.now < deadline else {
                throw SyncTestTimeout(waitingFor: "the listener to connect again")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        // And after it, delivery from the notifications again.
        let entries = try #require(second.server.store.postgresStatistics).feedEntriesReceived
        let (later, _) = try await MessagingTests.send(alice, conversation, "later")
        _ = try await bob.message(later)
        #expect((second.server.store.postgresStatistics?.feedEntriesReceived ?? 0) > entries)

        let received = SharedPostgresNodesTests.messages(bob.seenChanges)
        #expect(received == [opening, big] + sent + [later], "every message once, in order")
        let seqs = Self.messageSeqs(bob.seenChanges)
        #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $1 > $0 }, "ascending: \(seqs)")
        await alice.close()
        await bob.close()
        await first.stop()
        await second.stop()
    }
}
