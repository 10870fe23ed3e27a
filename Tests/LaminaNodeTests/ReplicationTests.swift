import Foundation
import LaminaMerge
import LaminaModel
import LaminaTransport
import LaminaWire
import Testing

@testable import LaminaNode
@testable import LaminaStore

/// Two or three engines, each on its own store with its own node id, exchanging their
/// replication logs by hand (no network): every operation is logged in its command's
/// transaction, applying a peer's operations goes through the same rules, replays change
/// nothing, gaps are refused, and the order of arrival does not change the result.
@Suite struct ReplicationTests {
    static func node(_ id: UInt64) throws -> EngineHarness {
        try EngineHarness { $0.nodeID = NodeID(id) }
    }

    /// Sends `to` every operation `from` holds that `to` lacks; returns how many.
    @discardableResult
    static func pull(_ to: EngineHarness, from: EngineHarness) async throws -> Int {
        var total = 0
        while true {
            let ops = try await from.engine.operations(missingFrom: try await to.engine.versionVector(), limit: 256)
            if ops.isEmpty { return total }
            _ = try await to.engine.applyReplicated(ops)
            total += ops.count
        }
    }

    /// What a node holds of a conversation, comparable across nodes.
    struct ConversationState: Equatable, CustomStringConvertible {
        var id: ConversationID
        var participants: Set<UserID>
        var metadata: Metadata
        var messages: [String]
        var delivered: [UserID: MessagePosition]
        var read: [UserID: MessagePosition]
        var description: String {
            "\(id) \(participants.sorted()) \(metadata) \(messages) delivered \(delivered) read \(read)"
        }
    }

    static func state(_ node: EngineHarness, _ named: ConversationID, as user: UserID) async throws
        -> ConversationState?
    {
        try await node.store.read { r -> ConversationState? in
            var id = named
            if let target = try r.resolvedConversation(named) { id = target }
            guard let stored = try r.conversation(id), stored.isLive else { return nil }
            let messages = try r.history(of: id, for: user, .complete(after: nil, limit: 10_000)).map {
                "\($0.id)@\($0.position!)"
            }
            return ConversationState(
                id: id, participants: stored.conversation.participants, metadata: try r.metadata(of: id),
                messages: messages,
                delivered: try r.markers(StatusMarker.delivered.rawValue, of: id),
                read: try r.markers(StatusMarker.read.rawValue, of: id))
        }
    }

    @Test func operationsOfEachNodeReachTheOtherAndItsLiveSessions() async throws {
        let a = try Self.node(1)
        let b = try Self.node(2)
        defer {
            Task {
                await a.close()
                await b.close()
            }
        }
        let alice = try await a.connect("alice")
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: ["bob"], options: ConversationOptions(isDistinct: false)
                )))
        var sent: [MessageID] = []
        for i in 0..<3 {
            let id = MessageID.random()
            try await alice.command(
                .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: [textPart("from a \(i)")]))
            )
            sent.append(id)
        }
        try await alice.command(
            .setMetadata(
                SetMetadata(
                    requestID: UUID(), conversationID: conversation, keyPath: try MetadataKeyPath(["title"]),
                    value: .string("on a"))))
        // create + 3 sends + metadata, numbered 1...5 on node 1.
        #expect(try await a.engine.versionVector() == VersionVector([NodeID(1): 5]))
        #expect(try await Self.pull(b, from: a) == 5)
        #expect(try await b.engine.versionVector() == VersionVector([NodeID(1): 5]))

        // Bob, on node 2, syncs what Alice sent on node 1.
        let bob = try await b.connect("bob", sync: false)
        let (changes, _) = try await bob.sync(from: 0)
        var created: [MessageID] = []
        for change in changes { if case .messageCreated(let m) = change.event { created.append(m.id) } }
        #expect(created == sent)
        #expect(
            changes.contains { if case .conversationCreated(let c) = $0.event { c.id == conversation } else { false } })
        #expect(
            changes.contains {
                if case .metadataChanged(let m) = $0.event { m.value == .string("on a") } else { false }
            })

        // Bob answers and reads; Alice's live session on node 1 gets both.
        let reply = MessageID.random()
        let (ack, _) = try await bob.command(
            .sendMessage(SendMessage(messageID: reply, conversationID: conversation, parts: [textPart("from b")])))
        guard case .ack(let sentReply) = ack, let replyPosition = sentReply.position else {
            Issue.record("no ACK: \(ack)")
            return
        }
        try await bob.command(
            .markAllRead(MarkAllRead(requestID: UUID(), conversationID: conversation, upTo: replyPosition)))
        #expect(try await Self.pull(a, from: b) == 2)
        var live: [Change] = []
        while live.count < 2 { live += try await alice.nextChanges() }
        #expect(live.contains { if case .messageCreated(let m) = $0.event { m.id == reply } else { false } })
        #expect(
            live.contains {
                if case .statusUpTo(let s) = $0.event {
                    s.user == "bob" && s.status == .read && s.upTo == replyPosition
                } else {
                    false
                }
            })

        // Both nodes hold the same conversation, positions included.
        let onA = try await Self.state(a, conversation, as: "alice")
        let onB = try await Self.state(b, conversation, as: "alice")
        #expect(onA != nil)
        #expect(onA == onB)
        #expect(onA?.messages.count == 4)
    }

    /// The sender updates a message's parts on both nodes before they exchange anything: per
    /// part (SPEC §6.2), the later update's removal of the original and its order hold, and the
    /// part the earlier update added concurrently survives after them, on both nodes whatever
    /// order they arrive in; a device on the node whose list changed is told the merged parts.
    @Test func concurrentPartUpdatesMergePerPartOnBothNodes() async throws {
        let a = try Self.node(1)
        let b = try Self.node(2)
        defer {
            Task {
                await a.close()
                await b.close()
            }
        }
        let aliceOnA = try await a.connect("alice")
        let conversation = ConversationID.random()
        let message = MessageID.random()
        try await aliceOnA.command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: ["bob"], options: ConversationOptions(isDistinct: false)
                )))
        let original = try MessagePart(text: "original")
        try await aliceOnA.command(
            .sendMessage(SendMessage(messageID: message, conversationID: conversation, parts: [original])))
        try await Self.pull(b, from: a)
        let aliceOnB = try await b.connect("alice")
        let bobOnB = try await b.connect("bob")
        // One update on each node; B's is made second, so its HLC reading is the later one.
        let onA = [original, try MessagePart(text: "added on a")]
        let onB = [try MessagePart(text: "replaced on b")]
        try await aliceOnA.command(
            .updateMessageParts(
                UpdateMessageParts(requestID: UUID(), conversationID: conversation, messageID: message, parts: onA)))
        try await aliceOnB.command(
            .updateMessageParts(
                UpdateMessageParts(requestID: UUID(), conversationID: conversation, messageID: message, parts: onB)))
        // A's older update reaches B: its added part stays, after B's list; B's reaches A.
        try await Self.pull(b, from: a)
        try await Self.pull(a, from: b)
        let merged = onB + [onA[1]]
        for node in [a, b] {
            let stored = try await node.store.read { try $0.message(message) }
            #expect(stored?.message.parts == merged)
        }
        #expect(try await a.engine.convergenceDigest().overall == b.engine.convergenceDigest().overall)
        // Bob on B saw B's update live, then the merged list when A's arrived.
        var told: [[MessagePart]] = []
        while told.last != merged {
            for change in try await bobOnB.nextChanges() {
                if case .messagePartsChanged(let p) = change.event { told.append(p.parts) }
            }
        }
        #expect(told == [onB, merged])
        // Only the sender may change its message's parts.
        let (refused, _) = try await bobOnB.command(
            .updateMessageParts(
                UpdateMessageParts(
                    requestID: UUID(), conversationID: conversation, messageID: message,
                    parts: [try MessagePart(text: "not bob's")])))
        guard case .error(let error) = refused else {
            Issue.record("bob changed alice's message: \(refused)")
            return
        }
        #expect(error.code == .forbidden)
    }

    /// A part update on one node and the message's deletion on another, at once: both nodes end
    /// with the deleted message and the same parts (the update applies to the register of a
    /// message already deleted, unannounced), whichever arrived first.
    @Test func aPartUpdateAndADeletionAtOnceEndTheSameOnBothNodes() async throws {
        let a = try Self.node(1)
        let b = try Self.node(2)
        defer {
            Task {
                await a.close()
                await b.close()
            }
        }
        let aliceOnA = try await a.connect("alice")
        let conversation = ConversationID.random()
        let message = MessageID.random()
        try await aliceOnA.command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: ["bob"], options: ConversationOptions(isDistinct: false)
                )))
        try await aliceOnA.command(
            .sendMessage(
                SendMessage(
                    messageID: message, conversationID: conversation, parts: [try MessagePart(text: "original")])))
        try await Self.pull(b, from: a)
        let aliceOnB = try await b.connect("alice")
        let updated = [try MessagePart(text: "updated on a")]
        try await aliceOnA.command(
            .updateMessageParts(
                UpdateMessageParts(requestID: UUID(), conversationID: conversation, messageID: message, parts: updated))
        )
        try await aliceOnB.command(
            .deleteMessage(
                DeleteMessage(
                    requestID: UUID(), conversationID: conversation, messageID: message, mode: .allParticipants)))
        try await Self.pull(b, from: a)
        try await Self.pull(a, from: b)
        for node in [a, b] {
            let stored = try await node.store.read { try $0.message(message) }
            #expect(stored?.isDeleted == true)
            #expect(stored?.message.parts == updated)
        }
        #expect(try await a.engine.convergenceDigest().overall == b.engine.convergenceDigest().overall)
    }

    @Test func replayedOperationsChangeNothingAndGapsAreRefused() async throws {
        let a = try Self.node(1)
        let b = try Self.node(2)
        defer {
            Task {
                await a.close()
                await b.close()
            }
        }
        let alice = try await a.connect("alice")
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(CreateConversation(conversationID: conversation, participants: ["bob"])))
        for i in 0..<3 {
            try await alice.command(
                .sendMessage(SendMessage(messageID: .random(), conversationID: conversation, parts: [textPart("\(i)")]))
            )
        }
        let ops = try await a.engine.operations(missingFrom: VersionVector(), limit: 256)
        #expect(ops.map(\.counter) == [1, 2, 3, 4])
        _ = try await b.engine.applyReplicated(Array(ops.prefix(2)))
        let bobHead = try await b.store.read { r in try r.feedHead(of: "bob") }
        // Again, and overlapping: nothing new in any feed.
        #expect(try await b.engine.applyReplicated(Array(ops.prefix(2))) == VersionVector([NodeID(1): 2]))
        #expect(try await b.store.read { r in try r.feedHead(of: "bob") } == bobHead)
        // Skipping counter 3 is a gap.
        await #expect(throws: WireError.self) { _ = try await b.engine.applyReplicated([ops[3]]) }
        #expect(try await b.engine.versionVector() == VersionVector([NodeID(1): 2]))
        #expect(try await b.engine.applyReplicated(ops) == VersionVector([NodeID(1): 4]))
        #expect(try await Self.state(a, conversation, as: "bob") == Self.state(b, conversation, as: "bob"))
    }

    /// A node that gets operations on a conversation before the conversation's creation (here:
    /// node 2's own operations, without node 1's creation) parks them instead of failing the
    /// peer session: its counters go on, and once the creation arrives they apply, in order,
    /// with the feed entries its users get.
    @Test func operationsOnAConversationNeverHeldWaitForItsCreation() async throws {
        let a = try Self.node(1)
        let b = try Self.node(2)
        let c = try Self.node(3)
        defer {
            Task {
                await a.close()
                await b.close()
                await c.close()
            }
        }
        let alice = try await a.connect("alice")
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: ["bob"], options: ConversationOptions(isDistinct: false)
                )))
        try await Self.pull(b, from: a)
        let bob = try await b.connect("bob")
        let reply = MessageID.random()
        try await bob.command(
            .sendMessage(SendMessage(messageID: reply, conversationID: conversation, parts: [textPart("from b")])))
        try await bob.command(
            .setMetadata(
                SetMetadata(
                    requestID: UUID(), conversationID: conversation, keyPath: try MetadataKeyPath(["title"]),
                    value: .string("on b"))))

        let ownOfB = try await b.engine.operations(missingFrom: VersionVector(), limit: 256).filter {
            $0.origin == NodeID(2)
        }
        #expect(ownOfB.count == 2)
        #expect(try await c.engine.applyReplicated(ownOfB) == VersionVector([NodeID(2): 2]))
        #expect(try await c.store.read { r in try r.parkedOperationCount() } == 2)
        #expect(try await Self.state(c, conversation, as: "bob") == nil)
        // Again: a replay parks nothing twice.
        #expect(try await c.engine.applyReplicated(ownOfB) == VersionVector([NodeID(2): 2]))

        // The creation arrives: the parked operations apply after it.
        #expect(try await Self.pull(c, from: a) == 1)
        #expect(try await c.store.read { r in try r.parkedOperationCount() } == 0)
        let onB = try await Self.state(b, conversation, as: "bob")
        let onC = try await Self.state(c, conversation, as: "bob")
        #expect(onC != nil)
        #expect(onC == onB)
        #expect(onC?.messages.count == 1)
        #expect(try await c.engine.convergenceDigest().overall == b.engine.convergenceDigest().overall)
        // Alice's feed on node 3: the conversation, then the message and the title.
        let aliceOnC = try await c.connect("alice", sync: false)
        let (changes, _) = try await aliceOnC.sync(from: 0)
        let kinds = changes.map(\.event.kind)
        #expect(kinds.first == 0, "conversation-created first: \(kinds)")
        #expect(changes.contains { if case .messageCreated(let m) = $0.event { m.id == reply } else { false } })
        #expect(
            changes.contains {
                if case .metadataChanged(let m) = $0.event { m.value == .string("on b") } else { false }
            })
    }

    /// Parking is bounded per origin (`ParkingLimits`): parking past the count or bytes bound
    /// gives up the origin's oldest parked operations, and so does a sweep once they were parked
    /// longer than the lifetime. Given-up operations stay logged (the vector moves on) but never
    /// apply, even when the creation comes; they are counted.
    @Test func parkingIsBoundedAndGivesUpTheOldestOperations() async throws {
        let a = try Self.node(1)
        let b = try Self.node(2)
        defer {
            Task {
                await a.close()
                await b.close()
            }
        }
        let alice = try await a.connect("alice")
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: ["bob"], options: ConversationOptions(isDistinct: false)
                )))
        try await Self.pull(b, from: a)
        let bob = try await b.connect("bob")
        var sent: [MessageID] = []
        for i in 0..<3 {
            let id = MessageID.random()
            try await bob.command(
                .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: [textPart("from b \(i)")]))
            )
            sent.append(id)
        }
        let ownOfB = try await b.engine.operations(missingFrom: VersionVector(), limit: 256).filter {
            $0.origin == NodeID(2)
        }
        #expect(ownOfB.count == 3)
        func parked(_ node: EngineHarness) async throws -> Int {
            try await node.store.read { r in try r.parkedOperationCount() }
        }
        let all = sent
        func held(_ node: EngineHarness) async throws -> Set<MessageID> {
            try await node.store.read { r in Set(try all.filter { try r.message($0) != nil }) }
        }

        // At most 2 parked per origin: the third gives up the first.
        let byCount = try EngineHarness {
            $0.nodeID = NodeID(3)
            $0.parking.operationsPerOrigin = 2
        }
        defer { Task { await byCount.close() } }
        #expect(try await byCount.engine.applyReplicated(ownOfB) == VersionVector([NodeID(2): 3]))
        #expect(try await parked(byCount) == 2)
        #expect(byCount.engine.abandonedParkedOperations == 1)
        #expect(try await Self.pull(byCount, from: a) == 1)
        #expect(try await parked(byCount) == 0)
        #expect(try await held(byCount) == Set(sent.dropFirst()))
        #expect(byCount.engine.abandonedParkedOperations == 1)

        // A byte bound smaller than one operation: only the latest stays parked.
        let byBytes = try EngineHarness {
            $0.nodeID = NodeID(4)
            $0.parking.bytesPerOrigin = 1
        }
        defer { Task { await byBytes.close() } }
        _ = try await byBytes.engine.applyReplicated(ownOfB)
        #expect(try await parked(byBytes) == 1)
        #expect(byBytes.engine.abandonedParkedOperations == 2)
        try await Self.pull(byBytes, from: a)
        #expect(try await held(byBytes) == [sent[2]])

        // A lifetime already over when the next operations are applied: the sweep of that
        // transaction gives up what the earlier one parked, not what it parks itself.
        let byAge = try EngineHarness {
            $0.nodeID = NodeID(5)
            $0.parking.lifetime = .zero - .seconds(60)
        }
        defer { Task { await byAge.close() } }
        _ = try await byAge.engine.applyReplicated(Array(ownOfB.prefix(2)))
        #expect(try await parked(byAge) == 2)
        #expect(byAge.engine.abandonedParkedOperations == 0)
        _ = try await byAge.engine.applyReplicated(Array(ownOfB.suffix(1)))
        #expect(try await parked(byAge) == 1)
        #expect(byAge.engine.abandonedParkedOperations == 2)
        #expect(try await byAge.engine.versionVector() == VersionVector([NodeID(2): 3]))
    }

    /// A replicated identity or block-list change that wins its register is told to devices on
    /// the receiving node too (SPEC §6.4 kinds 12 and 13): the user's feed there gets
    /// `identity-changed` with the identity and `block-list-changed`; a losing (older) change is not told.
    @Test func replicatedIdentityAndBlockChangesReachTheReceivingNodesFeeds() async throws {
        let a = try Self.node(1)
        let b = try Self.node(2)
        defer {
            Task {
                await a.close()
                await b.close()
            }
        }
        try await a.engine.setIdentity(StoredIdentity(values: ["display_name": "Alice"]), of: "alice")
        _ = try await a.engine.block("mallory", by: "alice", limit: 10)
        _ = try await Self.pull(b, from: a)
        let events = try await b.store.read { r in try r.feed(of: "alice", after: 0, limit: 100) }
            .map { entry in try FeedCoding.decode(entry).event }
        #expect(
            events.contains(
                .identityChanged(
                    IdentityChange(user: "alice", identity: .init(values: ["display_name": "Alice"], metadata: [:])))),
            "\(events)")
        #expect(events.contains(.blockListChanged(BlockListChanged(user: "mallory", blocking: true))), "\(events)")
        // The same operations arriving again tell nobody again.
        let count = events.count
        _ = try await b.engine.applyReplicated(try await a.engine.operations(missingFrom: VersionVector(), limit: 256))
        #expect(try await b.store.read { r in try r.feed(of: "alice", after: 0, limit: 100) }.count == count)
    }

    /// Identities, blocks, badges and session revocations set on two nodes at once reach the
    /// other, and every node keeps the later write of each (whatever the arrival order): the
    /// users' digest is the same everywhere, the fan-out's block lists follow, and a
    /// revocation ends the user's sessions on the other node.
    @Test func userStateReplicatesAndTheLaterWriteWinsInAnyOrder() async throws {
        let a = try Self.node(1)
        let b = try Self.node(2)
        defer {
            Task {
                await a.close()
                await b.close()
            }
        }
        try await a.engine.setIdentity(StoredIdentity(values: ["display_name": "Alice on a"]), of: "alice")
        _ = try await a.engine.block("mallory", by: "alice", limit: 10)
        try await a.engine.setExternalUnreadCount(3, of: "bob")
        try await b.engine.setIdentity(
            StoredIdentity(values: ["display_name": "Alice on b"], metadata: ["team": "b"]), of: "alice")
        _ = try await b.engine.block("eve", by: "alice", limit: 10)
        try await b.engine.setExternalUnreadCount(7, of: "bob")
        try await b.engine.setIdentity(StoredIdentity(values: ["display_name": "Carol"]), of: "carol")
        #expect(try await b.engine.setIdentity(nil, of: "carol"))
        #expect(try await b.engine.setIdentity(nil, of: "carol") == false)  // nothing to delete: no operation
        let opsA = try await a.engine.operations(missingFrom: VersionVector(), limit: 256)
        let opsB = try await b.engine.operations(missingFrom: VersionVector(), limit: 256)
        #expect(opsA.count == 3 && opsB.count == 5)
        // The later write of each register, by HLC reading.
        func later(_ kind: UInt8) -> ReplicatedOperation? {
            (opsA + opsB).filter { $0.payload.kind == kind && $0.payload.actor != "carol" }.max { $0.hlc < $1.hlc }
        }
        try await Self.pull(b, from: a)
        try await Self.pull(a, from: b)
        // A third node gets them the other way round, each origin in order.
        let c = try Self.node(3)
        _ = try await c.engine.applyReplicated(opsB)
        _ = try await c.engine.applyReplicated(opsA)
        let digests = try await [a, b, c].asyncMap { try await $0.engine.convergenceDigest() }
        #expect(digests[0].users == digests[1].users && digests[1].users == digests[2].users)
        #expect(digests[0].overall == digests[1].overall && digests[1].overall == digests[2].overall)
        for node in [a, b, c] {
            let (identity, blocks, badge, carol) = try await node.store.read { r in
                (
                    try r.identity(of: "alice"), try r.blocks(of: "alice"), try r.externalUnreadCount(of: "bob"),
                    try r.identity(of: "carol")
                )
            }
            guard case .user(.identity(let winner)) = later(64)?.payload,
                case .user(.badge(let badgeWinner)) = later(66)?.payload
            else {
                Issue.record("no identity or badge operation")
                return
            }
            #expect(
                identity.map { IdentityChange.Identity(values: $0.values, metadata: $0.metadata) } == winner.identity)
            #expect(badge == Int(badgeWinner.externalUnreadCount))
            #expect(Set(blocks) == ["mallory", "eve"])  // two registers, both set
            #expect(carol == nil)
            // The fan-out's own copy of the block lists follows.
            #expect(node.engine.blockLists.recipients(["alice", "bob"], of: "mallory") == ["bob"])
        }
        // An unblock on b after both blocks wins on every node.
        #expect(try await b.engine.unblock("mallory", by: "alice"))
        try await Self.pull(a, from: b)
        _ = try await c.engine.applyReplicated(
            try await b.engine.operations(missingFrom: try await c.engine.versionVector(), limit: 256))
        for node in [a, b, c] {
            #expect(try await node.store.read { r in try r.blocks(of: "alice") } == ["eve"])
            #expect(node.engine.blockLists.recipients(["alice"], of: "mallory") == ["alice"])
        }

        // Sessions revoked on a: bob's session on b (authenticated before) is revoked there and
        // its stream ends with session-revoked.
        let bob = try await b.connect("bob")
        try await a.engine.revokeSessions(of: "bob")
        try await Self.pull(b, from: a)
        let hash = try SHA256Hasher.hash(Array(bob.sessionToken.utf8))
        await #expect(throws: StorageError.self) {
            _ = try await b.store.read { r in try r.session(tokenHash: hash, at: .now()) }
        }
        var revoked = false
        while !revoked {
            if case .error(let e) = try await bob.outbound.expectNext(timeout: .seconds(30)) {
                revoked = e.code == .sessionRevoked
            }
        }
        #expect(revoked)
        await c.close()
    }

    @Test func distinctConversationsCreatedOnTwoNodesAtOnceMergeTheSameWayOnBoth() async throws {
        let a = try Self.node(1)
        let b = try Self.node(2)
        defer {
            Task {
                await a.close()
                await b.close()
            }
        }
        let alice = try await a.connect("alice")
        let bob = try await b.connect("bob")
        let onA = ConversationID.random()
        let onB = ConversationID.random()
        try await alice.command(.createConversation(CreateConversation(conversationID: onA, participants: ["bob"])))
        try await alice.command(
            .sendMessage(SendMessage(messageID: .random(), conversationID: onA, parts: [textPart("a first")])))
        try await bob.command(.createConversation(CreateConversation(conversationID: onB, participants: ["alice"])))
        try await bob.command(
            .sendMessage(SendMessage(messageID: .random(), conversationID: onB, parts: [textPart("b first")])))
        try await Self.pull(b, from: a)
        try await Self.pull(a, from: b)

        let survivor = DistinctResolution.survivor(
            try await a.store.read { r in
                DistinctCandidate(try r.conversation(onA)!.conversation, createdAt: try r.conversation(onA)!.hlc)
            },
            try await b.store.read { r in
                DistinctCandidate(try r.conversation(onB)!.conversation, createdAt: try r.conversation(onB)!.hlc)
            }
        ).id
        let loser = survivor == onA ? onB : onA
        for node in [a, b] {
            let live = try await node.store.read { r in
                try r.distinctConversation(participants: ["alice", "bob"])?.conversation.id
            }
            #expect(live == survivor)
            #expect(try await node.store.read { r in try r.resolvedConversation(loser) } == survivor)
        }
        let stateA = try await Self.state(a, survivor, as: "alice")
        let stateB = try await Self.state(b, survivor, as: "alice")
        #expect(stateA == stateB)
        #expect(stateA?.messages.count == 2)
        // The device that held the loser is told its new identifier.
        let device = loser == onA ? alice : bob
        var seen: [Change] = []
        while !seen.contains(where: { if case .identifierChanged = $0.event { true } else { false } }) {
            seen += try await device.nextChanges()
        }
        #expect(
            seen.contains {
                if case .identifierChanged(let i) = $0.event { i.from == loser && i.to == survivor } else { false }
            })
    }

    /// Concurrent metadata writes, membership changes, messages and receipts on two nodes,
    /// delivered to a third node in random interleavings (each origin's operations in order):
    /// every node ends with the same state. Replay a failure with its seed.
    @Test(arguments: [11, 29, 4242, 90_001, 7] as [UInt64])
    func arrivalOrderDoesNotChangeTheResult(seed: UInt64) async throws {
        let a = try Self.node(1)
        let b = try Self.node(2)
        defer {
            Task {
                await a.close()
                await b.close()
            }
        }
        let alice = try await a.connect("alice")
        let bob = try await b.connect("bob")
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: ["bob", "carol"],
                    options: ConversationOptions(isDistinct: false))))
        try await alice.command(
            .sendMessage(SendMessage(messageID: .random(), conversationID: conversation, parts: [textPart("base")])))
        try await Self.pull(b, from: a)
        let base = try await a.engine.versionVector()

        var random = DifferentialRandom(seed: seed)
        for step in 0..<20 {
            let (client, node) = random.next() % 2 == 0 ? (alice, "a") : (bob, "b")
            switch random.next() % 4 {
            case 0:
                try await client.command(
                    .setMetadata(
                        SetMetadata(
                            requestID: UUID(), conversationID: conversation,
                            keyPath: try MetadataKeyPath(["k\(random.next() % 3)"]), value: .string("\(node)\(step)"))))
            case 1:
                let frame: Frame =
                    random.next() % 2 == 0
                    ? .addParticipants(
                        ParticipantsUpdate(requestID: UUID(), conversationID: conversation, users: ["dave"]))
                    : .removeParticipants(
                        ParticipantsUpdate(requestID: UUID(), conversationID: conversation, users: ["dave"]))
                try await client.command(frame)
            case 2:
                try await client.command(
                    .sendMessage(
                        SendMessage(
                            messageID: .random(), conversationID: conversation, parts: [textPart("\(node)\(step)")])))
            default:
                if case .ack(let ack) = try await client.command(
                    .sendMessage(
                        SendMessage(messageID: .random(), conversationID: conversation, parts: [textPart("r\(step)")]))
                ).reply,
                    let position = ack.position
                {
                    try await client.command(
                        .deliveryReceipt(
                            DeliveryReceipt(requestID: UUID(), conversationID: conversation, upTo: position)))
                }
            }
        }
        let fromA = try await a.engine.operations(missingFrom: base, limit: 256)
        let fromB = try await b.engine.operations(missingFrom: base, limit: 256).filter { $0.origin == NodeID(2) }
        let prefix = try await a.engine.operations(missingFrom: VersionVector(), limit: 256).filter {
            base.counters[$0.origin, default: 0] >= $0.counter
        }

        // Two third nodes, each fed the concurrent operations in its own random interleaving.
        var states: [ConversationState?] = []
        for round in 0..<2 {
            let c = try Self.node(3 + UInt64(round))
            _ = try await c.engine.applyReplicated(prefix)
            var i = 0
            var j = 0
            while i < fromA.count || j < fromB.count {
                let takeA = j == fromB.count || (i < fromA.count && random.next() % 2 == 0)
                _ = try await c.engine.applyReplicated([takeA ? fromA[i] : fromB[j]])
                if takeA { i += 1 } else { j += 1 }
            }
            states.append(try await Self.state(c, conversation, as: "carol"))
            await c.close()
        }
        try await Self.pull(a, from: b)
        try await Self.pull(b, from: a)
        let onA = try await Self.state(a, conversation, as: "carol")
        let onB = try await Self.state(b, conversation, as: "carol")
        #expect(onA != nil, "seed \(seed)")
        #expect(onA == onB, "seed \(seed)")
        #expect(states[0] == onA, "seed \(seed)")
        #expect(states[1] == onA, "seed \(seed)")
    }

    /// Random commands on three nodes while links between them go down and up at random;
    /// operations cross only links that are up (each pull is one node catching up on another).
    /// Among them: the same distinct conversation created on several nodes at once, and
    /// membership changes of distinct conversations and deletions racing those creations. Once every link is
    /// up again and the nodes caught up, their digests are equal.
    /// Replay a failure with its seed.
    @Test(arguments: [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233] as [UInt64])
    func randomOperationsAndPartitionsConverge(seed: UInt64) async throws {
        var random = DifferentialRandom(seed: seed)
        let nodes = try (1...3).map { try Self.node(UInt64($0)) }
        defer { Task { for node in nodes { await node.close() } } }
        let users: [UserID] = ["u1", "u2", "u3"]
        var clients: [[Client]] = []
        for node in nodes {
            var row: [Client] = []
            for user in users { row.append(try await node.connect(user)) }
            clients.append(row)
        }
        var known: [ConversationID] = []
        var positions: [ConversationID: MessagePosition] = [:]
        // Each message with the index of its sender (only the sender updates its parts).
        var sentMessages: [(ConversationID, MessageID, Int)] = []
        var up = [[true, true, true], [true, true, true], [true, true, true]]
        for _ in 0..<160 {
            let n = Int(random.next() % 3)
            let u = Int(random.next() % 3)
            let client = clients[n][u]
            switch random.next() % 13 {
            case 0:
                let others = Set(users.filter { $0 != users[u] && random.chance(0.6) })
                let id = ConversationID.random()
                let distinct = random.chance(0.5)
                try await client.command(
                    .createConversation(
                        CreateConversation(
                            conversationID: id, participants: others.isEmpty ? [users[(u + 1) % 3]] : others,
                            options: ConversationOptions(isDistinct: distinct))))
                known.append(id)
            case 10:
                // The same distinct conversation created on several nodes at once (each by one of
                // its participants): merged or not by what each creation's node had seen.
                let set = Set(users.filter { _ in random.chance(0.6) }).union([users[u]])
                let members = set.count == 1 ? set.union([users[(u + 1) % 3]]) : set
                for node in 0..<3 where node == n || random.chance(0.6) {
                    let creator = random.pick(members.sorted())
                    let index = users.firstIndex(of: creator)!
                    let id = ConversationID.random()
                    try await clients[node][index].command(
                        .createConversation(
                            CreateConversation(
                                conversationID: id, participants: members.subtracting([creator]),
                                options: ConversationOptions(isDistinct: true))))
                    known.append(id)
                }
            case 1, 2, 3:
                guard !known.isEmpty else { continue }
                let conversation = random.pick(known)
                let message = MessageID.random()
                if case .ack(let ack) = try await client.command(
                    .sendMessage(SendMessage(messageID: message, conversationID: conversation, parts: [textPart("m")]))
                ).reply,
                    let position = ack.position
                {
                    positions[conversation] = max(positions[conversation] ?? position, position)
                    sentMessages.append((conversation, message, u))
                }
            case 4:
                // The state about users (Server API) replicates by the same log, last writer wins.
                let engine = nodes[n].engine
                let subject = random.pick(users)
                let other = random.pick(users)
                switch random.next() % 6 {
                case 0: try await engine.setIdentity(StoredIdentity(values: ["display_name": "\(n)\(u)"]), of: subject)
                case 1: try await engine.setIdentity(nil, of: subject)
                case 2: if subject != other { _ = try await engine.block(other, by: subject, limit: 10) }
                case 3: _ = try await engine.unblock(other, by: subject)
                case 4: try await engine.setExternalUnreadCount(Int(random.next() % 50), of: subject)
                default:
                    guard !known.isEmpty else { continue }
                    try await client.command(
                        .setMetadata(
                            SetMetadata(
                                requestID: UUID(), conversationID: random.pick(known),
                                keyPath: try MetadataKeyPath(["k\(random.next() % 2)"]), value: .string("\(n)\(u)"))))
                }
            case 5:
                // Distinct ones too: losing distinctness races creations on other nodes.
                guard !known.isEmpty else { continue }
                let users = Set([random.pick(users)])
                let conversation = random.pick(known)
                try await client.command(
                    random.chance(0.5)
                        ? .addParticipants(
                            ParticipantsUpdate(requestID: UUID(), conversationID: conversation, users: users))
                        : .removeParticipants(
                            ParticipantsUpdate(requestID: UUID(), conversationID: conversation, users: users)))
            case 6:
                guard
                    let conversation = positions.keys.sorted(by: { $0.uuid.uuidString < $1.uuid.uuidString })
                        .randomElement(using: &random), let upTo = positions[conversation]
                else { continue }
                try await client.command(
                    random.chance(0.5)
                        ? .deliveryReceipt(DeliveryReceipt(requestID: UUID(), conversationID: conversation, upTo: upTo))
                        : .markAllRead(MarkAllRead(requestID: UUID(), conversationID: conversation, upTo: upTo)))
            case 7:
                guard !sentMessages.isEmpty else { continue }
                let (conversation, message, _) = random.pick(sentMessages)
                try await client.command(
                    random.chance(0.5)
                        ? .deleteMessage(
                            DeleteMessage(
                                requestID: UUID(), conversationID: conversation, messageID: message,
                                mode: random.chance(0.5) ? .allParticipants : .myDevices))
                        : .markRead(MarkRead(requestID: UUID(), conversationID: conversation, messageID: message)))
            case 9:
                // A part update (UPDATE_MESSAGE_PARTS) by the message's sender on this node: the
                // later one by HLC holds everywhere, whatever the arrival order.
                guard !sentMessages.isEmpty else { continue }
                let (conversation, message, sender) = random.pick(sentMessages)
                var parts = [try MessagePart(text: "updated on \(n) \(random.next() % 1000)")]
                if random.chance(0.5) { parts.append(try MessagePart(text: "second \(random.next() % 1000)")) }
                try await clients[n][sender].command(
                    .updateMessageParts(
                        UpdateMessageParts(
                            requestID: UUID(), conversationID: conversation, messageID: message, parts: parts)))
            case 11:
                // Now and then a conversation deleted for everyone, racing sends and creations.
                guard !known.isEmpty, random.chance(0.3) else { continue }
                try await client.command(
                    .deleteConversation(
                        DeleteConversation(
                            requestID: UUID(), conversationID: random.pick(known), mode: .allParticipants)))
            case 8:
                let other = (n + 1 + Int(random.next() % 2)) % 3
                up[n][other].toggle()
                up[other][n] = up[n][other]
            default:
                let other = (n + 1 + Int(random.next() % 2)) % 3
                if up[n][other] { try await Self.pull(nodes[n], from: nodes[other]) }
            }
        }
        // Heal: catch up until nothing moves.
        var moved = true
        while moved {
            moved = false
            for i in 0..<3 {
                for j in 0..<3 where i != j { if try await Self.pull(nodes[i], from: nodes[j]) > 0 { moved = true } }
            }
        }
        let digests = try await nodes.asyncMap { try await $0.engine.convergenceDigest() }
        if ProcessInfo.processInfo.environment["LAMINA_DEBUG_DIGEST"] != nil,
            digests[0].overall != digests[1].overall || digests[1].overall != digests[2].overall
        {
            for node in nodes {
                let states = try await node.store.read { r in try r.replicatedStates() }
                print("=== node \(node.engine.configuration.nodeID.rawValue)")
                for (_, text) in states { print(text) }
            }
        }
        let merges = try await nodes[0].store.read { r in
            try r.replicatedStates().filter { $0.1.contains(" merged ") }.count
        }
        print("seed \(seed): \(digests[0].conversations.count) conversations, \(merges) merged into a survivor")
        // The run did replicate: operations of every node, several conversations.
        #expect(
            digests[0].vector.counters.count == 3 && digests[0].vector.counters.values.reduce(0, +) >= 25,
            "seed \(seed): \(digests[0].vector)")
        #expect(digests[0].conversations.count >= 2, "seed \(seed)")
        #expect(digests[0].vector == digests[1].vector && digests[1].vector == digests[2].vector, "seed \(seed)")
        #expect(digests[0].users == digests[1].users && digests[1].users == digests[2].users, "seed \(seed)")
        #expect(digests[0].overall == digests[1].overall, "seed \(seed): \(Self.difference(digests[0], digests[1]))")
        #expect(digests[1].overall == digests[2].overall, "seed \(seed): \(Self.difference(digests[1], digests[2]))")
    }

    static func difference(_ a: ConvergenceDigest, _ b: ConvergenceDigest) -> [ConversationID] {
        Set(a.conversations.keys).union(b.conversations.keys).filter { a.conversations[$0] != b.conversations[$0] }
            .sorted { $0.uuid.uuidString < $1.uuid.uuidString }
    }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for element in self { out.append(try await transform(element)) }
        return out
    }
}
