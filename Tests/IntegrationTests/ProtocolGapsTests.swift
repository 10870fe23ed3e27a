import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// Behaviours an implementer writing a client from `Protocol/` alone found at odds with the
/// text (issue 31), pinned against a real node.
@Suite struct ProtocolGapsTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    /// SPEC §6.1: TYPING naming an alias (a creation's id that resolved to an existing
    /// distinct conversation) is relayed as typing in the conversation it resolved to.
    @Test func typingNamingAnAliasIsRelayedForTheSurvivor() async throws {
        let node = try await TestNode.start("gaps-typing-alias")
        let alice = try await node.session(Self.alice, device: UUID())
        let bob = try await node.session(Self.bob, device: UUID())
        let existing = ConversationID.random()
        let options = ConversationOptions(isDistinct: true)
        try await alice.command(
            .createConversation(
                CreateConversation(conversationID: existing, participants: [Self.bob], options: options)),
            id: existing.uuid)
        // Another device creates "the" distinct conversation under its own id and types there
        // at once (pipelined behind the creation).
        let device = try await node.session(Self.alice, device: UUID())
        let alias = ConversationID.random()
        device.send(
            .createConversation(CreateConversation(conversationID: alias, participants: [Self.bob], options: options)),
            .typing(Typing(conversationID: alias, state: .started)))
        let ack = try await device.answer(to: alias.uuid)
        guard case .ack(let created) = ack else { throw UnexpectedEvent(expected: "ACK", got: .frame(ack)) }
        #expect(created.conversationID == existing)
        let typing = try await bob.change { if case .typing = $0.event { true } else { false } }
        #expect(typing.event == .typing(TypingChanged(conversationID: existing, user: Self.alice, state: .started)))
        // And once more after the ACK.
        device.send(.typing(Typing(conversationID: alias, state: .paused)))
        let paused = try await bob.change {
            $0.event == .typing(TypingChanged(conversationID: existing, user: Self.alice, state: .paused))
        }
        #expect(paused.seq == 0)
        for s in [alice, bob, device] { await s.close() }
        await node.stop()
    }

    /// SPEC §5.7: before HELLO, an ERROR (fatal or not) is answered with a fatal
    /// `unexpected-frame`; after HELLO a non-fatal one is logged and the session goes on.
    @Test(arguments: [false, true]) func anErrorBeforeHelloIsAFatalUnexpectedFrame(_ fatal: Bool) async throws {
        let node = try await TestNode.start("gaps-error-before-hello")
        let client = try await node.connect()
        client.send(.error(ErrorFrame(code: .internalError, reason: "a client-side failure", isFatal: fatal)))
        let frames = try await client.framesUntilEnd()
        #expect(frames.count == 1)
        guard case .error(let error)? = frames.first else {
            Issue.record("expected a fatal ERROR, got \(frames)")
            return
        }
        #expect(error.code == .unexpectedFrame)
        #expect(error.isFatal)
        await client.close()

        let open = try await node.connect()
        _ = try await open.hello()
        open.send(.error(ErrorFrame(code: .internalError, reason: "a client-side failure", isFatal: false)))
        open.send(.ping(Ping(payload: 7)))
        #expect(try await open.nextFrame() == .pong(Ping(payload: 7)))
        await open.close()
        await node.stop()
    }

    /// SPEC §6.3: the unread-only policy starts at the first message the user has not read,
    /// not at the user's own messages after their read marker (which are read).
    @Test func unreadOnlyStartsAtTheFirstUnreadMessageNotAtTheUsersOwn() async throws {
        let node = try await TestNode.start("gaps-unread-only")
        let alice = try await node.session(Self.alice, device: UUID())
        let bob = try await node.session(Self.bob, device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: [Self.bob])
        let (fromBob, _) = try await MessagingTests.send(bob, conversation, "read by alice")
        let mark = UUID()
        try await alice.command(
            .markRead(MarkRead(requestID: mark, conversationID: conversation, messageID: fromBob)), id: mark)
        let (own1, _) = try await MessagingTests.send(alice, conversation, "alice's own 1")
        let (own2, _) = try await MessagingTests.send(alice, conversation, "alice's own 2")
        let (unread, _) = try await MessagingTests.send(bob, conversation, "unread")
        let (own3, _) = try await MessagingTests.send(alice, conversation, "alice's own after")

        let read = UUID()
        let answers = try await OrderedSessionTests.pipeline(
            alice, [OrderedSessionTests.fetch(read, conversation, .unreadOnly)])
        #expect(answers.histories[read] == [unread, own3])
        // The complete history reports the skipped messages read for alice.
        #expect(try await PipelinedCreationTests.history(alice, conversation) == [fromBob, own1, own2, unread, own3])

        // Marking one message read leaves the earlier unread one where it was.
        let (last, lastAck) = try await MessagingTests.send(bob, conversation, "the last")
        let markOne = UUID()
        try await alice.command(
            .markRead(MarkRead(requestID: markOne, conversationID: conversation, messageID: last)), id: markOne)
        let one = UUID()
        let afterOne = try await OrderedSessionTests.pipeline(
            alice, [OrderedSessionTests.fetch(one, conversation, .unreadOnly)])
        #expect(afterOne.histories[one] == [unread, own3, last])

        // Everything read (the read marker), then an own message: nothing answered.
        let markAll = UUID()
        try await alice.command(
            .markAllRead(
                MarkAllRead(requestID: markAll, conversationID: conversation, upTo: try #require(lastAck.position))),
            id: markAll)
        _ = try await MessagingTests.send(alice, conversation, "own, after everything")
        let again = UUID()
        let none = try await OrderedSessionTests.pipeline(
            alice, [OrderedSessionTests.fetch(again, conversation, .unreadOnly)])
        #expect(none.histories[again] == nil)
        #expect(none.errors.isEmpty)
        for s in [alice, bob] { await s.close() }
        await node.stop()
    }

    /// SPEC §6.2: UPDATE_MESSAGE_PARTS has SEND_MESSAGE's limits, `duplicate-part` included.
    @Test func aPartUpdateWithDuplicatePartIDsIsADuplicatePart() async throws {
        let node = try await TestNode.start("gaps-duplicate-part")
        let alice = try await node.session(Self.alice, device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: [Self.bob])
        let (message, _) = try await MessagingTests.send(alice, conversation, "first")
        let part = try MessagePart(text: "twice")
        let update = UUID()
        let frame = Frame.updateMessageParts(
            UpdateMessageParts(
                requestID: update, conversationID: conversation, messageID: message, parts: [part, part]))
        await #expect {
            try await alice.command(frame, id: update)
        } throws: { error in
            (error as? CommandFailed)?.error.code == .duplicatePart
        }
        let sent = MessageID.random()
        let send = Frame.sendMessage(SendMessage(messageID: sent, conversationID: conversation, parts: [part, part]))
        await #expect {
            try await alice.command(send, id: sent.uuid)
        } throws: { error in
            (error as? CommandFailed)?.error.code == .duplicatePart
        }
        await alice.close()
        await node.stop()
    }

    /// SPEC §5.1/§5.7: a frame behind a feature the session did not agree is not carried out
    /// and gets a non-fatal `forbidden` (TYPING without `requestID`); the stream goes on.
    @Test func aFrameBehindAFeatureNotAgreedIsForbidden() async throws {
        let node = try await TestNode.start("gaps-features")
        let full = try await node.session(Self.alice, device: UUID())
        let conversation = try await MessagingTests.conversation(full, with: [Self.bob])
        let (message, ack) = try await MessagingTests.send(full, conversation, "hello")
        let bare = try await node.connect()
        bare.send(.hello(Hello(features: [], agent: "no-features")))
        guard case .welcome(let welcome) = try await bare.nextFrame() else {
            throw UnexpectedEvent(expected: "WELCOME", got: .end)
        }
        #expect(welcome.features.isEmpty)
        _ = try await bare.authenticate(user: Self.alice, device: UUID(), dev: node.dev)
        let requests: [Frame] = [
            .fetchHistory(FetchHistory(requestID: UUID(), conversationID: conversation, policy: .complete)),
            .deliveryReceipt(
                DeliveryReceipt(requestID: UUID(), conversationID: conversation, upTo: try #require(ack.position))),
            .updateMessageParts(
                UpdateMessageParts(
                    requestID: UUID(), conversationID: conversation, messageID: message,
                    parts: [try MessagePart(text: "x")])),
            .blockUser(BlockUser(requestID: UUID(), user: "mallory", blocking: true)),
        ]
        bare.send(.typing(Typing(conversationID: conversation, state: .started)))
        for request in requests { bare.send(request) }
        var refused: [UUID?] = []
        while refused.count < requests.count + 1 {
            guard case .error(let error) = try await bare.nextFrame() else { continue }
            #expect(error.code == .forbidden && !error.isFatal, "\(error)")
            refused.append(error.requestID)
        }
        #expect(refused == [nil] + requests.map(\.commandID))
        bare.send(.ping(Ping(payload: 3)))
        #expect(try await bare.nextFrame() == .pong(Ping(payload: 3)))
        // Nothing was carried out: the message keeps its one part.
        #expect(try await PipelinedCreationTests.history(full, conversation) == [message])
        for s in [full, bare] { await s.close() }
        await node.stop()
    }

    /// SPEC §5.2: a stream's nonce bound counts its open nonces: a client that fails to log in
    /// again and again (each failure uses its nonce up) can still ask for one.
    @Test func failedLoginsDoNotUseUpTheStreamsNonces() async throws {
        let node = try await TestNode.start("gaps-nonces")
        let stranger = try DevIdentityProvider.loadOrCreate(in: Fixtures.temporaryDirectory("gaps-stranger-key"))
        let client = try await node.connect()
        _ = try await client.hello()
        // Four failed logins, each with a nonce asked for (the issue's case: a fifth request
        // ended the stream when every nonce issued counted).
        var unasked: Nonce?
        for _ in 0..<4 {
            let nonce = try await client.nonce()
            let refused = try await client.authenticate(
                token: try stranger.mintToken(user: "alice", nonce: nonce), device: UUID())
            let (error, fresh) = try #require(try await NonceTableTests.refusal(refused, on: client))
            #expect(error.code == .badSignature)
            unasked = fresh
        }
        // A client that tries again with the nonce each failure brings never reaches the bound.
        for _ in 0..<(2 * NonceLimits().perStream) {
            let nonce = try #require(unasked).nonce
            let refused = try await client.authenticate(
                token: try stranger.mintToken(user: "alice", nonce: nonce), device: UUID())
            let (error, fresh) = try #require(try await NonceTableTests.refusal(refused, on: client))
            #expect(error.code == .badSignature)
            unasked = fresh
        }
        let last = try await client.nonce()
        guard
            case .authenticated = try await client.authenticate(
                token: try node.dev.mintToken(user: "alice", nonce: last), device: UUID())
        else {
            Issue.record("the stream could not log in after its failures")
            return
        }
        await client.close()
        await node.stop()
    }

    /// SPEC §6.1/§6.4: a removed participant's devices are told the conversation changed
    /// (its counts, with the distinct flag it cleared).
    @Test func aRemovedParticipantGetsTheConversationsCounts() async throws {
        let node = try await TestNode.start("gaps-removed-counts")
        let alice = try await node.session(Self.alice, device: UUID())
        let bob = try await node.session(Self.bob, device: UUID())
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: [Self.bob, "carol"],
                    options: ConversationOptions(isDistinct: true))), id: conversation.uuid)
        _ = try await MessagingTests.send(alice, conversation, "hi")
        let remove = UUID()
        try await alice.command(
            .removeParticipants(ParticipantsUpdate(requestID: remove, conversationID: conversation, users: [Self.bob])),
            id: remove)
        let counts = try await bob.change {
            if case .conversationUpdated(let c) = $0.event { return c.conversationID == conversation && !c.isDistinct }
            return false
        }
        #expect(counts.seq > 0)
        for s in [alice, bob] { await s.close() }
        await node.stop()
    }
}
