import Foundation
import LaminaClient
import LaminaModel
import LaminaWire
import Testing

/// The SDK against Layer's documented semantics (issue #33), through LaminaClient against a
/// real node: the Platform API's `layer:///…` ids work where the SDK takes an id, a device of a
/// user added mid-session holds the earlier messages its synchronization policy gives, and
/// re-creating a distinct conversation with other metadata or options is reported with the
/// conversation that exists, on the device and by the node.
@Suite struct ClientSDKLayerSemanticsTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"
    static let carol: UserID = "carol"
    static let dave: UserID = "dave"

    static func send(_ client: LaminaClient, _ text: String, in conversation: ConversationID) throws -> MessageID {
        try client.send(client.newMessage(parts: [MessagePart.with(text: text)]), in: conversation).id
    }

    /// "Synchronization" in the docs: the backend creates a conversation and a message with the
    /// Platform API, hands their ids to the app, and the app waits for them by those ids.
    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func platformAPIIdentifiersWorkWhereTheSDKTakesAnID(_ http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("sdk-layer-ids")
        let alice = try ClientHarness.device(Self.alice, on: node)
        _ = try await ClientHarness.connectLive(alice, on: node)
        let api = CurlAPI(node.server, http: http)

        let created = try await api.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        #expect(created.status == 201, "\(created.body)")
        let conversationURL = try #require(created.object["id"] as? String)
        #expect(conversationURL.hasPrefix("layer:///conversations/"))
        let conversation = try ConversationID(parsing: conversationURL)
        let stored = try await alice.waitForCreation(of: conversation, timeout: .seconds(60))
        #expect(stored.id == conversation)
        #expect(
            try alice.conversation(ConversationID(parsing: conversationURL))?.conversation.participants == [
                Self.alice, Self.bob,
            ])

        let sent = try await api.request(
            "POST", "/conversations/\(conversation.uuid.uuidString.lowercased())/messages",
            json: #"{"sender_id":"layer:///identities/bob","parts":[{"body":"hi","mime_type":"text/plain"}]}"#)
        #expect(sent.status == 201, "\(sent.body)")
        let messageURL = try #require(sent.object["id"] as? String)
        #expect(messageURL.hasPrefix("layer:///messages/"))
        let message = try await alice.waitForCreation(of: try MessageID(parsing: messageURL), timeout: .seconds(60))
        #expect(message.message.conversationID == conversation)
        #expect(message.message.sender == Self.bob)
        // The part ids the Platform API gives name the SDK's parts.
        let parts = try #require(sent.object["parts"] as? [[String: Any]])
        let partURL = try #require(parts.first?["id"] as? String)
        let part = try MessagePartID(parsing: partURL)
        #expect(part.message == message.id)
        #expect(message.message.parts.map(\.id) == [part.part])

        try await alice.close()
        await node.stop()
    }

    /// "New participants will gain access to all previous messages in a conversation": a
    /// device of a user added mid-session holds what its synchronization policy gives on a
    /// first sync, without the app asking.
    @Test func aDeviceAddedMidSessionHoldsEarlierMessagesByItsPolicy() async throws {
        let node = try await TestNode.start("sdk-history-on-join")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let carol = try ClientHarness.device(Self.carol, on: node)  // the default: unread only
        let dave = try ClientHarness.device(Self.dave, on: node) { $0.synchronizationPolicy = .lastMessages(2) }
        try await ClientHarness.connect(alice, on: node)
        for client in [carol, dave] { _ = try await ClientHarness.connectLive(client, on: node) }

        let conversation = try alice.newConversation(
            participants: [Self.bob], options: ConversationOptions(isDistinct: false)
        ).id
        let sent = try (1...3).map { try Self.send(alice, "before \($0)", in: conversation) }
        try await ClientHarness.waitUntil(alice, "the three messages sent") {
            try sent.allSatisfy { try alice.isSent($0) }
        }
        try alice.addParticipants([Self.carol, Self.dave], to: conversation)

        // Carol has read none of them: unread only holds all three.
        try await ClientHarness.waitUntil(carol, "the earlier messages at carol") {
            try carol.messages(in: conversation).map(\.id) == sent
        }
        // Dave's policy is the last two.
        try await ClientHarness.waitUntil(dave, "the last two at dave") {
            try dave.messages(in: conversation).map(\.id) == Array(sent[1...2])
        }
        // It holds two, and knows of three (the node's count).
        try await ClientHarness.waitUntil(dave, "dave's count of all three") {
            try dave.conversation(conversation)?.totalNumberOfMessages == 3
        }
        #expect(try dave.conversation(conversation)?.totalMessageCount == 2)
        #expect(
            try carol.message(sent[0])?.message.position == (try alice.message(sent[0]))?.message.position)

        for client in [alice, carol, dave] { try await client.close() }
        await node.stop()
    }

    /// Layer's SDK: creating a distinct conversation that exists with other metadata or
    /// options fails with an error carrying the existing one; the same options (or none)
    /// resolve to it.
    @Test func reCreatingADistinctConversationWithOtherOptionsIsReportedOnTheDevice() async throws {
        let node = try await TestNode.start("sdk-distinct-recreate")
        let alice = try ClientHarness.device(Self.alice, on: node)
        var titled = Metadata()
        titled.values["title"] = .string("plans")
        let first = try alice.newConversation(participants: [Self.bob], options: ConversationOptions(metadata: titled))
        #expect(try alice.newConversation(participants: [Self.bob]).id == first.id)
        #expect(
            try alice.newConversation(participants: [Self.bob], options: ConversationOptions(metadata: titled)).id
                == first.id)

        var other = Metadata()
        other.values["title"] = .string("other plans")
        let byMetadata = #expect(throws: ClientError.self) {
            try alice.newConversation(participants: [Self.bob], options: ConversationOptions(metadata: other))
        }
        #expect(byMetadata?.code == .existingDistinctConversation)
        #expect(byMetadata?.existingConversation == first.id)
        let byReceipts = #expect(throws: ClientError.self) {
            try alice.newConversation(
                participants: [Self.bob], options: ConversationOptions(deliveryReceiptsEnabled: false))
        }
        #expect(byReceipts?.code == .existingDistinctConversation)
        #expect(byReceipts?.existingConversation == first.id)
        // Non-distinct conversations are never resolved.
        #expect(
            try alice.newConversation(
                participants: [Self.bob], options: ConversationOptions(isDistinct: false, metadata: other)
            ).id != first.id)
        #expect(try alice.execute(Query<StoredConversation>()).count == 2)
        try await alice.close()
        await node.stop()
    }

    /// The node's side: a device that created the distinct conversation offline, with other
    /// metadata than the one the backend created meanwhile, is told so (the command fails with
    /// `existing-distinct-conversation`) and its conversation follows the existing one.
    @Test func reCreatingADistinctConversationWithOtherMetadataIsReportedByTheNode() async throws {
        let node = try await TestNode.start("sdk-distinct-recreate-node")
        let alice = try ClientHarness.device(Self.alice, on: node)
        var mine = Metadata()
        mine.values["title"] = .string("alice's")
        let local = try alice.newConversation(participants: [Self.carol], options: ConversationOptions(metadata: mine))
        let message = try Self.send(alice, "written offline", in: local.id)

        let api = CurlAPI(node.server, http: .http2)
        let created = try await api.request(
            "POST", "/conversations", json: #"{"participants":["alice","carol"],"metadata":{"title":"backend's"}}"#)
        #expect(created.status == 201, "\(created.body)")
        let existing = try ConversationID(parsing: try #require(created.object["id"] as? String))

        let events = try await ClientHarness.connectLive(alice, on: node)
        try await events.wait("the creation's failure") { all in
            all.contains {
                guard case .commandFailed(let failure) = $0 else { return false }
                return failure.id == local.id.uuid
            }
        }
        let failure = try #require(
            events.all.lazy.compactMap { event -> OutboxFailure? in
                guard case .commandFailed(let f) = event, f.id == local.id.uuid else { return nil }
                return f
            }.first)
        #expect(failure.error.code == .existingDistinctConversation)
        try await ClientHarness.waitUntil(alice, "the local conversation follows the existing one") {
            try alice.store.currentIdentifier(of: local.id) == existing
        }
        try await ClientHarness.waitUntil(alice, "the message in the existing conversation") {
            try alice.message(message)?.message.conversationID == existing
        }
        #expect(try alice.conversation(existing)?.conversation.metadata.values["title"] == .string("backend's"))
        try await alice.close()
        await node.stop()
    }
}
