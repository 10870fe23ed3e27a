import Foundation
import LaminaClient
import LaminaModel
import LaminaWire
import Testing

/// Distinct conversations of the same participants created by two users before either saw
/// the other's, through the SDK against a real node: they end as one conversation on both
/// sides, the losing side's object follows the survivor's identifier and a change says so.
@Suite struct ClientSDKDistinctTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    @Test func distinctConversationsCreatedConcurrentlyEndAsOneOnBothSides() async throws {
        let node = try await TestNode.start("sdk-distinct")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        let aliceChanges = Recorder(alice.changes())
        let bobChanges = Recorder(bob.changes())

        // Both create "the" distinct conversation of {alice, bob} and write in it before
        // either has seen the other's.
        let fromAlice = try alice.newConversation(participants: [Self.bob]).id
        let fromBob = try bob.newConversation(participants: [Self.alice]).id
        #expect(fromAlice != fromBob)
        let aliceMessage = try alice.send(
            alice.newMessage(parts: try ClientSDKTests.text("alice first")), in: fromAlice
        ).id
        let bobMessage = try bob.send(bob.newMessage(parts: try ClientSDKTests.text("bob first")), in: fromBob).id

        async let a: Void = ClientHarness.connect(alice, on: node)
        async let b: Void = ClientHarness.connect(bob, on: node)
        _ = try await (a, b)

        for client in [alice, bob] {
            try await ClientHarness.waitUntil(client, "both messages in one conversation at \(client.user)") {
                let live = try client.execute(Query<StoredConversation>())
                guard live.count == 1, let only = live.first else { return false }
                return try client.messages(in: only.id).filter(\.message.isSent).count == 2
            }
        }
        // The node kept one of the two; every client follows it.
        let survivor = try alice.store.currentIdentifier(of: fromAlice)
        #expect([fromAlice, fromBob].contains(survivor))
        #expect(try bob.store.currentIdentifier(of: fromBob) == survivor)
        #expect(try alice.store.currentIdentifier(of: fromBob) == survivor || alice.conversation(fromBob) == nil)
        let loser = survivor == fromAlice ? fromBob : fromAlice
        let loserClient = survivor == fromAlice ? bob : alice
        let loserChanges = survivor == fromAlice ? bobChanges : aliceChanges

        let everyone = Query<StoredConversation>()
        for client in [alice, bob] {
            let conversations = try client.execute(everyone)
            #expect(conversations.map(\.id) == [survivor])
            #expect(conversations.first?.conversation.participants == [Self.alice, Self.bob])
            #expect(conversations.first?.conversation.isDistinct == true)
            let messages = try client.messages(in: survivor)
            #expect(Set(messages.map(\.id)) == [aliceMessage, bobMessage])
            #expect(messages.allSatisfy { $0.message.conversationID == survivor && $0.message.position != nil })
            // the old identifier leads to the survivor
            #expect(try client.conversation(loser)?.id ?? survivor == survivor)
        }
        #expect(try alice.messages(in: survivor).map(\.id) == bob.messages(in: survivor).map(\.id))
        #expect(try await ClientHarness.nodeMessageCount(node, survivor) == 2)

        // The losing side's app object followed the new identifier, and a change said so.
        try await loserChanges.wait("the identifier change on the losing side") { batches in
            batches.joined().contains {
                $0.type == .update && $0.property == ConversationProperty.identifier
                    && $0.before == .conversationID(loser) && $0.after == .conversationID(survivor)
            }
        }
        #expect(try loserClient.sendFailure(of: loserClient === alice ? aliceMessage : bobMessage) == nil)

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    /// Waits for the change that says `loser` now goes by `survivor`.
    static func identifierChange(
        _ changes: Recorder<[ObjectChange]>, from loser: ConversationID, to survivor: ConversationID
    ) async throws {
        try await changes.wait("the identifier change \(loser) -> \(survivor)") { batches in
            batches.joined().contains {
                $0.type == .update && $0.property == ConversationProperty.identifier
                    && $0.before == .conversationID(loser) && $0.after == .conversationID(survivor)
            }
        }
    }

    @Test func anOfflineDistinctConversationFollowsTheOneTheOtherUserAlreadyWroteIn() async throws {
        let node = try await TestNode.start("sdk-distinct-late")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        try await ClientHarness.connect(alice, on: node)
        let alices = try alice.newConversation(participants: [Self.bob]).id
        let first = try alice.send(alice.newMessage(parts: try ClientSDKTests.text("first")), in: alices).id
        try await ClientHarness.waitUntil(alice, "alice's message sent") { try alice.isSent(first) }

        // Bob, offline, made his own and wrote in it; on connecting he gets alice's first.
        let bobs = try bob.newConversation(participants: [Self.alice]).id
        let second = try bob.send(bob.newMessage(parts: try ClientSDKTests.text("second")), in: bobs).id
        let changes = Recorder(bob.changes())
        try await ClientHarness.connect(bob, on: node)
        try await Self.identifierChange(changes, from: bobs, to: alices)
        try await ClientHarness.waitUntil(bob, "bob's message sent into alice's conversation") {
            try bob.isSent(second)
        }
        try await ClientHarness.waitUntil(alice, "bob's message at alice") { try alice.message(second) != nil }

        for client in [alice, bob] {
            #expect(try client.execute(Query<StoredConversation>()).map(\.id) == [alices])
            #expect(try client.messages(in: alices).map(\.id) == [first, second])
            #expect(try ClientSDKTests.texts(client, alices) == ["first", "second"])
        }
        #expect(try bob.store.currentIdentifier(of: bobs) == alices)
        #expect(try bob.message(second)?.message.conversationID == alices)
        #expect(try bob.conversation(bobs)?.id == alices)
        #expect(try await ClientHarness.nodeMessageCount(node, alices) == 2)

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    @Test func aDistinctConversationResolvedBeforeAnyMessageIsRenamedInPlace() async throws {
        let node = try await TestNode.start("sdk-distinct-rename")
        // Alice's device (raw protocol) creates the distinct conversation and writes nothing:
        // bob cannot see it yet.
        let raw = try await node.session(Self.alice, device: UUID())
        let alices = ConversationID.random()
        try await raw.command(
            .createConversation(CreateConversation(conversationID: alices, participants: [Self.bob])), id: alices.uuid)

        let bob = try ClientHarness.device(Self.bob, on: node)
        let bobs = try bob.newConversation(participants: [Self.alice]).id
        let hello = try bob.send(bob.newMessage(parts: try ClientSDKTests.text("hello")), in: bobs).id
        let changes = Recorder(bob.changes())
        try await ClientHarness.connect(bob, on: node)
        try await Self.identifierChange(changes, from: bobs, to: alices)
        try await ClientHarness.waitUntil(bob, "bob's message sent") { try bob.isSent(hello) }

        let renamed = try #require(try bob.conversation(bobs))
        #expect(renamed.id == alices)
        #expect(renamed.isSynced)
        #expect(renamed.conversation.participants == [Self.alice, Self.bob])
        try await ClientHarness.waitUntil(bob, "the node's account of the conversation at bob") {
            try bob.conversation(alices)?.conversation.creator == Self.alice
        }
        #expect(try bob.execute(Query<StoredConversation>()).map(\.id) == [alices])
        #expect(try bob.messages(in: alices).map(\.id) == [hello])
        let atAlice = try await raw.message(hello)
        #expect(atAlice.conversationID == alices)
        #expect(atAlice.sender == Self.bob)
        #expect(try await ClientHarness.nodeMessageCount(node, alices) == 1)

        await raw.close()
        try await bob.close()
        await node.stop()
    }
}
