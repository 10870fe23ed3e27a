import Foundation
import LaminaClient
import LaminaMerge
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// Issue 38's must-show: during a peer partition both sides react, edit, reply and mute, and
/// once the link heals every node and every device ends identical, by the rules in LaminaMerge
/// (`ReactionSet`, `MessagePartsMap`, `ThreadSummary`, `NotificationSetting`). Node B dials
/// node A through a proxy the test cuts. Alice has a device on each node; Bob is on B.
@Suite struct BeyondLayerPartitionTests {
    /// What a device shows of a message, in a form two devices can compare.
    struct Shown: Equatable, CustomStringConvertible {
        var texts: [String]
        var reactions: [String: Set<UserID>]
        var replyTo: MessageID?
        var replies: Int
        var edited: Bool

        var description: String {
            "\(texts) reactions \(reactions.mapValues { $0.sorted() }) replyTo \(replyTo.map(\.description) ?? "-") replies \(replies) edited \(edited)"
        }
    }

    static func shown(_ client: LaminaClient, _ id: MessageID) throws -> Shown? {
        guard let stored = try client.message(id) else { return nil }
        return Shown(
            texts: stored.message.parts.map { part in
                if case .inline(let bytes) = part.content { return String(decoding: bytes, as: UTF8.self) }
                return "<\(part.mimeType)>"
            },
            reactions: stored.reactions, replyTo: stored.replyTo, replies: stored.threadReplyCount,
            edited: stored.editedAt != nil)
    }

    static func text(_ value: String) throws -> MessagePart { try MessagePart(text: value) }

    @Test func bothSidesReactEditReplyAndMuteDuringAPartitionAndEveryReplicaEndsTheSame() async throws {
        let cluster = try await PartitionableDevices.start("beyond-partition")
        let (a, b, proxy) = (cluster.a, cluster.b, cluster.proxy)
        let (alice, aliceOnB, bob) = (cluster.alice, cluster.aliceOnB, cluster.bob)
        let devices = cluster.devices

        // Before the cut: a conversation, a message each, alice's 👍 on bob's; every device has them.
        let group = try alice.newConversation(
            participants: ["bob"], options: ConversationOptions(isDistinct: false)
        ).id
        let first = try Self.text("the root")
        let second = try Self.text("its second part")
        let root = try alice.send(alice.newMessage(parts: [first, second]), in: group).id
        for client in devices { _ = try await client.waitForCreation(of: root, timeout: .seconds(30)) }
        // Only a sent message can be edited: its ACK may reach alice after the others have it.
        try await ClientHarness.waitUntil(alice, "the root sent") { try alice.isSent(root) }
        let bobs = try bob.send(bob.newMessage(parts: [try Self.text("bob's")]), in: group).id
        for client in devices { _ = try await client.waitForCreation(of: bobs, timeout: .seconds(30)) }
        try alice.react("👍", to: bobs)
        try await ClientHarness.waitUntil(aliceOnB, "alice's 👍 at her device on B") {
            try Self.shown(aliceOnB, bobs)?.reactions["👍"] == ["alice"]
        }

        proxy.cut()
        // Side A: alice takes her 👍 back and gives it again (a new add), edits her root, replies
        // to it and mutes the conversation.
        try alice.unreact("👍", from: bobs)
        try alice.react("👍", to: bobs)
        try alice.edit(root, parts: [try MessagePart(id: first.id, text: "the root, edited on A"), second])
        let replyOnA = try alice.send(
            alice.newMessage(parts: [try Self.text("a reply on A")], replyTo: root), in: group
        ).id
        try alice.setNotificationLevel(.none, for: group)
        // Side B: alice's other device takes back the 👍 it knew of (the first add only) and
        // edits another part of the same root; bob reacts, replies, mentions alice and hears only
        // mentions.
        try aliceOnB.unreact("👍", from: bobs)
        try aliceOnB.edit(root, parts: [first, try MessagePart(id: second.id, text: "its second part, edited on B")])
        try bob.react("❤️", to: root)
        try bob.react("👍", to: bobs)
        let replyOnB = try bob.send(
            bob.newMessage(parts: [try Self.text("a reply on B")], replyTo: root, mentions: ["alice"]), in: group
        ).id
        try bob.setNotificationLevel(.mentions, for: group)
        // Every command of the test acknowledged by its own side's node (the receipts the SDK
        // sends by itself are not waited for).
        let automatic: Set<String> = [OutboxCommandKind.deliveryReceipt.rawValue, OutboxCommandKind.markRead.rawValue]
        let drained = ContinuousClock.now + .seconds(60)
        for (index, client) in devices.enumerated() {
            while try !client.store.outboxEntries().allSatisfy({ automatic.contains($0.kind) }) {
                guard ContinuousClock.now < drained else {
                    let left = try client.store.outboxEntries().map { "\($0.kind) \($0.state)" }
                    Issue.record("device \(index) (\(client.user)): commands left in its outbox: \(left)")
                    break
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        let digests = try await [a, b].asyncMap { try await $0.server.engine.convergenceDigest().overall }
        #expect(digests[0] != digests[1], "the nodes converged through the partition")

        proxy.heal()
        #expect(try await PeerReplicationTests.converged([a, b], within: .seconds(60)), "the nodes never converged")

        // The nodes hold the same notification levels (each user's last write wins).
        let levels = try await [a, b].asyncMap { node in
            try await node.server.store.read { r in
                try ["alice", "bob"].map { (user: UserID) in try r.notificationSetting(of: user, in: group).current }
            }
        }
        #expect(levels[0] == levels[1])
        #expect(levels[0].map { $0?.level } == [NotificationLevel.none, .mentions])

        // Every device shows every message the same way.
        let ids = [root, bobs, replyOnA, replyOnB]
        for id in ids { for client in devices { _ = try await client.waitForCreation(of: id, timeout: .seconds(30)) } }
        let deadline = ContinuousClock.now + .seconds(60)
        for (index, client) in devices.enumerated().dropFirst() {
            while try ids.map({ try Self.shown(client, $0) }) != ids.map({ try Self.shown(alice, $0) }) {
                guard ContinuousClock.now < deadline else {
                    Issue.record(
                        "device \(index) (\(client.user)) shows \(try ids.map { try Self.shown(client, $0) }), alice's device on A \(try ids.map { try Self.shown(alice, $0) })"
                    )
                    break
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        let final = try ids.map { try #require(try Self.shown(alice, $0)) }
        // The add made on A after its remove survives the concurrent remove on B (add wins);
        // bob's 👍 and ❤️ are there; the root carries both replies, each pointing at it; the root
        // was edited on both sides, each side a different part, and both edits survive (a
        // register per part, LaminaMerge's MessagePartsMap).
        #expect(final[1].reactions["👍"] == ["alice", "bob"], "\(final[1])")
        #expect(final[0].reactions["❤️"] == ["bob"], "\(final[0])")
        #expect(final[0].replies == 2 && final[2].replyTo == root && final[3].replyTo == root, "\(final)")
        #expect(
            final[0].edited && final[0].texts == ["the root, edited on A", "its second part, edited on B"],
            "\(final[0])")
        // Alice's two devices agree on her level; bob's device on his.
        try await ClientHarness.waitUntil(aliceOnB, "alice's level on her device on B") {
            try aliceOnB.conversation(group)?.notificationLevel == NotificationLevel.none
        }
        #expect(try alice.conversation(group)?.notificationLevel == NotificationLevel.none)
        #expect(try bob.conversation(group)?.notificationLevel == .mentions)
        // The mention reached alice's devices with the reply.
        for client in [alice, aliceOnB] {
            #expect(try client.message(replyOnB)?.message.mentions == ["alice"])
        }

        try await cluster.stop()
    }
}
