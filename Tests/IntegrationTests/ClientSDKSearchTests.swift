import Foundation
import LaminaClient
import LaminaModel
import Testing

/// The SDK's search on a device that synced from a real node over TLS + HTTP/2 (issue 38 item
/// 5): messages that arrive are found, messages deleted for everyone stop being found, and a
/// user finds only what their device holds (a conversation they are not in is never found).
@Suite struct ClientSDKSearchTests {
    static func send(_ client: LaminaClient, _ text: String, in conversation: ConversationID) throws -> MessageID {
        try client.send(client.newMessage(parts: [MessagePart.with(text: text)]), in: conversation).id
    }

    static func found(_ client: LaminaClient, _ text: String) throws -> Set<MessageID> {
        Set(try client.searchMessages(MessageSearch(text)).map(\.message.id))
    }

    @Test func findsWhatSyncedAndForgetsWhatWasDeleted() async throws {
        let node = try await TestNode.start("sdk-search")
        let alice = try ClientHarness.device("alice", on: node)
        let bob = try ClientHarness.device("bob", on: node)
        let carol = try ClientHarness.device("carol", on: node)
        for client in [alice, bob, carol] { try await ClientHarness.connect(client, on: node) }

        let shared = try bob.newConversation(participants: ["alice"], options: ConversationOptions(isDistinct: false))
            .id
        let private_ = try bob.newConversation(participants: ["carol"], options: ConversationOptions(isDistinct: false))
            .id
        let plan = try Self.send(bob, "the quarterly planning meeting moved to Thursday", in: shared)
        let other = try Self.send(bob, "quarterly numbers are in", in: shared)
        let secret = try Self.send(bob, "quarterly surprise party for Alice", in: private_)
        try await ClientHarness.waitUntil(alice, "both messages at Alice") {
            try alice.message(plan) != nil && alice.message(other) != nil
        }
        try await ClientHarness.waitUntil(carol, "the message at Carol") { try carol.message(secret) != nil }

        #expect(try Self.found(alice, "quarterly") == [plan, other])
        #expect(try Self.found(alice, "planning thurs") == [plan])
        #expect(try Self.found(alice, "plan thursday").isEmpty, "only the last word is a prefix")
        #expect(try Self.found(alice, "surprise").isEmpty, "a conversation Alice is not in")
        #expect(try Self.found(carol, "quarterly") == [secret])

        try bob.delete(plan, mode: .allParticipants)
        try await ClientHarness.waitUntil(alice, "the deletion at Alice") { try alice.message(plan) == nil }
        #expect(try Self.found(alice, "quarterly") == [other])
        #expect(try Self.found(alice, "thursday").isEmpty)
        for client in [alice, bob, carol] { try await client.close() }
        await node.stop()
    }
}
