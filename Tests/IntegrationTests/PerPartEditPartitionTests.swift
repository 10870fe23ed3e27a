import Foundation
import LaminaClient
import LaminaMerge
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// Issue 38, per-part edits (SPEC §6.2): during a peer partition alice's device on node A edits
/// part 1 and her device on node B edits part 2 of one message; A also edits part 3, which B
/// removes. After the heal every node and every device shows the same parts: both edits of
/// parts 1 and 2, and for part 3 the write with the later reading (the edit or the removal);
/// the device on B made its edits offline and shows the merged list after the heal.
@Suite struct PerPartEditPartitionTests {
    static func texts(_ client: LaminaClient, _ id: MessageID) throws -> [String]? {
        try client.message(id)?.message.parts.map { part in
            if case .inline(let bytes) = part.content { return String(decoding: bytes, as: UTF8.self) }
            return "<\(part.mimeType)>"
        }
    }

    /// Waits until `client` has sent every command it queued (its node acknowledged them).
    static func drained(_ client: LaminaClient) async throws {
        let automatic: Set<String> = [OutboxCommandKind.deliveryReceipt.rawValue, OutboxCommandKind.markRead.rawValue]
        let deadline = ContinuousClock.now + .seconds(60)
        while try !client.store.outboxEntries().allSatisfy({ automatic.contains($0.kind) }) {
            guard ContinuousClock.now < deadline else {
                throw SyncTestTimeout(waitingFor: "\(client.user)'s outbox to drain")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Part `id`'s register on `node`: its reading and whether it holds a value.
    static func register(_ node: TestNode, _ message: MessageID, part id: UUID) async throws
        -> MessagePartsMap.Entry?
    {
        try await node.server.store.read { r in
            guard let stored = try r.message(message) else { return nil }
            return try r.partsMap(of: stored).entries[id]
        }
    }

    @Test func editsOfDifferentPartsOnTwoSidesBothSurviveAndARemovalMeetsAnEditByReading() async throws {
        let cluster = try await PartitionableDevices.start("per-part-edits")
        let (a, b, proxy) = (cluster.a, cluster.b, cluster.proxy)
        let (alice, aliceOnB) = (cluster.alice, cluster.aliceOnB)
        let devices = cluster.devices

        let group = try alice.newConversation(
            participants: ["bob"], options: ConversationOptions(isDistinct: false)
        ).id
        let one = try MessagePart(text: "one")
        let two = try MessagePart(text: "two")
        let three = try MessagePart(text: "three")
        let id = try alice.send(alice.newMessage(parts: [one, two, three]), in: group).id
        for client in devices { _ = try await client.waitForCreation(of: id, timeout: .seconds(30)) }
        // Only a sent message can be edited: its ACK may reach alice after bob has the message.
        try await ClientHarness.waitUntil(alice, "the message sent") { try alice.isSent(id) }

        proxy.cut()
        // A: alice edits part 1, then part 3. B: her other device edits part 2, then removes part 3.
        let oneOnA = try MessagePart(id: one.id, text: "one, edited on A")
        let threeOnA = try MessagePart(id: three.id, text: "three, edited on A")
        try alice.edit(id, parts: [oneOnA, two, three])
        try alice.edit(id, parts: [oneOnA, two, threeOnA])
        try await Self.drained(alice)
        // Her device on B edits offline (queued in its outbox), then reconnects to B, still cut
        // off from A: after the heal it takes the merged list, not only its own edits (SDK).
        await aliceOnB.disconnect()
        let twoOnB = try MessagePart(id: two.id, text: "two, edited on B")
        try aliceOnB.edit(id, parts: [one, twoOnB, three])
        try aliceOnB.edit(id, parts: [one, twoOnB])
        try await ClientHarness.connect(aliceOnB, on: b)
        try await Self.drained(aliceOnB)
        // Each device shows its own edits (once the echoes of the earlier ones have passed).
        try await ClientHarness.waitUntil(alice, "alice's edits on A") {
            try Self.texts(alice, id) == ["one, edited on A", "two", "three, edited on A"]
        }
        try await ClientHarness.waitUntil(aliceOnB, "alice's offline edits on B") {
            try Self.texts(aliceOnB, id) == ["one", "two, edited on B"]
        }
        let editOnA = try #require(try await Self.register(a, id, part: three.id))
        let removalOnB = try #require(try await Self.register(b, id, part: three.id))
        #expect(editOnA.part == threeOnA && removalOnB.part == nil)

        proxy.heal()
        #expect(try await PeerReplicationTests.converged([a, b], within: .seconds(60)), "the nodes never converged")

        // The nodes exchanged the edits as kind 74 (both offer bit 20): B logged A's as such.
        let logged = try await b.server.engine.operations(missingFrom: VersionVector(), limit: 256)
        let fromA = logged.filter { $0.origin == PeerReplicationTests.nodeA }.compactMap { op -> MessagePartsEdited? in
            if case .partsEdited(let edited) = op.payload { return edited }
            return nil
        }
        #expect(fromA.map(\.set) == [[one.id], [three.id]], "\(fromA)")

        // Part 3: the later reading wins (LaminaMerge's MessagePartsMap), the same everywhere.
        let removed = editOnA.at < removalOnB.at
        let expected = ["one, edited on A", "two, edited on B"] + (removed ? [] : ["three, edited on A"])
        for node in [a, b] {
            let parts = try await node.server.store.read { r in try r.message(id)?.message.parts }
            #expect(parts?.map(\.id) == [one.id, two.id] + (removed ? [] : [three.id]))
            #expect(try await Self.register(node, id, part: three.id) == (removed ? removalOnB : editOnA))
        }
        for client in devices {
            try await ClientHarness.waitUntil(client, "\(client.user)'s device shows the merged parts") {
                try Self.texts(client, id) == expected
            }
            #expect(try client.message(id)?.editedAt != nil)
        }

        try await cluster.stop()
    }
}
