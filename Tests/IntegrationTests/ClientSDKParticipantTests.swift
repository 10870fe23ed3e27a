import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// The docs' participant examples through the SDK against a real node: added participants
/// gain access to all earlier messages; removed participants keep what came before and
/// get nothing after; changing a distinct conversation's participants makes it
/// non-distinct while the distinct conversation of the new set stays as it was.
@Suite struct ClientSDKParticipantTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"
    static let carol: UserID = "carol"

    static func send(_ client: LaminaClient, _ text: String, in conversation: ConversationID) throws -> MessageID {
        try client.send(client.newMessage(parts: [MessagePart.with(text: text)]), in: conversation).id
    }

    @Test func theDocsParticipantExample() async throws {
        let node = try await TestNode.start("sdk-participants")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        // Carol's device fetches the earlier messages of conversations she joins.
        let carol = try ClientHarness.device(Self.carol, on: node) { $0.historyOnJoin = .complete }
        for client in [alice, bob] { try await ClientHarness.connect(client, on: node) }
        _ = try await ClientHarness.connectLive(carol, on: node)

        // Conversation A is distinct with alice and bob; B is distinct with all three.
        let a = try alice.newConversation(participants: [Self.bob]).id
        let m1 = try Self.send(alice, "m1: before carol", in: a)
        let b = try alice.newConversation(participants: [Self.bob, Self.carol]).id
        #expect(a != b)
        let inB = try Self.send(alice, "in B", in: b)
        try await ClientHarness.waitUntil(carol, "B at carol") { try carol.message(inB) != nil }
        try await ClientHarness.waitUntil(bob, "m1 at bob") { try bob.message(m1) != nil }
        #expect(try carol.conversation(a) == nil)  // not a participant of A yet

        // Adding carol to A: A becomes non-distinct with three participants, B stays distinct.
        let bobChanges = Recorder(bob.changes())
        try alice.addParticipants([Self.carol], to: a)
        let three: Set<UserID> = [Self.alice, Self.bob, Self.carol]
        for client in [alice, bob, carol] {
            try await ClientHarness.waitUntil(client, "carol in A at \(client.user)") {
                try client.conversation(a)?.conversation.participants == three
            }
            #expect(try client.conversation(a)?.conversation.isDistinct == false)
        }
        #expect(try alice.conversation(b)?.conversation.isDistinct == true)
        // the distinct one of the set is B
        #expect(try alice.newConversation(participants: [Self.bob, Self.carol]).id == b)
        // Bob's app was told what changed, with the values before and after.
        try await bobChanges.wait("bob's participants change for A") { batches in
            batches.joined().contains {
                guard case .conversation(let c) = $0.object, c.id == a else { return false }
                return $0.property == ConversationProperty.participants
                    && $0.before == .participants([Self.alice, Self.bob]) && $0.after == .participants(three)
            }
        }
        #expect(
            bobChanges.changes.contains {
                $0.property == ConversationProperty.isDistinct && $0.before == .bool(true) && $0.after == .bool(false)
            })

        // "New participants will gain access to all previous messages": carol's device
        // fetches them on joining, and can ask again.
        try await ClientHarness.waitUntil(carol, "m1 at carol") { try carol.message(m1) != nil }
        #expect(try carol.message(m1)?.message.position == (try alice.message(m1))?.message.position)
        #expect(try await carol.fetchHistory(of: a) == [m1])
        #expect(try carol.messages(in: a).map(\.id) == [m1])

        let m2 = try Self.send(alice, "m2: with carol", in: a)
        try await ClientHarness.waitUntil(carol, "m2 at carol") { try carol.message(m2) != nil }
        try await ClientHarness.waitUntil(bob, "m2 at bob") { try bob.message(m2) != nil }

        // "Removed participants will only lose access to future content."
        try alice.removeParticipants([Self.bob], from: a)
        try await ClientHarness.waitUntil(bob, "bob's removal at bob") {
            try bob.conversation(a)?.conversation.participants == [Self.alice, Self.carol]
        }
        let m3 = try Self.send(alice, "m3: after bob left", in: a)
        try await ClientHarness.waitUntil(carol, "m3 at carol") { try carol.message(m3) != nil }
        // A later message to bob elsewhere: bob's feed is ordered, so once it is here, m3 would be too.
        let marker = try Self.send(alice, "marker for bob", in: b)
        try await ClientHarness.waitUntil(bob, "the marker at bob") { try bob.message(marker) != nil }
        #expect(try bob.message(m3) == nil)
        #expect(try bob.messages(in: a).map(\.id) == [m1, m2])  // bob keeps what came before
        #expect(try await bob.fetchHistory(of: a) == [m1, m2])  // and the node serves him only that
        #expect(try bob.message(m3) == nil)
        #expect(try carol.messages(in: a).map(\.id) == [m1, m2, m3])

        // Bob can no longer write to A.
        let refused = #expect(throws: ClientError.self) { try Self.send(bob, "may I?", in: a) }
        #expect(refused?.code == .notAllowed)

        for client in [alice, bob, carol] { try await client.close() }
        await node.stop()
    }

    @Test func historyPagesBackwardsThroughOlderMessages() async throws {
        let node = try await TestNode.start("sdk-history")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let carol = try ClientHarness.device(Self.carol, on: node) { $0.fetchesHistoryOnJoin = false }
        try await ClientHarness.connect(alice, on: node)
        _ = try await ClientHarness.connectLive(carol, on: node)

        let conversation = try alice.newConversation(
            participants: [Self.bob], options: ConversationOptions(isDistinct: false)
        ).id
        let sent = try (1...5).map { try Self.send(alice, "old \($0)", in: conversation) }
        try await ClientHarness.waitUntil(alice, "the five messages sent") {
            try sent.allSatisfy { try alice.isSent($0) }
        }
        try alice.addParticipants([Self.carol], to: conversation)
        _ = try await carol.waitForCreation(of: conversation, timeout: .seconds(60))
        #expect(try carol.messages(in: conversation).isEmpty)  // history on join is off
        var zero = carol.configuration
        zero.historyOnJoin = .lastN(0)
        #expect(throws: ClientError.self) { try zero.validate() }

        let newest = try await carol.fetchHistory(of: conversation, policy: .lastN(2))
        #expect(newest == Array(sent[3...4]))
        let oldest = try #require(try carol.message(newest[0])?.message.position)
        let older = try await carol.fetchHistory(of: conversation, policy: .lastN(2), before: oldest)
        #expect(older == Array(sent[1...2]))
        let rest = try await carol.fetchHistory(
            of: conversation, policy: .lastN(2), before: try #require(try carol.message(older[0])?.message.position))
        #expect(rest == [sent[0]])
        let none = try await carol.fetchHistory(
            of: conversation, policy: .lastN(2), before: try #require(try carol.message(sent[0])?.message.position))
        #expect(none.isEmpty)
        #expect(try carol.messages(in: conversation).map(\.id) == sent)
        #expect(try carol.conversation(conversation)?.totalMessageCount == 5)

        await #expect(throws: ClientError.self) { try await carol.fetchHistory(of: conversation, policy: .lastN(0)) }
        let unknown = await #expect(throws: ClientError.self) { try await carol.fetchHistory(of: .random()) }
        #expect(unknown?.code == .notFound)
        let stranger = try ClientHarness.device("dave", on: node)
        let notHeld = await #expect(throws: ClientError.self) { try await stranger.fetchHistory(of: conversation) }
        #expect(notHeld?.code == .notFound)
        // A store that holds the conversation without its user taking part: the node refuses.
        let held = try #require(try carol.conversation(conversation)).conversation
        try stranger.store.apply([.conversation(held)])
        let notConnected = await #expect(throws: ClientError.self) { try await stranger.fetchHistory(of: conversation) }
        #expect(notConnected?.code == .notConnected)
        _ = try await ClientHarness.connectLive(stranger, on: node)
        let refused = await #expect(throws: ClientError.self) { try await stranger.fetchHistory(of: conversation) }
        #expect(refused?.code.rawValue == WireError.Code.notAParticipant.name)

        for client in [alice, carol, stranger] { try await client.close() }
        await node.stop()
    }
}
