import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaTestPostgres
import LaminaWire
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The built `lamina-node` with `--store postgres://…`, as its own process.
@Suite struct PostgresNodeProcessTests {
    /// The node is killed with SIGKILL while Alice sends; started again on the same database,
    /// it has every message it acknowledged, once, in the order of the ACKs.
    @Test func killNineDuringTrafficLosesNothingAcknowledged() async throws {
        let store = try PostgresTestCluster.newDatabase()
        let directory = Fixtures.temporaryDirectory("pg-kill")
        var node = try await NodeProcess.start(in: directory, arguments: ["--store", store])
        #expect(
            !FileManager.default.fileExists(
                atPath: node.dataDirectory.appendingPathComponent(NodeBootstrap.Files.store).path),
            "the store is in PostgreSQL, not a file")
        let dev = try DevIdentityProvider.loadOrCreate(
            in: node.dataDirectory.appendingPathComponent(NodeBootstrap.Files.devIdentity))
        let ca = node.dataDirectory.appendingPathComponent(NodeBootstrap.Files.certificate).path

        func session(_ user: UserID, on node: NodeProcess, cursor: UInt64 = 0) async throws -> (
            SyncTestClient, [Change]
        ) {
            let client = try await SyncTestClient.connect(url: "https://127.0.0.1:\(node.syncPort)", caFile: ca)
            _ = try await client.hello()
            _ = try await client.authenticate(user: user, device: UUID(), dev: dev)
            let (backlog, _) = try await client.sync(from: cursor)
            return (client, backlog)
        }

        let (alice, _) = try await session(MessagingTests.alice, on: node)
        let (bob, _) = try await session(MessagingTests.bob, on: node)
        let conversation = try await MessagingTests.conversation(
            alice, with: [MessagingTests.alice, MessagingTests.bob])
        // Fan-out while the node is up: Bob's live session gets Alice's first message.
        let (first, _) = try await MessagingTests.send(alice, conversation, "first")
        #expect(try await bob.message(first).sender == MessagingTests.alice)

        // Alice keeps sending; the node is killed once 30 more are acknowledged.
        let sender = SendsUntilKilled(alice, into: conversation, after: [first])
        try await sender.waitForAcknowledged(31)
        #expect(try await node.stop(with: SIGKILL) == SIGKILL)
        await sender.stopped()
        await alice.drop()
        await bob.drop()
        let acked = sender.ids

        node = try await NodeProcess.start(in: directory, arguments: ["--store", store])
        let (reader, backlog) = try await session(MessagingTests.bob, on: node)
        let present = backlog.compactMap { change -> MessageID? in
            if case .messageCreated(let m) = change.event { return m.id }
            return nil
        }
        // Everything acknowledged is there once and in order; at most the send in flight at
        // the kill (committed, not acknowledged) follows.
        #expect(Set(present).count == present.count, "no duplicates")
        #expect(Array(present.prefix(acked.count)) == acked)
        #expect(present.count <= acked.count + 1)
        await reader.close()
        #expect(try await node.stop() == 0)
    }
}
