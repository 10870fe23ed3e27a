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

/// Two or three `lamina-node` processes on one PostgreSQL database: one is killed with SIGKILL
/// in the middle of traffic; its clients reconnect to another, and every acknowledged message
/// is on every device once, in the order of the ACKs.
@Suite struct SharedPostgresKillTests {
    /// A session of `user` on `node` (HELLO, AUTHENTICATE with a dev token, SYNC from `cursor`).
    static func session(_ user: UserID, on node: NodeProcess, dev: DevIdentityProvider, cursor: UInt64 = 0) async throws
        -> SyncTestClient
    {
        let client = try await SyncTestClient.connect(
            url: "https://127.0.0.1:\(node.syncPort)",
            caFile: node.dataDirectory.appendingPathComponent(LocalNode.Files.certificate).path)
        _ = try await client.hello()
        _ = try await client.authenticate(user: user, device: UUID(), dev: dev)
        _ = try await client.sync(from: cursor)
        return client
    }

    /// Checks one device's messages against the acknowledged ones: each at most once, the
    /// acknowledged all there in ACK order, at most `unacknowledged` others (sends committed
    /// but not acknowledged when the node died).
    static func check(_ present: [MessageID], against acked: [MessageID], unacknowledged: Int, _ device: String) {
        #expect(Set(present).count == present.count, "\(device): no duplicates")
        let ackedSet = Set(acked)
        #expect(present.filter(ackedSet.contains) == acked, "\(device): every acknowledged message, in order")
        #expect(present.count <= acked.count + unacknowledged, "\(device): nothing else")
    }

    /// Two or three nodes: Alice and Bob's phone on the first, Bob's laptop on the second,
    /// Carol (with three nodes) on the third. The first is killed with SIGKILL while Alice
    /// sends; Alice moves to the last node, the phone to the second.
    @Test(arguments: [2, 3]) func killNineOnOneNodeLosesNothingAcknowledged(_ count: Int) async throws {
        let store = try PostgresTestCluster.newDatabase()
        let first = try await NodeProcess.start(
            in: Fixtures.temporaryDirectory("pg-kill-\(count)-a"), arguments: ["--store", store])
        var nodes = [first]
        for n in 1..<count {
            // Each node: its own data directory (node id, certificate), the first one's dev identity.
            let directory = Fixtures.temporaryDirectory("pg-kill-\(count)-\(n)")
            let data = directory.appendingPathComponent(".lamina")
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
            try FileManager.default.copyItem(
                at: first.dataDirectory.appendingPathComponent(LocalNode.Files.devIdentity),
                to: data.appendingPathComponent(LocalNode.Files.devIdentity))
            nodes.append(try await NodeProcess.start(in: directory, arguments: ["--store", store]))
        }
        let second = nodes[1]
        let last = nodes[count - 1]
        let dev = try DevIdentityProvider.loadOrCreate(
            in: first.dataDirectory.appendingPathComponent(LocalNode.Files.devIdentity))

        let alice = try await Self.session(MessagingTests.alice, on: first, dev: dev)
        let phone = try await Self.session(MessagingTests.bob, on: first, dev: dev)
        let laptop = try await Self.session(MessagingTests.bob, on: second, dev: dev)
        let carol: SyncTestClient? = count >= 3 ? try await Self.session("carol", on: nodes[2], dev: dev) : nil
        let members: Set<UserID> =
            count >= 3
            ? [MessagingTests.alice, MessagingTests.bob, "carol"] : [MessagingTests.alice, MessagingTests.bob]
        let conversation = try await MessagingTests.conversation(alice, with: members)
        let (hello, _) = try await MessagingTests.send(alice, conversation, "hello")
        #expect(try await laptop.message(hello).sender == MessagingTests.alice, "fan-out across the nodes")
        _ = try await phone.message(hello)
        if let carol { _ = try await carol.message(hello) }

        // Alice keeps sending; the first node is killed once 30 more are acknowledged.
        let sender = SendsUntilKilled(alice, into: conversation, after: [hello])
        try await sender.waitForAcknowledged(31)
        #expect(try await first.stop(with: SIGKILL) == SIGKILL)
        await sender.stopped()
        // Each client takes in what reached it before the connection died (its cursor then
        // is the last seq it got, as an SDK's would be).
        for client in [alice, phone] {
            for frame in (try? await client.framesUntilEnd()) ?? [] { client.keep(frame) }
            await client.drop()
        }

        // Alice's and the phone's clients reconnect to another node, each from its cursor.
        let aliceCursor = alice.seenChanges.map(\.seq).max() ?? 0
        let phoneCursor = phone.seenChanges.map(\.seq).max() ?? 0
        let aliceAgain = try await Self.session(MessagingTests.alice, on: last, dev: dev, cursor: aliceCursor)
        let phoneAgain = try await Self.session(MessagingTests.bob, on: second, dev: dev, cursor: phoneCursor)
        // Alice goes on sending through the node she moved to.
        for i in 0..<10 {
            let (id, _) = try await MessagingTests.send(aliceAgain, conversation, "after \(i)")
            sender.append(id)
        }
        let acked = sender.ids
        let lastSent = acked[acked.count - 1]
        for device in [laptop, phoneAgain, aliceAgain] + (carol.map { [$0] } ?? []) {
            _ = try await device.message(lastSent)
        }

        let laptopHas = SharedPostgresNodesTests.messages(laptop.seenChanges)
        let phoneHas = SharedPostgresNodesTests.messages(phone.seenChanges + phoneAgain.seenChanges)
        // Alice's device: what it had, then what it read from its cursor and got live.
        let aliceHas = SharedPostgresNodesTests.messages(alice.seenChanges + aliceAgain.seenChanges)
        Self.check(laptopHas, against: acked, unacknowledged: 1, "bob's laptop (second node throughout)")
        Self.check(phoneHas, against: acked, unacknowledged: 1, "bob's phone (moved to the second node)")
        Self.check(aliceHas, against: acked, unacknowledged: 1, "alice (moved to the last node)")
        #expect(laptopHas == phoneHas, "both of bob's devices hold the same messages in the same order")
        if let carol {
            let carolHas = SharedPostgresNodesTests.messages(carol.seenChanges)
            Self.check(carolHas, against: acked, unacknowledged: 1, "carol (third node throughout)")
            #expect(carolHas == laptopHas)
        }
        // And a device syncing from scratch reads the same feed, on any node left.
        for node in nodes.dropFirst() {
            let fresh = try await Self.session(MessagingTests.bob, on: node, dev: dev)
            #expect(SharedPostgresNodesTests.messages(fresh.seenChanges) == laptopHas)
            await fresh.close()
        }

        for client in [laptop, aliceAgain, phoneAgain] + (carol.map { [$0] } ?? []) { await client.close() }
        for node in nodes.dropFirst() { #expect(try await node.stop() == 0) }
    }
}
