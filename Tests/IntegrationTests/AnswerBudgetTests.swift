import Foundation
import LaminaModel
import LaminaNode
import LaminaWire
import NIOConcurrencyHelpers
import Testing

/// Issue 35 item 1: the node's memory for large answers in flight is bounded over every
/// client (``AnswerBudget``): a history is read from the store a page at a time, each page
/// holding a lease of the budget until its frames left the stream's paced queue, and one user
/// holds at most half of it. Checked with the node's own counter, not RSS (the release figures
/// are `lamina-bench resources --phases history`). Small scale: a 2 MiB budget (its least
/// value, two pages) against ~3.8 MB of history read by 8 devices at once.
@Suite struct AnswerBudgetTests {
    static let budget = 2 * 1_048_576
    static let messageCount = 160
    /// 12 inline parts of 2,000 bytes (the most a part holds is 2,048): ~24 KB a message.
    static func parts(_ n: Int) -> [MessagePart] {
        [try! MessagePart(text: "\(n)")]
            + (0..<12).map { _ in try! MessagePart(text: String(repeating: "h", count: 2_000)) }
    }

    static func start(_ name: String) async throws -> TestNode {
        try await TestNode.start(name) { c in
            c.resources.answerBudgetBytes = budget
            c.limits.stalledReaderTimeoutSeconds = 2
        }
    }

    /// Alice sends `messageCount` messages of ~24 KB to a conversation with Bob; their ids.
    static func seed(_ node: TestNode) async throws -> (ConversationID, Set<MessageID>) {
        let alice = try await ResourceLimitTests.HealthyPair.login(node, "alice")
        let conversation = try await MessagingTests.conversation(alice, with: ["alice", "bob"])
        var ids: [MessageID] = []
        for chunk in 0..<(messageCount / 20) {
            let frames = (0..<20).map { i -> Frame in
                let id = MessageID.random()
                ids.append(id)
                return .sendMessage(
                    SendMessage(
                        messageID: id, conversationID: conversation,
                        parts: parts(chunk * 20 + i)))
            }
            alice.send(frames)
            guard case .ack = try await alice.answer(to: ids[ids.count - 1].uuid, timeout: .seconds(120)) else {
                throw UnexpectedEvent(expected: "ACK", got: .frame(try await alice.nextFrame()))
            }
        }
        await alice.close()
        return (conversation, Set(ids))
    }

    /// `user` on a new device, authenticated.
    static func device(_ node: TestNode, _ user: UserID) async throws -> SyncTestClient {
        let client = try await node.connect()
        _ = try await client.hello()
        _ = try await client.authenticate(user: user, device: UUID(), dev: node.dev)
        return client
    }

    /// The complete history on `client`'s stream, read as fast as it comes: the message ids.
    static func fetch(_ client: SyncTestClient, _ conversation: ConversationID) async throws -> Set<MessageID> {
        let id = UUID()
        client.send(.fetchHistory(FetchHistory(requestID: id, conversationID: conversation, policy: .complete)))
        guard case .ack = try await client.answer(to: id, timeout: .seconds(240)) else { return [] }
        return Set(PacedAnswerTests.messages(client.seenChanges.filter { $0.seq == 0 }))
    }

    /// Samples the budget every 2 ms until cancelled: the most held, by one user, and waiting.
    static func sample(_ answers: AnswerBudget, user: UserID) -> Task<(held: Int, user: Int, waiting: Int), Never> {
        Task {
            var most = (held: 0, user: 0, waiting: 0)
            while !Task.isCancelled {
                most.held = max(most.held, answers.held)
                most.user = max(most.user, answers.held(by: user))
                most.waiting = max(most.waiting, answers.waiting)
                try? await Task.sleep(for: .milliseconds(2))
            }
            return most
        }
    }

    @Test func concurrentReadersOfALargeHistoryStayWithinTheAnswerBudget() async throws {
        let node = try await Self.start("answer-budget")
        let (conversation, sent) = try await Self.seed(node)
        let answers = node.server.engine.answers
        answers.resetPeak()
        let grantsBefore = answers.grants
        let readers = try await withThrowingTaskGroup(of: SyncTestClient.self) { group in
            for _ in 0..<8 { group.addTask { try await Self.device(node, "bob") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let alice = try await Self.device(node, "alice")
        let sampler = Self.sample(answers, user: "bob")
        let clock = ContinuousClock()
        let start = clock.now
        let results = try await withThrowingTaskGroup(of: Set<MessageID>.self) { group in
            for reader in readers { group.addTask { try await Self.fetch(reader, conversation) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        // Another user's answer while Bob's eight hold Bob's half of the budget.
        let aliceStart = clock.now
        async let bobAgain = Self.fetch(try await Self.device(node, "bob"), conversation)
        let alicesHistory = try await Self.fetch(alice, conversation)
        let aliceTook = clock.now - aliceStart
        #expect(try await bobAgain == sent)
        let took = clock.now - start
        sampler.cancel()
        let most = await sampler.value
        // Every answer complete.
        for result in results { #expect(result == sent, "\(sent.subtracting(result).count) messages missing") }
        #expect(alicesHistory == sent)
        // The node's counter: never above the budget, Bob never above half of it; the budget
        // was really what held the readers back (they waited for leases), and it is all given back.
        #expect(answers.peak <= Self.budget, "peak \(answers.peak) over the budget \(Self.budget)")
        #expect(most.user <= Self.budget / 2, "Bob held \(most.user), over half the budget")
        #expect(most.waiting > 0, "no answer ever waited for the budget")
        #expect(answers.grants - grantsBefore >= 4 * 8, "fewer pages than 8 readers of 4 pages each")
        try await ResourceLimitTests.eventually("every lease given back") {
            answers.held == 0 && answers.waiting == 0
        }
        print(
            "answer budget: 8 readers of \(sent.count) messages (~3.8 MB) complete in \(took), Alice's in \(aliceTook); budget peak \(answers.peak) of \(Self.budget), Bob at most \(most.user), up to \(most.waiting) answers waiting, \(answers.grants - grantsBefore) leases"
        )
        for reader in readers { await reader.close() }
        await alice.close()
        await node.stop()
    }

    @Test func readersThatStopHoldAtMostTheirShareAndAreReleased() async throws {
        let node = try await Self.start("answer-budget-stalled")
        let (conversation, sent) = try await Self.seed(node)
        let answers = node.server.engine.answers
        let baseline = node.server.admission.snapshot.liveTracked
        // Four devices of Bob ask for the history and read nothing.
        var stalled: [SyncTestClient] = []
        for _ in 0..<4 {
            let client = try await Self.device(node, "bob")
            client.stopReading()
            client.send(.fetchHistory(FetchHistory(requestID: UUID(), conversationID: conversation, policy: .complete)))
            stalled.append(client)
        }
        let sampler = Self.sample(answers, user: "bob")
        try await ResourceLimitTests.eventually("Bob's answers hold leases") { answers.held(by: "bob") > 0 }
        // Alice's answer passes meanwhile, within the other half of the budget.
        let alice = try await Self.device(node, "alice")
        let clock = ContinuousClock()
        let start = clock.now
        #expect(try await Self.fetch(alice, conversation) == sent)
        let aliceTook = clock.now - start
        await alice.close()
        // Each stalled stream is reset by the stall check (2 s without a byte taken), its
        // leases given back; the next one's answer then gets a lease, stalls and is reset.
        try await ResourceLimitTests.eventually("the stalled readers' sessions released", timeout: .seconds(60)) {
            node.server.admission.snapshot.liveTracked <= baseline
        }
        try await ResourceLimitTests.eventually("every lease given back") {
            answers.held == 0 && answers.waiting == 0
        }
        sampler.cancel()
        let most = await sampler.value
        #expect(most.user <= Self.budget / 2, "Bob held \(most.user), over half the budget")
        #expect(most.held <= Self.budget)
        print(
            "answer budget: 4 stalled readers held at most \(most.user) (budget \(Self.budget)); Alice's history complete in \(aliceTook); all released"
        )
        for client in stalled { await client.close() }
        await node.stop()
    }

    /// Twelve streams of Bob on one connection ask for the history and read nothing: one
    /// holds Bob's share of the budget (a page), the others wait for a lease holding nothing.
    /// Every one is reset within a few stall timeouts of its request, the waiting ones by the
    /// lease wait's own check (their connection holds output the client does not read); before,
    /// only the holder was checked, so they went one round of leases (2 s) after another, 24 s
    /// and more for the last. Meanwhile a device of Bob on another connection and Alice both get
    /// the complete history: streams that wait keep nobody from a lease.
    @Test func streamsThatReadNothingAreCutWithinTheStallTimeoutWhetherTheyHoldALeaseOrWait() async throws {
        let node = try await Self.start("answer-budget-unread")
        let (conversation, sent) = try await Self.seed(node)
        let answers = node.server.engine.answers
        let first = try await Self.device(node, "bob")
        var unread = [first]
        for _ in 1..<12 {
            let client = try await first.another()
            _ = try await client.hello()
            _ = try await client.authenticate(user: "bob", device: UUID(), dev: node.dev)
            unread.append(client)
        }
        let bob = try await Self.device(node, "bob")
        let alice = try await Self.device(node, "alice")
        let sampler = Self.sample(answers, user: "bob")
        let clock = ContinuousClock()
        let cut = NIOLockedValueBox<[Duration]>([])
        let start = clock.now
        for client in unread {
            client.stopReading()
            client.send(.fetchHistory(FetchHistory(requestID: UUID(), conversationID: conversation, policy: .complete)))
            let stream = client.stream
            try await stream.eventLoop.submit {
                stream.closeFuture.whenComplete { _ in cut.withLockedValue { $0.append(clock.now - start) } }
            }.get()
        }
        try await ResourceLimitTests.eventually("Bob's unread answers wait for leases") { answers.waiting >= 4 }
        async let bobsHistory = Self.fetch(bob, conversation)
        let alicesHistory = try await Self.fetch(alice, conversation)
        #expect(alicesHistory == sent)
        #expect(try await bobsHistory == sent)
        try await ResourceLimitTests.eventually("every unread stream cut", timeout: .seconds(90)) {
            cut.withLockedValue { $0.count } == unread.count
        }
        let bobDone = clock.now - start
        let times = cut.withLockedValue { $0 }.sorted()
        // Stall timeout 2 s: a lease wait's check looks every second; a stream granted its lease
        // after a wait in which the connection read nothing keeps its stall clock.
        let bound = Duration.seconds(10)
        #expect(times.last! <= bound, "the last unread stream was cut after \(times.last!), over \(bound)")
        try await ResourceLimitTests.eventually("every lease given back") {
            answers.held == 0 && answers.waiting == 0
        }
        sampler.cancel()
        let most = await sampler.value
        #expect(most.waiting >= 4, "up to \(most.waiting) answers waited")
        #expect(most.user <= Self.budget / 2, "Bob held \(most.user), over half the budget")
        print(
            "answer budget: 12 unread streams on one connection cut after \(times.first!)–\(times.last!) (stall timeout 2 s; up to \(most.waiting) waiting for a lease); Bob's other device and Alice complete by \(bobDone)"
        )
        for client in unread { await client.close() }
        await bob.close()
        await alice.close()
        await node.stop()
    }

    /// `client`'s answer to `request`, in the order it came: the messages (id, position).
    static func answer(_ client: SyncTestClient, _ request: FetchHistory) async throws -> [(
        MessageID, MessagePosition?
    )] {
        let before = client.seenChangeCount
        client.send(.fetchHistory(request))
        guard case .ack = try await client.answer(to: request.requestID, timeout: .seconds(240)) else { return [] }
        return client.seenChanges.dropFirst(before).compactMap { change in
            if case .messageCreated(let m) = change.event, change.seq == 0 { (m.id, m.position) } else { nil }
        }
    }

    /// last-n and `before` answers, which read up to 10,000 messages at once, are paged too:
    /// their start is found by walking the index backwards a page at a time, then they are sent
    /// forward a page at a time. Each is the right messages in ascending order, and the budget
    /// (2 MiB) is never passed: one read of 150 messages of ~24 KB (3.6 MB) would pass it.
    @Test func lastNAndBeforeAnswersArePagedWithinTheBudget() async throws {
        let node = try await Self.start("answer-budget-backwards")
        let (conversation, sent) = try await Self.seed(node)
        let answers = node.server.engine.answers
        let all = try await Self.answer(
            try await Self.device(node, "bob"),
            FetchHistory(requestID: UUID(), conversationID: conversation, policy: .complete))
        #expect(Set(all.map(\.0)) == sent && all.count == sent.count)
        let cases: [(String, FetchHistory, ArraySlice<(MessageID, MessagePosition?)>)] = [
            (
                "last 150", FetchHistory(requestID: UUID(), conversationID: conversation, policy: .lastN(150)),
                all.suffix(150)
            ),
            (
                "complete before the 151st",
                FetchHistory(requestID: UUID(), conversationID: conversation, policy: .complete, before: all[150].1),
                all.prefix(150)
            ),
            (
                "last 120 before the 151st",
                FetchHistory(requestID: UUID(), conversationID: conversation, policy: .lastN(120), before: all[150].1),
                all[30..<150]
            ),
            ("last 1", FetchHistory(requestID: UUID(), conversationID: conversation, policy: .lastN(1)), all.suffix(1)),
        ]
        for (label, request, expected) in cases {
            answers.resetPeak()
            let grants = answers.grants
            let got = try await Self.answer(try await Self.device(node, "bob"), request)
            #expect(got.map(\.0) == expected.map(\.0), "\(label): \(got.count) messages, expected \(expected.count)")
            #expect(answers.peak <= Self.budget, "\(label): peak \(answers.peak) over the budget \(Self.budget)")
            if expected.count >= 100 {
                #expect(answers.grants - grants >= 4, "\(label): \(answers.grants - grants) leases, fewer than 4 pages")
            }
        }
        await node.stop()
    }
}
