import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaTestPostgres
import LaminaWire
import NIOConcurrencyHelpers
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Two `lamina-node` processes on one PostgreSQL database: one is killed with SIGKILL in the
/// middle of traffic; its clients reconnect to the other, and every acknowledged message is
/// on every device once, in the order of the ACKs.
@Suite struct SharedPostgresKillTests {
    /// A session of `user` on `node` (HELLO, AUTHENTICATE with a dev token, SYNC from `cursor`).
    static func session(_ user: UserID, on node: NodeProcess, dev: DevIdentityProvider, cursor: UInt64 = 0) async throws -> SyncTestClient {
        let client = try await SyncTestClient.connect(
            url: "https://127.0.0.1:\(node.syncPort)", caFile: node.dataDirectory.appendingPathComponent(LocalNode.Files.certificate).path)
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

    @Test func killNineOnOneOfTwoNodesLosesNothingAcknowledged() async throws {
        let store = try PostgresTestCluster.newDatabase()
        let first = try await NodeProcess.start(in: Fixtures.temporaryDirectory("pg-two-a"), arguments: ["--store", store])
        // The second node: its own data directory (node id, certificate), the first one's dev identity.
        let secondDirectory = Fixtures.temporaryDirectory("pg-two-b")
        let secondData = secondDirectory.appendingPathComponent(".lamina")
        try FileManager.default.createDirectory(at: secondData, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            at: first.dataDirectory.appendingPathComponent(LocalNode.Files.devIdentity), to: secondData.appendingPathComponent(LocalNode.Files.devIdentity))
        let second = try await NodeProcess.start(in: secondDirectory, arguments: ["--store", store])
        let dev = try DevIdentityProvider.loadOrCreate(in: first.dataDirectory.appendingPathComponent(LocalNode.Files.devIdentity))

        // Alice and Bob's phone on the first node, Bob's laptop on the second.
        let alice = try await Self.session(MessagingTests.alice, on: first, dev: dev)
        let phone = try await Self.session(MessagingTests.bob, on: first, dev: dev)
        let laptop = try await Self.session(MessagingTests.bob, on: second, dev: dev)
        let conversation = try await MessagingTests.conversation(alice, with: [MessagingTests.alice, MessagingTests.bob])
        let (hello, _) = try await MessagingTests.send(alice, conversation, "hello")
        #expect(try await laptop.message(hello).sender == MessagingTests.alice, "fan-out across the nodes")
        _ = try await phone.message(hello)

        // Alice keeps sending; the first node is killed once 30 more are acknowledged.
        let acknowledged = NIOLockedValueBox<[MessageID]>([hello])
        let sender = Task {
            for i in 0..<10_000 {
                guard let (id, _) = try? await MessagingTests.send(alice, conversation, "m\(i)") else { return }
                acknowledged.withLockedValue { $0.append(id) }
            }
        }
        let deadline = ContinuousClock.now + .seconds(60)
        while acknowledged.withLockedValue({ $0.count }) < 31 {
            guard ContinuousClock.now < deadline else { throw SyncTestTimeout(waitingFor: "30 acknowledged sends") }
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(try await first.stop(with: SIGKILL) == SIGKILL)
        await sender.value
        // Each client takes in what reached it before the connection died (its cursor then
        // is the last seq it got, as an SDK's would be).
        for client in [alice, phone] {
            for frame in (try? await client.framesUntilEnd()) ?? [] { client.keep(frame) }
            await client.drop()
        }

        // Alice's and the phone's clients reconnect to the second node, each from its cursor.
        let aliceCursor = alice.seenChanges.map(\.seq).max() ?? 0
        let phoneCursor = phone.seenChanges.map(\.seq).max() ?? 0
        let aliceAgain = try await Self.session(MessagingTests.alice, on: second, dev: dev, cursor: aliceCursor)
        let phoneAgain = try await Self.session(MessagingTests.bob, on: second, dev: dev, cursor: phoneCursor)
        // Alice goes on sending through the second node.
        for i in 0..<10 {
            let (id, _) = try await MessagingTests.send(aliceAgain, conversation, "after \(i)")
            acknowledged.withLockedValue { $0.append(id) }
        }
        let acked = acknowledged.withLockedValue { $0 }
        let last = acked[acked.count - 1]
        for device in [laptop, phoneAgain, aliceAgain] { _ = try await device.message(last) }

        let laptopHas = SharedPostgresNodesTests.messages(laptop.seenChanges)
        let phoneHas = SharedPostgresNodesTests.messages(phone.seenChanges + phoneAgain.seenChanges)
        // Alice's device: what it had, then what it read from its cursor and got live.
        let aliceHas = SharedPostgresNodesTests.messages(alice.seenChanges + aliceAgain.seenChanges)
        Self.check(laptopHas, against: acked, unacknowledged: 1, "bob's laptop (second node throughout)")
        Self.check(phoneHas, against: acked, unacknowledged: 1, "bob's phone (moved to the second node)")
        Self.check(aliceHas, against: acked, unacknowledged: 1, "alice (moved to the second node)")
        #expect(laptopHas == phoneHas, "both of bob's devices hold the same messages in the same order")
        // And a device syncing from scratch reads the same feed.
        let fresh = try await Self.session(MessagingTests.bob, on: second, dev: dev)
        #expect(SharedPostgresNodesTests.messages(fresh.seenChanges) == laptopHas)

        for client in [laptop, aliceAgain, phoneAgain, fresh] { await client.close() }
        #expect(try await second.stop() == 0)
    }
}
