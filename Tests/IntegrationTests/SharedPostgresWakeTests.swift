import Foundation
import LaminaModel
import LaminaNode
import LaminaTestPostgres
import LaminaWire
import Testing

/// How a node delivers another node's commits (shared PostgreSQL): the sessions a notification
/// wakes get the new entries from one read shared by all of them, not one read per session,
/// and each gets every entry once, in seq order.
@Suite struct SharedPostgresWakeTests {
    @Test func sessionsWokenByAnotherNodesCommitShareOneRead() async throws {
        let database = try PostgresTestCluster.newDatabase()
        let first = try await SharedPostgresNodesTests.node("pg-wake-a", on: database)
        let second = try await SharedPostgresNodesTests.node("pg-wake-b", on: database, trusting: first)
        let alice = try await first.session("alice", device: UUID())
        let others: [UserID] = ["bob", "carol", "dave", "erin", "frank"]
        var clients: [SyncTestClient] = []
        for user in others { clients.append(try await second.session(user, device: UUID())) }
        let conversation = try await MessagingTests.conversation(alice, with: Set(others + ["alice"]))
        // A first message (it also brings the conversation to the others) reached every session
        // before counting.
        let (opening, _) = try await MessagingTests.send(alice, conversation, "opening")
        for client in clients { _ = try await client.message(opening) }
        let notifications = { second.server.store.postgresStatistics?.feedNotificationsReceived ?? 0 }
        let notificationsBefore = notifications()
        let countsBefore = second.server.engine.remoteFeedReadCounts

        var sent: [MessageID] = []
        for n in 0..<20 { sent.append(try await MessagingTests.send(alice, conversation, "m\(n)").0) }
        for (user, client) in zip(others, clients) {
            for id in sent { _ = try await client.message(id) }
            let live = client.seenChanges.filter { $0.seq > 0 }
            #expect(live.map(\.seq) == Array(1...UInt64(live.count)), "\(user): every entry once, in order")
            #expect(
                SharedPostgresNodesTests.messages(live) == [opening] + sent, "\(user): every message once, in order")
        }

        let counts = second.server.engine.remoteFeedReadCounts
        let reads = counts.reads - countsBefore.reads
        let received = notifications() - notificationsBefore
        #expect(received >= 1)
        // One read per notification at most (several when they come while one is under way),
        // where each of the five sessions read its own feed per notification before.
        #expect(reads >= 1 && reads <= received, "\(reads) shared reads for \(received) notifications")
        #expect(counts.ownReads == countsBefore.ownReads, "no session had to read its own feed")

        await alice.close()
        for client in clients { await client.close() }
        await first.stop()
        await second.stop()
    }
}
