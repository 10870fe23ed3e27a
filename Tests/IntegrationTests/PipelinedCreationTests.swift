import Foundation
import LaminaModel
import LaminaWire
import Testing

/// SPEC §6.1, conversation aliases: CREATE_CONVERSATION and SEND_MESSAGE sent back to back
/// (no wait for the ACK) for a distinct conversation that already exists. The creation's id
/// becomes an alias of the existing conversation, so the message pipelined behind it lands
/// there, once, from any number of clients at once, across reconnects and restarts.
@Suite struct PipelinedCreationTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    static func create(_ id: ConversationID, with others: Set<UserID>, metadata: Metadata = Metadata()) -> Frame {
        .createConversation(
            CreateConversation(
                conversationID: id, participants: others,
                options: ConversationOptions(isDistinct: true, metadata: metadata)))
    }

    static func send(_ id: MessageID, in conversation: ConversationID, _ text: String) -> Frame {
        .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: [try! MessagePart(text: text)]))
    }

    static func ack(_ frame: Frame) -> Ack? {
        if case .ack(let ack) = frame { return ack }
        Issue.record("expected an ACK, got \(frame)")
        return nil
    }

    static func error(_ frame: Frame) -> ErrorFrame? {
        if case .error(let error) = frame { return error }
        Issue.record("expected an ERROR, got \(frame)")
        return nil
    }

    /// The ids of the conversation's messages, as FETCH_HISTORY (complete) returns them.
    static func history(_ client: SyncTestClient, _ conversation: ConversationID) async throws -> [MessageID] {
        let id = UUID()
        client.send(.fetchHistory(FetchHistory(requestID: id, conversationID: conversation, policy: .complete)))
        var out: [MessageID] = []
        while true {
            let frame = try await client.nextFrame()
            if case .ack(let ack) = frame, ack.requestID == id { return out }
            if case .error(let e) = frame, e.requestID == id { throw CommandFailed(error: e) }
            for change in SyncTestClient.changes(in: frame) where change.seq == 0 {
                if case .messageCreated(let m) = change.event { out.append(m.id) }
            }
            client.keep(frame)  // live changes stay for later waits
        }
    }

    @Test func createThenSendFromTwoClientsAtOnceLandsOnceInTheExistingConversation() async throws {
        let node = try await TestNode.start("pipelined-create")
        let setup = try await node.session(Self.alice, device: UUID())
        let existing = ConversationID.random()
        let firstID = MessageID.random()
        try await setup.command(Self.create(existing, with: [Self.bob]), id: existing.uuid)
        try await setup.command(Self.send(firstID, in: existing, "first"), id: firstID.uuid)

        // Two clients (another device of alice's and bob's) each create "the" distinct
        // conversation under their own id and send in it without waiting, at the same time.
        let aliceDevice = UUID()
        let a = try await node.session(Self.alice, device: aliceDevice)
        let b = try await node.session(Self.bob, device: UUID())
        let (xa, xb) = (ConversationID.random(), ConversationID.random())
        let (ma, mb) = (MessageID.random(), MessageID.random())
        let pairA = [Self.create(xa, with: [Self.bob]), Self.send(ma, in: xa, "from alice")]
        a.send(pairA)
        b.send(Self.create(xb, with: [Self.alice]), Self.send(mb, in: xb, "from bob"))
        async let answersA = [a.answer(to: xa.uuid), a.answer(to: ma.uuid)]
        async let answersB = [b.answer(to: xb.uuid), b.answer(to: mb.uuid)]
        for frame in try await answersA + answersB {
            // the CREATE's ACK and the SEND's both name the survivor
            #expect(Self.ack(frame)?.conversationID == existing)
        }
        let history = try await Self.history(setup, existing)
        #expect(history.count == 3)
        #expect(Set(history) == [firstID, ma, mb])
        // The messages carry the survivor's id.
        #expect(try await setup.message(ma).conversationID == existing)
        #expect(try await setup.message(mb).conversationID == existing)

        // A retry of the pipelined pair (a lost ACK) is answered the same, with no duplicate.
        a.send(pairA)
        #expect(Self.ack(try await a.answer(to: ma.uuid))?.conversationID == existing)
        #expect(try await Self.history(setup, existing).count == 3)

        // The alias is durable: after a restart, a new stream's command naming it still lands there.
        for c in [setup, a, b] { await c.close() }
        try await node.restart()
        let later = try await node.session(Self.alice, device: aliceDevice)
        let mc = MessageID.random()
        let ack = try await later.command(Self.send(mc, in: xa, "after restart"), id: mc.uuid)
        #expect(ack.conversationID == existing)
        #expect(try await Self.history(later, existing) == history + [mc])
        // An alias names one conversation for everyone: another user cannot take the id.
        let carolsOwn = try await node.session("carol", device: UUID())
        let taken = try await carolsOwn.answer(to: xa.uuid, sending: Self.create(xa, with: [Self.bob]))
        #expect(Self.error(taken)?.code == .idInUse)
        for c in [later, carolsOwn] { await c.close() }
        await node.stop()
    }

    @Test func aCreationRefusedForItsMetadataStillTakesTheMessagesPipelinedBehindIt() async throws {
        let node = try await TestNode.start("pipelined-conflict")
        let a = try await node.session(Self.alice, device: UUID())
        let existing = ConversationID.random()
        try await a.command(
            Self.create(existing, with: [Self.bob], metadata: ["title": .string("ours")]), id: existing.uuid)

        let b = try await node.session(Self.bob, device: UUID())
        let x = ConversationID.random()
        let m = MessageID.random()
        b.send(Self.create(x, with: [Self.alice], metadata: ["title": .string("mine")]), Self.send(m, in: x, "hello"))
        let refused = Self.error(try await b.answer(to: x.uuid))
        #expect(refused?.code == .existingDistinctConversation)
        #expect(refused?.conversationID == existing)
        #expect(refused?.isFatal == false)
        #expect(Self.ack(try await b.answer(to: m.uuid))?.conversationID == existing)
        #expect(try await Self.history(a, existing) == [m])
        // The refusal is answered the same on a retry (the alias does not turn it into an ACK).
        let again = Self.error(
            try await b.answer(
                to: x.uuid, sending: Self.create(x, with: [Self.alice], metadata: ["title": .string("mine")])))
        #expect(again?.code == .existingDistinctConversation)
        #expect(again?.conversationID == existing)
        for c in [a, b] { await c.close() }
        await node.stop()
    }
}

extension SyncTestClient {
    /// Sends `frame` and returns the frame answering `id`.
    func answer(to id: UUID, sending frame: Frame) async throws -> Frame {
        send(frame)
        return try await answer(to: id)
    }
}
