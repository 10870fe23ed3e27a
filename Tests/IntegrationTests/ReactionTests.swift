import Foundation
import LaminaMerge
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaWire
import Testing

/// REACT and `reactions-changed` on a real node over TLS + HTTP/2 (SPEC §6.9, issue 38 item 1):
/// who is told, what a repeated command changes, the refusals, and how history, snapshots and
/// deletion treat reactions.
@Suite struct ReactionTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"
    static let carol: UserID = "carol"

    @discardableResult
    static func react(
        _ session: SyncTestClient, _ conversation: ConversationID, _ message: MessageID, _ key: String,
        _ op: ReactionOp, id: UUID = UUID()
    ) async throws -> Ack {
        try await session.command(
            .react(React(requestID: id, conversationID: conversation, messageID: message, key: key, op: op)), id: id)
    }

    static func reactionChange(
        _ session: SyncTestClient, _ message: MessageID, present: Bool, seq nonzero: Bool = true
    ) async throws -> (Change, ReactionsChanged) {
        let change = try await session.change {
            if case .reactionsChanged(let r) = $0.event { return r.messageID == message && r.present == present }
            return false
        }
        guard case .reactionsChanged(let r) = change.event else { fatalError("unreachable") }
        #expect((change.seq != 0) == nonzero)
        return (change, r)
    }

    static func rows(_ node: TestNode, _ key: String, by user: UserID, on message: MessageID) async throws
        -> [StoredReactionTag]
    {
        try await node.server.store.read { r in try r.reactionTags(of: key, by: user, on: message) }
    }

    static func failure(_ body: () async throws -> Void) async -> WireError.Code? {
        do {
            try await body()
            return nil
        } catch let failed as CommandFailed {
            #expect(!failed.error.isFatal, "\(failed)")
            return failed.error.code
        } catch {
            Issue.record("unexpected \(error)")
            return nil
        }
    }

    @Test func participantsAreToldWhenAReactionAppearsOrGoesAndOnlyThen() async throws {
        let node = try await TestNode.start("reactions-feed")
        let alice = try await node.session(Self.alice, device: UUID())
        let bob = try await node.session(Self.bob, device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: [Self.bob])
        let (message, _) = try await MessagingTests.send(alice, conversation, "react to me")
        _ = try await bob.message(message)

        let first = UUID()
        let ack = try await Self.react(bob, conversation, message, "\u{1F44D}", .add, id: first)
        #expect(ack.conversationID == conversation)
        let (added, change) = try await Self.reactionChange(alice, message, present: true)
        #expect(change.user == Self.bob && change.key == "\u{1F44D}" && change.removedTags.isEmpty)
        #expect(try await Self.rows(node, "\u{1F44D}", by: Self.bob, on: message).map(\.tag) == [change.at])

        // The same command again (same request id): the same ACK, nothing written.
        #expect(try await Self.react(bob, conversation, message, "\u{1F44D}", .add, id: first) == ack)
        // A new add of a present reaction: acknowledged, no second tag, no change.
        try await Self.react(bob, conversation, message, "\u{1F44D}", .add)
        #expect(try await Self.rows(node, "\u{1F44D}", by: Self.bob, on: message).count == 1)

        // Removed: the change names the tag it took away; a second remove changes nothing.
        try await Self.react(bob, conversation, message, "\u{1F44D}", .remove)
        let (removed, gone) = try await Self.reactionChange(alice, message, present: false)
        #expect(gone.removedTags == [change.at] && gone.at > change.at)
        #expect(removed.seq > added.seq)
        try await Self.react(bob, conversation, message, "\u{1F44D}", .remove)
        let tags = try await Self.rows(node, "\u{1F44D}", by: Self.bob, on: message)
        #expect(tags.count == 1 && tags.allSatisfy(\.removed))

        // Alice's feed got exactly two reaction changes (the no-op commands appended none).
        let replay = try await node.session(Self.alice, device: UUID())
        let feed = try await replay.sync(from: 0).changes
        #expect(feed.filter { $0.kind == 20 }.count == 2)
        // A session without the reactions feature skips their seqs.
        let old = try await node.session(Self.alice, device: UUID(), features: FeatureSet.all.subtracting(.reactions))
        let oldFeed = try await old.sync(from: 0).changes
        #expect(oldFeed.allSatisfy { $0.kind != 20 })
        #expect(oldFeed.count == feed.count - 2)
        for s in [alice, bob, replay, old] { await s.close() }
        await node.stop()
    }

    @Test func refusalsCarryTheirCodesAndTheStreamGoesOn() async throws {
        let node = try await TestNode.start("reactions-refusals")
        let alice = try await node.session(Self.alice, device: UUID())
        let bob = try await node.session(Self.bob, device: UUID())
        let carol = try await node.session(Self.carol, device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: [Self.bob])
        let (message, _) = try await MessagingTests.send(alice, conversation, "hello")
        let (deleted, _) = try await MessagingTests.send(alice, conversation, "gone soon")
        let deletion = UUID()
        try await alice.command(
            .deleteMessage(
                DeleteMessage(
                    requestID: deletion, conversationID: conversation, messageID: deleted, mode: .allParticipants)),
            id: deletion)

        #expect(
            await Self.failure { try await Self.react(carol, conversation, message, "+1", .add) } == .notAParticipant)
        #expect(
            await Self.failure { try await Self.react(alice, conversation, message, "", .add) } == .invalidReactionKey)
        #expect(
            await Self.failure { try await Self.react(alice, conversation, message, "a\u{7}b", .add) }
                == .invalidReactionKey)
        #expect(await Self.failure { try await Self.react(alice, conversation, .random(), "+1", .add) } == .notFound)
        #expect(await Self.failure { try await Self.react(alice, conversation, deleted, "+1", .add) } == .notFound)
        let removal = UUID()
        try await alice.command(
            .removeParticipants(
                ParticipantsUpdate(requestID: removal, conversationID: conversation, users: [Self.bob])),
            id: removal)
        #expect(
            await Self.failure { try await Self.react(bob, conversation, message, "+1", .add) } == .removedParticipant)
        // Without the reactions feature: `forbidden`, not fatal.
        let old = try await node.session(Self.alice, device: UUID(), features: FeatureSet.all.subtracting(.reactions))
        #expect(await Self.failure { try await Self.react(old, conversation, message, "+1", .add) } == .forbidden)
        // Every stream still serves: a valid reaction goes through.
        try await Self.react(alice, conversation, message, "ok", .add)
        #expect(try await Self.rows(node, "ok", by: Self.alice, on: message).count == 1)
        for s in [alice, bob, carol, old] { await s.close() }
        await node.stop()
    }

    @Test func historyAndSnapshotsCarryReactionsAndDeletionDropsThem() async throws {
        let node = try await TestNode.start("reactions-history")
        let alice = try await node.session(Self.alice, device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: [Self.bob])
        let (message, _) = try await MessagingTests.send(alice, conversation, "with reactions")
        let (plain, _) = try await MessagingTests.send(alice, conversation, "without")
        try await Self.react(alice, conversation, message, "+1", .add)
        try await Self.react(alice, conversation, message, "\u{1F389}", .add)
        let bob = try await node.session(Self.bob, device: UUID())
        try await Self.react(bob, conversation, message, "+1", .add)

        // FETCH_HISTORY: the page's messages, then its reactions (seq 0).
        let fetch = UUID()
        let before = bob.seenChanges.count
        bob.send(.fetchHistory(FetchHistory(requestID: fetch, conversationID: conversation, policy: .complete)))
        _ = try await bob.answer(to: fetch)
        let answer = Array(bob.seenChanges.dropFirst(before)).filter { $0.seq == 0 }
        let kinds = answer.map(\.kind)
        #expect(kinds == [6, 6, 20, 20, 20], "\(kinds)")
        let present = Set(
            answer.compactMap { change -> String? in
                guard case .reactionsChanged(let r) = change.event, r.present, r.messageID == message else {
                    return nil
                }
                return "\(r.user):\(r.key)"
            })
        #expect(present == ["alice:+1", "alice:\u{1F389}", "bob:+1"])
        #expect(
            !answer.contains { if case .reactionsChanged(let r) = $0.event { r.messageID == plain } else { false } })

        // A snapshot: the latest message's reactions follow the conversation's changes.
        try await Self.react(alice, conversation, plain, "latest", .add)
        let fresh = try await node.connect()
        _ = try await fresh.hello(features: FeatureSet.all.union(.snapshots))
        _ = try await fresh.authenticate(user: Self.bob, device: UUID(), dev: node.dev)
        let snapshot = try await fresh.sync(from: 0).changes
        let reactions = snapshot.filter { $0.kind == 20 }
        #expect(reactions.count == 1 && reactions.allSatisfy { $0.seq == 0 }, "\(snapshot.map(\.kind))")
        if case .reactionsChanged(let r)? = reactions.first?.event {
            #expect(r.messageID == plain && r.key == "latest" && r.present)
        }

        // Deleting the message for everyone drops its reactions.
        let deletion = UUID()
        try await alice.command(
            .deleteMessage(
                DeleteMessage(
                    requestID: deletion, conversationID: conversation, messageID: message, mode: .allParticipants)),
            id: deletion)
        let left = try await node.server.store.read { r in try r.presentReactions(on: [message, plain]) }
        #expect(left.map(\.message) == [plain])
        #expect(try await Self.rows(node, "+1", by: Self.alice, on: message).isEmpty)
        for s in [alice, bob, fresh] { await s.close() }
        await node.stop()
    }
}
