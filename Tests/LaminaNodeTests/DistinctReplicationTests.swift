import Foundation
import LaminaMerge
import LaminaModel
import LaminaStoreTestSupport
import LaminaWire
import Testing

@testable import LaminaNode

/// Distinct conversations of one participant set created on several nodes while their links
/// are cut (SPEC §6.5, issue 14): once the links heal, in whatever order the operations
/// arrive, every node holds one conversation for them (or the same several, when a creation
/// had seen the other lose its distinctness) and every device's feed folds to it.
@Suite struct DistinctReplicationTests {
    typealias R = ReplicationTests

    /// Catches every node up on every other until nothing moves.
    static func heal(_ nodes: [EngineHarness]) async throws {
        var moved = true
        while moved {
            moved = false
            for i in nodes.indices {
                for j in nodes.indices where i != j {
                    if try await R.pull(nodes[i], from: nodes[j]) > 0 { moved = true }
                }
            }
        }
    }

    /// Where each conversation's state lives on `node` (itself, or its survivor).
    static func targets(_ node: EngineHarness, _ ids: [ConversationID]) async throws -> [ConversationID] {
        try await node.store.read { r in try ids.map { try r.resolvedConversation($0) ?? $0 } }
    }

    /// The conversations a new device of `user` on `node` holds after syncing its feed from the
    /// start: created, or holding messages, followed through `identifier-changed`, minus those
    /// deleted for everyone.
    static func deviceView(_ user: UserID, on node: EngineHarness) async throws -> Set<ConversationID> {
        let device = try await node.connect(user, sync: false)
        var held = Set<ConversationID>()
        for change in try await device.sync(from: 0).changes {
            switch change.event {
            case .conversationCreated(let c): held.insert(c.id)
            case .messageCreated(let m): held.insert(m.conversationID)
            case .identifierChanged(let i):
                if held.remove(i.from) != nil { held.insert(i.to) }
            case .conversationDeleted(let d) where d.mode == .allParticipants && d.below == nil:
                held.remove(d.conversationID)
            default: break
            }
        }
        return held
    }

    /// Runs the scenario on `count` nodes: node i's user creates a distinct conversation of
    /// alice and bob and sends to it while every link is cut; with `loseDistinctness`, node 0
    /// then adds carol to its own (it stops being distinct, concurrently with the others'
    /// creations). The links heal with `order`: each node in turn catches up on the others.
    func run(nodes count: Int, order: [Int], loseDistinctness: Bool, backend: StoreBackend = .sqlite) async throws {
        let nodes = try (1...count).map { id in try EngineHarness(backend: backend) { $0.nodeID = NodeID(UInt64(id)) } }
        defer { Task { for node in nodes { await node.close() } } }
        var createdIDs: [ConversationID] = []
        var sentIDs: [MessageID] = []
        for (i, node) in nodes.enumerated() {
            let creator: UserID = i % 2 == 0 ? "alice" : "bob"
            let client = try await node.connect(creator)
            let id = ConversationID.random()
            let message = MessageID.random()
            let reply = try await client.command(
                .createConversation(
                    CreateConversation(conversationID: id, participants: [creator == "alice" ? "bob" : "alice"])))
            #expect(reply.reply.ack?.conversationID == id)
            try await client.command(
                .sendMessage(SendMessage(messageID: message, conversationID: id, parts: [textPart("from node \(i)")])))
            createdIDs.append(id)
            sentIDs.append(message)
            if i == 0, loseDistinctness {
                try await client.command(
                    .addParticipants(ParticipantsUpdate(requestID: UUID(), conversationID: id, users: ["carol"])))
            }
        }
        let created = createdIDs
        let messages = sentIDs
        for i in order { for j in order where j != i { try await R.pull(nodes[i], from: nodes[j]) } }
        try await Self.heal(nodes)

        // One conversation on every node: every creation resolves to the same survivor.
        let targets = try await nodes.asyncMap { try await Self.targets($0, created) }
        let survivor = targets[0][0]
        for (n, t) in targets.enumerated() {
            #expect(Set(t) == Set([survivor]), "node \(n + 1): \(t) (order \(order))")
        }
        let candidates = try await nodes[0].store.read { r -> [DistinctCandidate] in
            var out: [DistinctCandidate] = []
            for id in created {
                if let stored = try r.conversation(id) {
                    out.append(DistinctCandidate(id: id, participants: ["alice", "bob"], createdAt: stored.hlc))
                }
            }
            return out
        }
        #expect(candidates.count == created.count)
        let expected = DistinctResolution.survivor(of: candidates)?.id
        #expect(survivor == expected)
        let digests = try await nodes.asyncMap { try await $0.engine.convergenceDigest() }
        for d in digests.dropFirst() {
            #expect(d.overall == digests[0].overall, "order \(order): \(R.difference(digests[0], d))")
        }
        for node in nodes {
            let stored = try await node.store.read { r in try r.conversation(survivor) }
            #expect(stored?.isLive == true)
            #expect(stored?.conversation.isDistinct == !loseDistinctness)
            #expect(
                stored?.conversation.participants == (loseDistinctness ? ["alice", "bob", "carol"] : ["alice", "bob"]))
            let held = try await node.store.read { r in
                try messages.compactMap { try r.message($0)?.message.conversationID }
            }
            #expect(held == Array(repeating: survivor, count: messages.count))
            // Every device of every participant, on every node, holds that one conversation.
            for user in ["alice", "bob"] as [UserID] {
                let view = try await Self.deviceView(user, on: node)
                #expect(
                    view == [survivor],
                    "\(user) on node \(node.engine.configuration.nodeID.rawValue): \(view) (order \(order))")
            }
        }
    }

    @Test(arguments: [[0, 1], [1, 0]], [false, true])
    func twoNodesEndWithOneConversationInEitherOrder(order: [Int], loseDistinctness: Bool) async throws {
        try await run(nodes: 2, order: order, loseDistinctness: loseDistinctness)
    }

    /// The same on PostgreSQL (births, merges and the migration's table on the other backend).
    @Test(arguments: [false, true])
    func twoNodesOnPostgreSQLEndWithOneConversation(loseDistinctness: Bool) async throws {
        try await run(nodes: 2, order: [1, 0], loseDistinctness: loseDistinctness, backend: .postgres)
    }

    @Test(arguments: [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]], [false, true])
    func threeNodesEndWithOneConversationInEveryOrder(order: [Int], loseDistinctness: Bool) async throws {
        try await run(nodes: 3, order: order, loseDistinctness: loseDistinctness)
    }

    /// A distinct conversation deleted for everyone on one node while another node creates one
    /// of the same participants: they merge (neither saw the other), and the merged
    /// conversation is deleted on every node, whatever the order; no device keeps either.
    @Test(arguments: [[0, 1], [1, 0]])
    func aConcurrentCreationMergesIntoADeletedConversation(order: [Int]) async throws {
        let nodes = [try R.node(1), try R.node(2)]
        defer { Task { for node in nodes { await node.close() } } }
        let alice = try await nodes[0].connect("alice")
        let bob = try await nodes[1].connect("bob")
        let deleted = ConversationID.random()
        let created = ConversationID.random()
        try await alice.command(.createConversation(CreateConversation(conversationID: deleted, participants: ["bob"])))
        try await alice.command(
            .sendMessage(SendMessage(messageID: .random(), conversationID: deleted, parts: [textPart("soon gone")])))
        try await alice.command(
            .deleteConversation(DeleteConversation(requestID: UUID(), conversationID: deleted, mode: .allParticipants)))
        try await bob.command(.createConversation(CreateConversation(conversationID: created, participants: ["alice"])))
        try await bob.command(
            .sendMessage(SendMessage(messageID: .random(), conversationID: created, parts: [textPart("hello")])))
        try await R.pull(nodes[order[0]], from: nodes[order[1]])
        try await Self.heal(nodes)

        let digests = try await nodes.asyncMap { try await $0.engine.convergenceDigest() }
        #expect(digests[0].overall == digests[1].overall, "\(R.difference(digests[0], digests[1]))")
        for node in nodes {
            let targets = try await Self.targets(node, [deleted, created])
            #expect(targets[0] == targets[1])
            let survivor = try await node.store.read { r in try r.conversation(targets[0]) }
            #expect(survivor?.isDeleted == true)
            #expect(
                try await node.store.read { r in try r.distinctConversation(participants: ["alice", "bob"]) } == nil)
            for user in ["alice", "bob"] as [UserID] {
                let view = try await Self.deviceView(user, on: node)
                #expect(view.isEmpty, "\(user) on node \(node.engine.configuration.nodeID.rawValue): \(view)")
            }
        }
    }

    /// A node that had seen the first conversation lose its distinctness creates a new one for
    /// the same participants: it stands on its own on every node, whatever the order.
    @Test(arguments: [false, true])
    func aCreationThatSawTheOtherLoseItsDistinctnessStandsAlone(relayThroughThird: Bool) async throws {
        let a = try R.node(1)
        let b = try R.node(2)
        let c = try R.node(3)
        defer {
            Task {
                await a.close()
                await b.close()
                await c.close()
            }
        }
        let alice = try await a.connect("alice")
        let bob = try await b.connect("bob")
        let first = ConversationID.random()
        let second = ConversationID.random()
        try await alice.command(.createConversation(CreateConversation(conversationID: first, participants: ["bob"])))
        try await alice.command(
            .addParticipants(ParticipantsUpdate(requestID: UUID(), conversationID: first, users: ["carol"])))
        try await R.pull(b, from: a)
        let reply = try await bob.command(
            .createConversation(CreateConversation(conversationID: second, participants: ["alice"])))
        #expect(reply.reply.ack?.conversationID == second)
        if relayThroughThird {
            try await R.pull(c, from: b)
            try await R.pull(a, from: c)
        }
        try await Self.heal([a, b, c])
        for node in [a, b, c] {
            #expect(try await Self.targets(node, [first, second]) == [first, second])
            let live = try await node.store.read { r in
                try r.distinctConversation(participants: ["alice", "bob"])?.conversation.id
            }
            #expect(live == second)
        }
        let digests = try await [a, b, c].asyncMap { try await $0.engine.convergenceDigest() }
        #expect(digests[0].overall == digests[1].overall && digests[1].overall == digests[2].overall)
    }
}
