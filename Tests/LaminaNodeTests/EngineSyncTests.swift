import Foundation
import LaminaModel
import LaminaWire
import NIOConcurrencyHelpers
import Testing

@testable import LaminaNode

@Suite struct EngineSyncTests {
    /// Alice creates a conversation with Bob and sends `count` messages; returns their ids.
    func conversation(_ h: EngineHarness, _ alice: Client, receipts: Bool = true, count: Int) async throws -> (
        ConversationID, [MessageID]
    ) {
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: ["bob"],
                    options: ConversationOptions(
                        isDistinct: false, deliveryReceiptsEnabled: receipts, readReceiptsEnabled: receipts))))
        var ids: [MessageID] = []
        for i in 0..<count {
            let id = MessageID.random()
            let (reply, _) = try await alice.command(
                .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: [textPart("m\(i)")])))
            #expect(reply.ack != nil)
            ids.append(id)
        }
        return (conversation, ids)
    }

    func createdIDs(_ changes: [Change]) -> [MessageID] {
        changes.compactMap { if case .messageCreated(let m) = $0.event { m.id } else { nil } }
    }

    @Test func offlineDeviceCatchesUpFromItsCursor() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice", sync: false)
        let bobDevice = UUID()
        let bob = try await h.connect("bob", device: bobDevice)
        let (conversation, first) = try await conversation(h, alice, count: 3)
        var seen: [Change] = []
        while createdIDs(seen).count < 3 { seen += try await bob.nextChanges() }
        let cursor = try #require(seen.last?.seq)
        bob.session.closed()
        // Bob is offline: 300 more messages (more than one batch).
        var later: [MessageID] = []
        for i in 0..<300 {
            let id = MessageID.random()
            try await alice.command(
                .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: [textPart("late \(i)")])))
            later.append(id)
        }
        let back = try await h.connect("bob", device: bobDevice, sync: false)
        let (changes, reached) = try await back.sync(from: cursor)
        #expect(createdIDs(changes) == later)
        #expect(changes.map(\.seq) == Array((cursor + 1)...(cursor + 300)))
        #expect(reached == cursor + 300)
        #expect(
            try await h.store.read { r in try r.cursor(of: bobDevice.uuidString.lowercased(), user: "bob") } == cursor)
        #expect(!first.isEmpty)
        // Live after the backlog.
        let live = MessageID.random()
        try await alice.command(
            .sendMessage(SendMessage(messageID: live, conversationID: conversation, parts: [textPart("live")])))
        #expect(createdIDs(try await back.nextChanges()) == [live])
        await h.close()
    }

    /// A backlog of several feed pages (``NodeEngine/feedPage``; each read while the page before
    /// drains, the last one full so the read after it finds nothing) arrives in order, once.
    @Test(arguments: [2, 3])
    func aBacklogOfSeveralPagesArrivesInOrderOnce(pages: Int) async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice", sync: false)
        // With the conversation's entry: two whole pages (then a read that finds nothing), or
        // a third page that is not full.
        let count = pages * NodeEngine.feedPage - (pages == 2 ? 1 : 5)
        let (_, ids) = try await conversation(h, alice, count: count)
        let bob = try await h.connect("bob", features: FeatureSet.all.subtracting(.snapshots), sync: false)
        let (changes, reached) = try await bob.sync(from: 0)
        #expect(createdIDs(changes) == ids)
        #expect(changes.map(\.seq) == Array(1...UInt64(count + 1)))  // the conversation, then the messages
        #expect(reached == UInt64(count + 1))
        #expect(h.engine.answers.held == 0)
        await h.close()
    }

    /// With both receipt switches off each participant is shown only their own status of a
    /// message: live (one encoding for every feed, the viewer's status put in) exactly as a
    /// new device reads it from the store; with a switch on, every status as it is.
    @Test(arguments: [true, false])
    func liveMessagesShowEachViewerWhatTheStoreShowsThem(receipts: Bool) async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice", sync: false)
        let viewers: [UserID] = ["bob", "carol", "dave"]
        var live: [UserID: Client] = [:]
        for viewer in viewers { live[viewer] = try await h.connect(viewer) }
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: Set(viewers),
                    options: ConversationOptions(
                        isDistinct: false, deliveryReceiptsEnabled: receipts, readReceiptsEnabled: receipts))))
        var ids: [MessageID] = []
        for i in 0..<3 {
            let id = MessageID.random()
            try await alice.command(
                .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: [textPart("m\(i)")])))
            ids.append(id)
        }
        for viewer in viewers {
            let client = try #require(live[viewer])
            var seen: [Change] = []
            while createdIDs(seen).count < ids.count { seen += try await client.nextChanges() }
            let fresh = try await h.connect(viewer, features: FeatureSet.all.subtracting(.snapshots), sync: false)
            let (stored, _) = try await fresh.sync(from: 0)
            let liveMessages = seen.filter { if case .messageCreated = $0.event { true } else { false } }
            let storedMessages = stored.filter { if case .messageCreated = $0.event { true } else { false } }
            #expect(liveMessages == storedMessages, "\(viewer)")
            for change in liveMessages {
                guard case .messageCreated(let m) = change.event else { continue }
                #expect(m.recipientStatus[viewer] == .sent, "\(viewer)'s own status")
                #expect(
                    m.recipientStatus.filter { $0.key != viewer }.values.allSatisfy {
                        receipts ? $0 != .invalid : $0 == .invalid
                    })
                // The bytes sent are what the event the test sees encodes to.
                let sent = try Frame.change(change).encoded()
                #expect(try Frame.decode(exactly: sent) == .change(Change(seq: change.seq, event: change.event)))
            }
        }
        await h.close()
    }

    /// Commits publish in the order they finish, not in seq order: a live session must still
    /// get its feed in seq order, each entry once, with a gap filled from the store.
    @Test func liveEntriesPublishedOutOfOrderReachTheDeviceInFeedOrderOnce() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice", sync: false)
        let bob = try await h.connect("bob")
        let (conversation, _) = try await conversation(h, alice, count: 1)
        var seen: [Change] = []
        while createdIDs(seen).count < 1 { seen += try await bob.nextChanges() }
        let through = try #require(seen.last?.seq)
        // Two more messages whose publication to Bob is lost for now (as if still in flight).
        bob.session.state.withLockedValue { $0.live = false }
        for i in 0..<2 {
            try await alice.command(
                .sendMessage(
                    SendMessage(
                        messageID: MessageID.random(), conversationID: conversation, parts: [textPart("late \(i)")])))
        }
        bob.session.state.withLockedValue { $0.live = true }
        let stored = try await h.store.read { r in try r.feed(of: "bob", after: through, limit: 10) }.map {
            try FeedCoding.decode($0)
        }
        #expect(stored.map(\.seq) == [through + 1, through + 2])
        // The later commit publishes first: Bob gets both, in order; the earlier one then adds nothing.
        h.engine.publish([FeedChange(user: "bob", seq: stored[1].seq, event: stored[1].event)])
        var received: [Change] = []
        while received.count < 2 { received += try await bob.nextChanges() }
        #expect(received.map(\.seq) == [through + 1, through + 2])
        h.engine.publish([FeedChange(user: "bob", seq: stored[0].seq, event: stored[0].event)])
        let ping = Ping(payload: 9)
        bob.session.receive(.ping(ping))
        #expect(try await bob.outbound.expectNext() == .pong(ping))  // nothing was sent before the PONG
        await h.close()
    }

    @Test func historyPolicies() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice", sync: false)
        let bob = try await h.connect("bob", sync: false)
        let (conversation, ids) = try await conversation(h, alice, count: 6)
        func fetch(_ policy: LaminaWire.HistoryPolicy, before: MessagePosition? = nil) async throws -> [MessageID] {
            let (reply, changes) = try await bob.command(
                .fetchHistory(
                    FetchHistory(requestID: UUID(), conversationID: conversation, policy: policy, before: before)))
            #expect(reply.ack != nil, "\(reply)")
            #expect(changes.allSatisfy { $0.seq == 0 })
            return createdIDs(changes)
        }
        #expect(try await fetch(.complete) == ids)
        #expect(try await fetch(.lastN(2)) == Array(ids.suffix(2)))
        #expect(try await fetch(.unreadOnly) == ids)
        let positions = try await h.store.read { r in try ids.map { try r.message($0)!.message.position! } }
        try await bob.command(
            .markAllRead(MarkAllRead(requestID: UUID(), conversationID: conversation, upTo: positions[3])))
        #expect(try await fetch(.unreadOnly) == Array(ids[4...]))
        #expect(try await fetch(.lastN(2), before: positions[4]) == [ids[2], ids[3]])
        #expect(try await fetch(.complete, before: positions[2]) == [ids[0], ids[1]])
        await h.close()
    }

    @Test func receiptsReachTheSenderUnlessDisabled() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice")
        let bob = try await h.connect("bob")
        let (conversation, ids) = try await conversation(h, alice, count: 1)
        var aliceChanges: [Change] = []
        while createdIDs(aliceChanges).isEmpty { aliceChanges += try await alice.nextChanges() }
        var bobChanges: [Change] = []
        while createdIDs(bobChanges).isEmpty { bobChanges += try await bob.nextChanges() }
        guard case .messageCreated(let m) = bobChanges.last?.event else {
            Issue.record("no message")
            return
        }
        #expect(m.recipientStatus["bob"] == .sent)
        #expect(m.recipientStatus["alice"] == .read)

        try await bob.command(
            .deliveryReceipt(DeliveryReceipt(requestID: UUID(), conversationID: conversation, upTo: m.position!)))
        // One status-up-to change for the whole range, not one change per message.
        #expect(
            try await alice.nextChanges().map(\.event) == [
                .statusUpTo(
                    StatusUpTo(conversationID: conversation, user: "bob", status: .delivered, upTo: m.position!))
            ])
        #expect(try await h.store.read { r in try r.recipientStatus(of: ids[0]) }["bob"] == .delivered)
        try await bob.command(.markRead(MarkRead(requestID: UUID(), conversationID: conversation, messageID: ids[0])))
        #expect(
            try await alice.nextChanges().map(\.event) == [
                .messageStatusChanged(
                    MessageStatusChanged(conversationID: conversation, messageID: ids[0], user: "bob", status: .read))
            ])
        #expect(try await h.store.read { r in try r.recipientStatus(of: ids[0]) }["bob"] == .read)

        // Receipts disabled: the status still moves for the reader, the sender hears nothing.
        let (quiet, quietIDs) = try await self.conversation(h, alice, receipts: false, count: 1)
        aliceChanges = []
        while createdIDs(aliceChanges).isEmpty { aliceChanges += try await alice.nextChanges() }
        let position = try await h.store.read { r in try r.message(quietIDs[0])!.message.position! }
        let (delivered, _) = try await bob.command(
            .deliveryReceipt(DeliveryReceipt(requestID: UUID(), conversationID: quiet, upTo: position)))
        #expect(delivered.ack != nil)
        try await bob.command(.markRead(MarkRead(requestID: UUID(), conversationID: quiet, messageID: quietIDs[0])))
        let ping = UInt64.random(in: 1...UInt64.max)
        alice.session.receive(.ping(Ping(payload: ping)))
        #expect(try await alice.outbound.expectNext() == .pong(Ping(payload: ping)))
        #expect(try await h.store.read { r in try r.recipientStatus(of: quietIDs[0]) }["bob"] == .read)
        await h.close()
    }

    @Test func typingIsRelayedNotStored() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice")
        let bob = try await h.connect("bob")
        let (conversation, _) = try await conversation(h, alice, count: 1)
        var bobChanges: [Change] = []
        while createdIDs(bobChanges).isEmpty { bobChanges += try await bob.nextChanges() }
        let head = try await h.store.read { r in try r.feedHead(of: "bob") }
        alice.session.receive(.typing(Typing(conversationID: conversation, state: .started)))
        let typing = try await bob.nextChanges()
        #expect(
            typing == [
                Change(
                    seq: 0, event: .typing(TypingChanged(conversationID: conversation, user: "alice", state: .started)))
            ])
        #expect(try await h.store.read { r in try r.feedHead(of: "bob") } == head)
        await h.close()
    }
}

@Suite struct EngineSnapshotAndShutdownTests {
    @Test func cursorBelowTheRetainedFeedGetsASnapshot() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice", sync: false)
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: ["bob"], options: ConversationOptions(isDistinct: false)
                )))
        var sent: [MessageID] = []
        for i in 0..<3 {
            sent.append(.random())
            try await alice.command(
                .sendMessage(SendMessage(messageID: sent[i], conversationID: conversation, parts: [textPart("\(i)")])))
        }
        let head = try await h.store.read { r in try r.feedHead(of: "bob") }
        #expect(head == 4)
        try await h.store.write { tx in _ = try tx.pruneFeed(of: "bob", through: 2) }
        let bob = try await h.connect("bob", sync: false)
        let (changes, cursor) = try await bob.sync(from: 0)
        #expect(cursor == head)
        // The conversation, its latest message and bob's counts, outside the feed (SPEC §6.3).
        #expect(changes.map(\.seq) == [0, 0, 0])
        guard changes.count == 3, case .conversationCreated(let c) = changes[0].event,
            case .messageCreated(let last) = changes[1].event,
            case .conversationUpdated(let counts) = changes[2].event
        else {
            Issue.record("no snapshot: \(changes)")
            return
        }
        #expect(c.id == conversation)
        #expect(last.id == sent[2])
        #expect(
            counts
                == ConversationUpdated(
                    conversationID: conversation, isDistinct: false, deliveryReceiptsEnabled: true,
                    messageCount: 3, unreadCount: 3, lastMessageID: sent[2]))
        // Every entry pruned: still a snapshot, not an empty backlog that leaves the cursor behind.
        try await h.store.write { tx in _ = try tx.pruneFeed(of: "bob", through: head) }
        let again = try await h.connect("bob", sync: false)
        let (all, cursorAgain) = try await again.sync(from: 1)
        #expect(cursorAgain == head)
        #expect(all.count == 3)
        await h.close()
    }

    @Test func aNewDeviceAskingForSnapshotsGetsOneInsteadOfTheFeed() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice", sync: false)
        var conversations: [ConversationID] = []
        for _ in 0..<2 {
            let conversation = ConversationID.random()
            conversations.append(conversation)
            try await alice.command(
                .createConversation(
                    CreateConversation(
                        conversationID: conversation, participants: ["bob"],
                        options: ConversationOptions(isDistinct: false))))
            for i in 0..<4 {
                try await alice.command(
                    .sendMessage(
                        SendMessage(messageID: .random(), conversationID: conversation, parts: [textPart("\(i)")])))
            }
        }
        let head = try await h.store.read { r in try r.feedHead(of: "bob") }
        #expect(head == 10)
        // Without the feature, cursor 0 is the whole feed.
        let old = try await h.connect("bob", sync: false)
        #expect(try await old.sync(from: 0).changes.count == 10)
        // With it, per conversation: created, latest message, counts; then the head.
        // (Presence, also supported, would add its own seq 0 changes: not asked for here.)
        let fresh = try await h.connect("bob", features: FeatureSet.supported.subtracting(.presence), sync: false)
        let (changes, cursor) = try await fresh.sync(from: 0)
        #expect(cursor == head)
        #expect(changes.count == 6)
        #expect(changes.allSatisfy { $0.seq == 0 })
        let counted = changes.compactMap { change -> ConversationUpdated? in
            if case .conversationUpdated(let u) = change.event { return u } else { return nil }
        }
        #expect(counted.map(\.conversationID) == conversations)
        #expect(counted.allSatisfy { $0.messageCount == 4 && $0.unreadCount == 4 })
        // Live from the head on: a new message is one feed entry, and no counts (the device counts it).
        try await alice.command(
            .sendMessage(SendMessage(messageID: .random(), conversationID: conversations[0], parts: [textPart("new")])))
        let live = try await fresh.nextChanges()
        #expect(live.count == 1)
        #expect(live.first?.seq == head + 1)
        guard case .messageCreated = live.first?.event else {
            Issue.record("expected the message, got \(live)")
            return
        }
        #expect(try await h.store.read { r in try r.feedHead(of: "bob") } == head + 1)
        await h.close()
    }

    @Test func rangeReadsAndMembershipChangesSendCountsToWhomTheyMove() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice")
        let bob = try await h.connect("bob")
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(CreateConversation(conversationID: conversation, participants: ["bob"])))
        var positions: [MessagePosition] = []
        for i in 0..<4 {
            let (reply, _) = try await alice.command(
                .sendMessage(SendMessage(messageID: .random(), conversationID: conversation, parts: [textPart("\(i)")]))
            )
            positions.append(try #require(reply.ack?.position))
        }
        var seen = 0
        while seen < 5 { seen += try await bob.nextChanges().count }
        // Bob reads up to the second message: a status-up-to for all, counts for bob only.
        let (_, bobChanges) = try await bob.command(
            .markAllRead(MarkAllRead(requestID: UUID(), conversationID: conversation, upTo: positions[1])))
        var changes = bobChanges
        while changes.count < 2 { changes += try await bob.nextChanges() }
        guard case .conversationUpdated(let counts) = changes.last?.event else {
            Issue.record("no counts: \(changes)")
            return
        }
        #expect(counts.messageCount == 4 && counts.unreadCount == 2)
        // Alice (her own messages' changes first) gets the status-up-to and no counts.
        var toAlice: [Change] = []
        while !toAlice.contains(where: { if case .statusUpTo = $0.event { true } else { false } }) {
            toAlice += try await alice.nextChanges()
        }
        #expect(!toAlice.contains { if case .conversationUpdated = $0.event { true } else { false } })
        // Adding carol: she gets the conversation, then her counts; the others their counts with
        // the distinct flag cleared.
        let carol = try await h.connect("carol")
        try await alice.command(
            .addParticipants(ParticipantsUpdate(requestID: UUID(), conversationID: conversation, users: ["carol"])))
        var carolChanges: [Change] = []
        while carolChanges.count < 3 { carolChanges += try await carol.nextChanges() }
        guard case .conversationUpdated(let carolCounts) = carolChanges[2].event else {
            Issue.record("no counts for carol: \(carolChanges)")
            return
        }
        #expect(carolCounts.messageCount == 4 && carolCounts.unreadCount == 4 && !carolCounts.isDistinct)
        var bobAfter: [Change] = []
        while bobAfter.count < 2 { bobAfter += try await bob.nextChanges() }
        guard case .conversationUpdated(let bobCounts) = bobAfter[1].event else {
            Issue.record("no counts for bob: \(bobAfter)")
            return
        }
        #expect(bobCounts.unreadCount == 2 && !bobCounts.isDistinct)
        await h.close()
    }

    @Test func shutdownClosesSessionsWithShuttingDown() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice")
        await h.engine.shutdown()
        #expect(try await alice.outbound.expectNext().errorFrame?.code == .shuttingDown)
        #expect(alice.outbound.isClosed)
        #expect(h.engine.sessionCount == 0)
        let late = RecordingOutbound()
        _ = h.engine.openSession(outbound: late)
        #expect(try await late.expectNext().errorFrame?.code == .shuttingDown)
        await h.close()
    }
}
