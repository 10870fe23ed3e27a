import Foundation
import LaminaModel
import LaminaWire
import NIOConcurrencyHelpers
import Testing

/// SPEC §5.7 and §6: a stream's commands are answered in the order received, and every
/// command sees the effect of every earlier command of its stream, also when the client
/// pipelines them (sends the next before the answer to the last). Hundreds of rounds on one
/// stream while other sessions keep the writer busy.
@Suite struct OrderedSessionTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    /// What a pipelined batch got back: the answered request ids in the order they came, and
    /// for each FETCH_HISTORY the ids of the messages its answer held.
    struct Answers {
        var order: [UUID] = []
        var errors: [UUID: ErrorFrame] = [:]
        var histories: [UUID: [MessageID]] = [:]
    }

    /// Sends `frames` at once, then reads until each has its answer (an ACK or an ERROR with
    /// its id). A history answer's messages (seq 0 changes) are counted for the FETCH_HISTORY
    /// whose ACK follows them.
    static func pipeline(_ client: SyncTestClient, _ frames: [Frame]) async throws -> Answers {
        let ids = frames.compactMap(\.commandID)
        client.send(frames)
        var answers = Answers()
        var pendingHistory: [MessageID] = []
        while answers.order.count < ids.count {
            let frame = try await client.nextFrame()
            switch frame {
            case .ack(let ack):
                answers.order.append(ack.requestID)
                if !pendingHistory.isEmpty {
                    answers.histories[ack.requestID] = pendingHistory
                    pendingHistory = []
                }
            case .error(let error):
                guard let id = error.requestID, !error.isFatal else {
                    throw UnexpectedEvent(expected: "answers to \(ids.count) commands", got: .frame(frame))
                }
                answers.order.append(id)
                answers.errors[id] = error
            default:
                for change in SyncTestClient.changes(in: frame) where change.seq == 0 {
                    if case .messageCreated(let m) = change.event { pendingHistory.append(m.id) }
                }
            }
        }
        return answers
    }

    static func send(_ id: MessageID, in conversation: ConversationID) -> Frame {
        .sendMessage(
            SendMessage(messageID: id, conversationID: conversation, parts: [try! MessagePart(text: "m \(id)")]))
    }

    static func fetch(_ id: UUID, _ conversation: ConversationID, _ policy: HistoryPolicy) -> Frame {
        .fetchHistory(FetchHistory(requestID: id, conversationID: conversation, policy: policy))
    }

    static func create(_ id: ConversationID, distinct: Bool = false) -> Frame {
        .createConversation(
            CreateConversation(
                conversationID: id, participants: [bob], options: ConversationOptions(isDistinct: distinct)))
    }

    /// Other users' sessions sending in their own conversations until stopped, so the writer's
    /// groups mix the tested stream's commands with others'.
    static func background(_ node: TestNode, pairs: Int) async throws -> (
        stop: @Sendable () -> Void, done: Task<Int, Error>
    ) {
        let stopped = NIOLockedValueBox(false)
        var clients: [(SyncTestClient, ConversationID)] = []
        for i in 0..<pairs {
            let client = try await node.session(try UserID("load-\(i)"), device: UUID())
            let conversation = ConversationID.random()
            try await client.command(
                .createConversation(
                    CreateConversation(
                        conversationID: conversation, participants: [try UserID("load-peer-\(i)")],
                        options: ConversationOptions(isDistinct: false))),
                id: conversation.uuid)
            clients.append((client, conversation))
        }
        let load = clients
        let done = Task {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for (client, conversation) in load {
                    group.addTask {
                        var sent = 0
                        while !stopped.withLockedValue({ $0 }) {
                            let batch = (0..<8).map { _ in MessageID.random() }
                            _ = try await Self.pipeline(client, batch.map { Self.send($0, in: conversation) })
                            sent += batch.count
                        }
                        await client.close()
                        return sent
                    }
                }
                return try await group.reduce(0, +)
            }
        }
        return ({ stopped.withLockedValue { $0 = true } }, done)
    }

    @Test func pipelinedReadsSeeTheStreamsEarlierWritesAndAnswersComeInOrder() async throws {
        let node = try await TestNode.start("ordered-session")
        let (stop, load) = try await Self.background(node, pairs: 2)
        let alice = try await node.session(Self.alice, device: UUID())
        let conversation = ConversationID.random()
        try await alice.command(Self.create(conversation), id: conversation.uuid)

        // SEND then FETCH_HISTORY (last 1), without waiting: the history is the message just sent.
        for _ in 0..<150 {
            let (message, read) = (MessageID.random(), UUID())
            let answers = try await Self.pipeline(
                alice, [Self.send(message, in: conversation), Self.fetch(read, conversation, .lastN(1))])
            #expect(answers.order == [message.uuid, read])
            #expect(answers.errors.isEmpty)
            #expect(answers.histories[read] == [message])
        }

        // CREATE then SEND then FETCH_HISTORY of the new conversation: found, holding the message.
        for _ in 0..<100 {
            let (created, message, read) = (ConversationID.random(), MessageID.random(), UUID())
            let answers = try await Self.pipeline(
                alice,
                [
                    Self.create(created), Self.send(message, in: created), Self.fetch(read, created, .complete),
                ])
            #expect(answers.order == [created.uuid, message.uuid, read])
            #expect(answers.errors.isEmpty, "\(answers.errors.values.map(\.reason))")
            #expect(answers.histories[read] == [message])
        }

        // A random mix of sends and reads on one stream: every read holds the stream's latest
        // sends (the conversation has no other writer), every answer in order.
        var rng = SystemRandomNumberGenerator()
        let mixed = ConversationID.random()
        try await alice.command(Self.create(mixed), id: mixed.uuid)
        var sent: [MessageID] = []
        for _ in 0..<50 {
            var frames: [Frame] = []
            var expected: [UUID: [MessageID]] = [:]
            var sentInBatch = sent
            for _ in 0..<Int.random(in: 2...12, using: &rng) {
                if Bool.random(using: &rng) {
                    let id = MessageID.random()
                    frames.append(Self.send(id, in: mixed))
                    sentInBatch.append(id)
                } else {
                    let read = UUID()
                    let n = Int.random(in: 1...4, using: &rng)
                    frames.append(Self.fetch(read, mixed, .lastN(UInt32(n))))
                    expected[read] = Array(sentInBatch.suffix(n))
                }
            }
            let answers = try await Self.pipeline(alice, frames)
            #expect(answers.order == frames.compactMap(\.commandID))
            #expect(answers.errors.isEmpty)
            for (read, messages) in expected { #expect((answers.histories[read] ?? []) == messages) }
            sent = sentInBatch
        }

        stop()
        let loadSent = try await load.value
        #expect(loadSent > 0)
        await alice.close()
        await node.stop()
    }

    /// BLOCK_USER, REGISTER_PUSH_TOKEN and NONCE_REQUEST behind pipelined sends are answered
    /// after them (SPEC §5.7: answers in the order of the frames they answer).
    @Test func sessionFramesBehindPipelinedCommandsAreAnsweredAfterThem() async throws {
        let node = try await TestNode.start("ordered-session-frames")
        let alice = try await node.session(Self.alice, device: UUID())
        let conversation = ConversationID.random()
        try await alice.command(Self.create(conversation), id: conversation.uuid)
        for round in 0..<50 {
            let sends = (0..<4).map { _ in MessageID.random() }
            let block = UUID()
            var tail: [Frame] = [.blockUser(BlockUser(requestID: block, user: "mallory", blocking: round % 2 == 0))]
            var tailIDs = [block]
            if round < 2 {  // a stream is issued a few nonces at most (SPEC §5.2)
                let nonce = UUID()
                tail.append(.nonceRequest(NonceRequest(requestID: nonce)))
                tailIDs.append(nonce)
            }
            alice.send(sends.map { Self.send($0, in: conversation) } + tail)
            var order: [UUID] = []
            while order.count < sends.count + tailIDs.count {
                switch try await alice.nextFrame() {
                case .ack(let ack): order.append(ack.requestID)
                case .nonce(let n): order.append(n.requestID)
                case .error(let e): throw CommandFailed(error: e)
                default: continue
                }
            }
            #expect(order == sends.map(\.uuid) + tailIDs)
        }
        await alice.close()
        await node.stop()
    }
}
