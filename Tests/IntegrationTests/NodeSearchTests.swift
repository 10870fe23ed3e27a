import Foundation
import LaminaClient
import LaminaModel
import LaminaStore
import Testing

/// Search on the node (issue 38 item 5) on a real node over TLS: the SDK's
/// `searchMessagesOnNode` (SEARCH_MESSAGES over HTTP/2) finds history the device never fetched
/// and stores it; the Server API's `GET /users/:id/messages?search=` and the Client API's
/// `GET /messages?search=` over HTTP/1.1 and HTTP/2 answer the same search. A removed participant
/// finds only what came before the removal; a message deleted for everyone is never found.
@Suite struct NodeSearchTests {
    /// Bob's group with Alice and Carol: three "lunch" messages (one deleted for everyone)
    /// before Carol's removal, one after it, then two others; Bob's pair with Alice holds one more.
    struct Fixture {
        var node: TestNode
        var bob: LaminaClient
        var carol: LaminaClient
        var group: ConversationID
        var pair: ConversationID
        var beforeRemoval: [MessageID]
        var deleted: MessageID
        var afterRemoval: MessageID
        var inPair: MessageID
    }

    static func send(_ client: LaminaClient, _ text: String, in conversation: ConversationID) throws -> MessageID {
        try client.send(client.newMessage(parts: [MessagePart.with(text: text)]), in: conversation).id
    }

    static func fixture(_ name: String) async throws -> Fixture {
        let node = try await TestNode.start(name)
        let bob = try ClientHarness.device("bob", on: node)
        let carol = try ClientHarness.device("carol", on: node)
        for client in [bob, carol] { try await ClientHarness.connect(client, on: node) }
        let group = try bob.newConversation(
            participants: ["alice", "carol"], options: ConversationOptions(isDistinct: false)
        ).id
        let pair = try bob.newConversation(participants: ["alice"], options: ConversationOptions(isDistinct: false)).id
        let first = try send(bob, "Lunch at noon?", in: group)
        let second = try send(bob, "lunch moved to the cafe", in: group)
        let deleted = try send(bob, "secret lunch plans", in: group)
        let inPair = try send(bob, "lunchbox for you", in: pair)
        try await ClientHarness.waitUntil(carol, "Bob's messages at Carol") {
            try carol.message(first) != nil && carol.message(second) != nil && carol.message(deleted) != nil
        }
        try bob.delete(deleted, mode: .allParticipants)
        try await ClientHarness.waitUntil(carol, "the deletion at Carol") { try carol.message(deleted) == nil }
        try bob.removeParticipants(["carol"], from: group)
        try await waitForNode(node, "Carol's removal") { r in
            try r.participantState(of: "carol", in: group)?.isMember == false
        }
        let after = try send(bob, "lunch without carol", in: group)
        _ = try send(bob, "dinner later", in: group)
        _ = try send(bob, "see you", in: group)
        try await waitForNode(node, "Bob's last messages") { r in try r.messageCount(of: group) == 5 }
        return Fixture(
            node: node, bob: bob, carol: carol, group: group, pair: pair, beforeRemoval: [first, second],
            deleted: deleted, afterRemoval: after, inPair: inPair)
    }

    static func waitForNode(
        _ node: TestNode, _ what: String, _ condition: @escaping @Sendable (StorageReader) throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while try await !node.server.store.read(condition) {
            guard ContinuousClock.now < deadline else { throw CurlFailed(description: "timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    @Test func theSDKSearchesTheNodeAndStoresWhatItDidNotHave() async throws {
        let f = try await Self.fixture("node-search-sdk")
        // A new device of Alice's that holds each conversation's last message only.
        let alice = try ClientHarness.device("alice", on: f.node) { $0.synchronizationPolicy = .lastMessages(1) }
        _ = try await ClientHarness.connectLive(alice, on: f.node)
        try await ClientHarness.waitUntil(alice, "Alice's conversations") {
            try alice.conversation(f.group) != nil && alice.conversation(f.pair) != nil
        }
        #expect(try alice.message(f.beforeRemoval[0]) == nil, "the device does not hold old history")
        #expect(
            Set(try alice.searchMessages(MessageSearch("lunch")).map(\.id)) == [f.inPair],
            "its own index holds the pair's last message only")

        let found = try await alice.searchMessagesOnNode(MessageSearch("lunch"))
        #expect(Set(found.map(\.id)) == Set(f.beforeRemoval + [f.afterRemoval, f.inPair]))
        #expect(!found.map(\.id).contains(f.deleted))
        // Stored now: the device's own search finds them too.
        #expect(try alice.message(f.beforeRemoval[0]) != nil)
        #expect(Set(try alice.searchMessages(MessageSearch("lunch")).map(\.id)).isSuperset(of: f.beforeRemoval))
        // One conversation; the last word a prefix; pages.
        let inGroup = try await alice.searchMessagesOnNode(MessageSearch("lun", in: f.group))
        #expect(Set(inGroup.map(\.id)) == Set(f.beforeRemoval + [f.afterRemoval]))
        let firstPage = try await alice.searchMessagesOnNode(MessageSearch("lunch", limit: 2))
        let secondPage = try await alice.searchMessagesOnNode(MessageSearch("lunch", limit: 2, offset: 2))
        #expect(firstPage.count == 2 && secondPage.count == 2)
        #expect(Set((firstPage + secondPage).map(\.id)) == Set(found.map(\.id)))
        // Carol, removed: what came before her removal, never the deleted message.
        let carolFound = try await f.carol.searchMessagesOnNode(MessageSearch("lunch"))
        #expect(Set(carolFound.map(\.id)) == Set(f.beforeRemoval))
        // Bad searches are refused, and the session goes on.
        await #expect(throws: ClientError.self) { _ = try await alice.searchMessagesOnNode(MessageSearch(" ,; ")) }
        await #expect(throws: ClientError.self) {
            _ = try await alice.searchMessagesOnNode(MessageSearch("lunch", limit: 200, offset: 900))
        }
        #expect(try await alice.searchMessagesOnNode(MessageSearch("dinner")).count == 1)
        for client in [alice, f.bob, f.carol] { try await client.close() }
        await f.node.stop()
    }

    static func ids(_ response: CurlAPI.Response) -> Set<String> {
        Set(
            response.array.compactMap {
                ($0["id"] as? String)?.replacingOccurrences(of: "layer:///messages/", with: "")
            })
    }

    static func ids(_ messages: [MessageID]) -> Set<String> { Set(messages.map { $0.uuid.uuidString.lowercased() }) }

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func theServerAPIAndTheClientAPISearchAsTheUserSees(http: CurlAPI.HTTP) async throws {
        let f = try await Self.fixture("node-search-http-\(http == .http1 ? "h1" : "h2")")
        let server = CurlAPI(f.node.server, http: http)
        let asAlice = try await server.request("GET", "/users/alice/messages?search=lunch")
        #expect(asAlice.status == 200)
        #expect(asAlice.httpVersion == (http == .http1 ? "1.1" : "2"))
        #expect(Self.ids(asAlice) == Self.ids(f.beforeRemoval + [f.afterRemoval, f.inPair]))
        #expect(asAlice.array.allSatisfy { $0["is_unread"] != nil }, "the user's view")
        let asCarol = try await server.request("GET", "/users/carol/messages?search=LUNCH")
        #expect(Self.ids(asCarol) == Self.ids(f.beforeRemoval))
        let narrowed = try await server.request(
            "GET", "/users/alice/messages?search=lunch%20mov&conversation_id=\(f.group.uuid.uuidString)")
        #expect(Self.ids(narrowed) == Self.ids([f.beforeRemoval[1]]))
        #expect(try await server.request("GET", "/users/alice/messages?search=secret").array.isEmpty)
        let notIn = try await server.request(
            "GET", "/users/carol/messages?search=lunch&conversation_id=\(f.pair.uuid.uuidString)")
        #expect(notIn.status == 403)
        let missing = try await server.request("GET", "/users/alice/messages")
        #expect(missing.status == 422)
        #expect(missing.object["id"] as? String == "missing_property")
        for bad in [
            "search=lunch&page_size=0", "search=lunch&page_size=201", "search=lunch&offset=-1",
            "search=lunch&page_size=200&offset=801", "search=lunch&conversation_id=nope",
        ] {
            let refused = try await server.request("GET", "/users/alice/messages?\(bad)")
            #expect(refused.status == 422, "\(bad): \(refused.body)")
            #expect(refused.object["id"] as? String == "invalid_property")
        }
        let noWords = try await server.request("GET", "/users/alice/messages?search=%20%2C")
        #expect(noWords.status == 400)
        #expect(noWords.object["id"] as? String == "invalid_request")

        let carolREST = try await ClientAPICurl.session("carol", on: f.node, http: http)
        let carolSearch = try await carolREST.request("GET", "/messages?search=lunch")
        #expect(carolSearch.status == 200)
        #expect(Self.ids(carolSearch) == Self.ids(f.beforeRemoval))
        let aliceREST = try await ClientAPICurl.session("alice", on: f.node, http: http)
        let paged = try await aliceREST.request("GET", "/messages?search=lunch&page_size=3&offset=3")
        let all = try await aliceREST.request("GET", "/messages?search=lunch")
        #expect(paged.array.count == 1)
        #expect(all.array.count == 4)
        #expect(all.array.last?["id"] as? String == paged.array.first?["id"] as? String)
        #expect(try await aliceREST.request("GET", "/messages?search=dinner").array.count == 1)
        let noSession = try await ClientAPICurl(f.node, http: http).request("GET", "/messages?search=lunch")
        #expect(noSession.status == 401)
        for client in [f.bob, f.carol] { try await client.close() }
        await f.node.stop()
    }

    /// A peer indexes the messages it replicates (they are stored by the same append path) and
    /// drops those deleted for everyone: node B's Server API finds what was sent on node A.
    @Test func aPeerFindsWhatItReplicated() async throws {
        let (a, b, _) = try await PeerReplicationTests.cluster("node-search-peers")
        let bob = try ClientHarness.device("bob", on: a)
        try await ClientHarness.connect(bob, on: a)
        let conversation = try bob.newConversation(
            participants: ["alice"], options: ConversationOptions(isDistinct: false)
        ).id
        let message = try Self.send(bob, "replicated rhubarb tart", in: conversation)
        try await Self.waitForNode(b, "the message on node B") { r in try r.message(message) != nil }
        let onB = CurlAPI(b.server, http: .http2)
        #expect(Self.ids(try await onB.request("GET", "/users/alice/messages?search=rhubarb")) == Self.ids([message]))
        try bob.delete(message, mode: .allParticipants)
        try await Self.waitForNode(b, "the deletion on node B") { r in try r.message(message)?.isDeleted == true }
        #expect(try await onB.request("GET", "/users/alice/messages?search=rhubarb").array.isEmpty)
        try await bob.close()
        await b.stop()
        await a.stop()
    }
}
