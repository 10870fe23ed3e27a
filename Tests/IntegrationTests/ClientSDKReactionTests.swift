import Foundation
import LaminaClient
import LaminaModel
import LaminaWire
import Testing

/// Reactions through the SDK on a real node over TLS + HTTP/2 (SPEC §6.9, issue 38 item 1): two
/// users, Alice on two devices. Reactions show at once where they are made, reach every device,
/// are queryable, notify the message's observers, and wait in the outbox while offline.
@Suite struct ClientSDKReactionTests {
    static let thumbs = "\u{1F44D}"
    static let party = "\u{1F389}"

    static func reactions(_ client: LaminaClient, _ message: MessageID) throws -> [String: Set<UserID>] {
        try client.message(message)?.reactions ?? [:]
    }

    @Test func reactionsReachEveryDeviceAreQueryableAndNotify() async throws {
        let node = try await TestNode.start("sdk-reactions")
        let alice1 = try ClientHarness.device("alice", on: node)
        let alice2 = try ClientHarness.device("alice", on: node)
        let bob = try ClientHarness.device("bob", on: node)
        for client in [alice1, alice2, bob] { try await ClientHarness.connect(client, on: node) }
        let conversation = try bob.newConversation(
            participants: ["alice"], options: ConversationOptions(isDistinct: false)
        )
        .id
        let message = try bob.send(bob.newMessage(parts: [MessagePart.with(text: "lunch?")]), in: conversation).id
        let other = try bob.send(bob.newMessage(parts: [MessagePart.with(text: "no reactions")]), in: conversation).id
        for client in [alice1, alice2] {
            try await ClientHarness.waitUntil(client, "both messages") {
                try client.message(message) != nil && client.message(other) != nil
            }
        }
        let bobChanges = bob.changes()

        // Alice reacts on her first device: shown there at once, then on her other device and Bob's.
        try alice1.react(Self.thumbs, to: message)
        #expect(try Self.reactions(alice1, message) == [Self.thumbs: ["alice"]])
        for client in [alice2, bob] {
            try await ClientHarness.waitUntil(client, "Alice's reaction") {
                try Self.reactions(client, message) == [Self.thumbs: ["alice"]]
            }
        }
        // Bob's observers were told with the message's reactions before and after.
        var told: [ObjectChange] = []
        for await batch in bobChanges {
            told += batch.filter { $0.property == MessageProperty.reactions }
            if !told.isEmpty { break }
        }
        let change = try #require(told.first)
        #expect(change.type == .update && change.before == .reactions([:]))
        #expect(change.after == .reactions([Self.thumbs: ["alice"]]))
        if case .message(let m) = change.object { #expect(m.id == message) }

        // Bob reacts twice: counts and "did I react" per device.
        try bob.react(Self.thumbs, to: message)
        try bob.react(Self.party, to: message)
        try await ClientHarness.waitUntil(alice2, "Bob's reactions") {
            try alice2.message(message)?.reactionCounts == [Self.thumbs: 2, Self.party: 1]
        }
        let seen = try #require(try alice2.message(message))
        #expect(seen.reactionKeys(of: "alice") == [Self.thumbs])
        #expect(seen.reactionKeys(of: "bob") == [Self.thumbs, Self.party])

        // Queries: the messages Alice reacted to; messages by how many reactions they have.
        let mine = Query<StoredMessage>(predicate: .property(MessageProperty.reactedBy, .contains, .user("alice")))
        #expect(try alice2.execute(mine).map(\.id) == [message])
        let reacted = Query<StoredMessage>(
            predicate: .property(MessageProperty.reactionCount, .greaterThan, .integer(0)),
            sortDescriptors: [QuerySortDescriptor(MessageProperty.reactionCount, ascending: false)])
        #expect(try alice2.execute(reacted).map(\.id) == [message])
        let byCount = Query<StoredMessage>(
            predicate: .property(MessageProperty.conversation, .equalTo, .conversation(conversation)),
            sortDescriptors: [QuerySortDescriptor(MessageProperty.reactionCount, ascending: false)])
        #expect(try alice2.execute(byCount).map(\.id) == [message, other])

        // Alice takes her reaction back from her second device: gone everywhere, Bob's stays.
        try alice2.unreact(Self.thumbs, from: message)
        for client in [alice1, alice2, bob] {
            try await ClientHarness.waitUntil(client, "Alice's reaction gone") {
                try Self.reactions(client, message) == [Self.thumbs: ["bob"], Self.party: ["bob"]]
            }
        }
        #expect(try alice1.execute(mine).isEmpty)
        // A key the protocol refuses never reaches the outbox.
        #expect(throws: ClientError.self) { try alice1.react("", to: message) }
        #expect(throws: ClientError.self) { try alice1.react(String(repeating: "x", count: 65), to: message) }
        for client in [alice1, alice2, bob] { try await client.close() }
        await node.stop()
    }

    @Test func anOfflineReactionWaitsInTheOutboxAndAConcurrentAddSurvivesARemove() async throws {
        let node = try await TestNode.start("sdk-reactions-offline")
        let alice1 = try ClientHarness.device("alice", on: node)
        let alice2 = try ClientHarness.device("alice", on: node)
        let bob = try ClientHarness.device("bob", on: node)
        for client in [alice1, alice2, bob] { try await ClientHarness.connect(client, on: node) }
        let conversation = try bob.newConversation(
            participants: ["alice"], options: ConversationOptions(isDistinct: false)
        )
        .id
        let message = try bob.send(bob.newMessage(parts: [MessagePart.with(text: "vote")]), in: conversation).id
        for client in [alice1, alice2] {
            try await ClientHarness.waitUntil(client, "the message") { try client.message(message) != nil }
        }
        try alice1.react(Self.party, to: message)
        for client in [alice2, bob] {
            try await ClientHarness.waitUntil(client, "the first reaction") {
                try Self.reactions(client, message) == [Self.party: ["alice"]]
            }
        }

        // Alice's second device goes offline and adds the reaction again there (it shows the
        // reaction, so this is a no-op locally: it is queued all the same) while her first
        // device takes it back. Online again, the queued add arrives after the remove: it wins.
        await alice2.disconnect()
        try alice2.unreact(Self.party, from: message)
        try alice2.react(Self.party, to: message)
        #expect(try Self.reactions(alice2, message) == [Self.party: ["alice"]])
        #expect(try alice2.store.outboxEntries().filter { $0.kind == OutboxCommandKind.react.rawValue }.count == 2)
        try alice1.unreact(Self.party, from: message)
        try await ClientHarness.waitUntil(bob, "the remove at Bob") { try Self.reactions(bob, message).isEmpty }

        try await ClientHarness.connect(alice2, on: node)
        for client in [alice1, alice2, bob] {
            try await ClientHarness.waitUntil(client, "the queued add") {
                try Self.reactions(client, message) == [Self.party: ["alice"]]
            }
        }
        // Both queued REACTs answered: they left the outbox (no store change to wait on: polled).
        let reacts = { try alice2.store.outboxEntries().filter { $0.kind == OutboxCommandKind.react.rawValue } }
        #expect(try await ReactionsAcrossPeersTests.poll("the REACTs answered") { try reacts().isEmpty })
        for client in [alice1, alice2, bob] { try await client.close() }
        await node.stop()
    }
}
